// Base64 (RFC 4648, with padding) for embedding bytes in JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace maxc {

std::string base64_encode(std::string_view bytes);
/// nullopt on malformed input.
std::optional<std::string> base64_decode(std::string_view text);

} // namespace maxc
