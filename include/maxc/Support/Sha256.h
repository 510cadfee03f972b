// SHA-256 (FIPS 180-4), for the content hashes in manifests.
#pragma once

#include <string>
#include <string_view>

namespace maxc {

/// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

} // namespace maxc
