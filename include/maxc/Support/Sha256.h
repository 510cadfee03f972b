// Content hashes: SHA-256 (FIPS 180-4) for manifests, FNV-1a 64 where a
// generated program checks data itself (cheap to emit in IR).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace maxc {

/// Lower-case hex digest of `data` (OpenSSL libcrypto).
std::string sha256_hex(std::string_view data);

/// A digest computed while the bytes stream past (a writer hashes what it
/// writes, so nothing is read back).
class Sha256Stream {
public:
  Sha256Stream();
  ~Sha256Stream();
  void update(const void *data, size_t size);
  /// The lower-case hex digest; ends the stream.
  std::string hex();

private:
  struct Context;
  std::unique_ptr<Context> context_;
};

/// The digest of a file, read in 1 MiB chunks (never whole into memory);
/// its size in `bytes`. Throws maxc::Error (FileNotReadable).
std::string sha256_file_hex(const std::string &path, uint64_t *bytes = nullptr);

/// FNV-1a, 64-bit.
uint64_t fnv1a64(std::string_view data);

} // namespace maxc
