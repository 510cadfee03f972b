// Content hashes: SHA-256 (FIPS 180-4) for manifests; FNV-1a 64 for short
// keys; Lanes64 where a generated program checks data itself (external
// weights: cheap to emit in IR and word-parallel).
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

/// maxc's lanes64 checksum (docs/manifest.md), a corruption check, not a
/// cryptographic hash. With P = 0x100000001b3 and B = 0xcbf29ce484222325
/// (FNV-1a 64's prime and offset basis) and
///   step(x, w) = rotl64((x ^ w) * P, 31):
///   lane[k] = B + k (k = 0..7);
///   for every whole 64-byte block, lane[k] = step(lane[k], word k), the
///     block's k-th little-endian 64-bit word;
///   h = B; h = step(h, lane[k]) for k = 0..7 in order;
///   for each byte c of the last size % 64: h = (h ^ c) * P (FNV-1a);
///   h = step(h, size).
/// The eight lanes are independent chains, so a block costs eight
/// multiplies side by side instead of 64 in a row (byte-serial FNV-1a).
/// update() takes the bytes in spans of any size.
class Lanes64 {
public:
  static constexpr uint64_t kPrime = 0x100000001b3ull, kBasis = 0xcbf29ce484222325ull;
  static constexpr int kLanes = 8, kRotate = 31;
  static constexpr size_t kBlock = 64;
  static constexpr uint64_t step(uint64_t x, uint64_t w) {
    uint64_t y = (x ^ w) * kPrime;
    return (y << kRotate) | (y >> (64 - kRotate));
  }
  Lanes64();
  void update(const void *data, size_t size);
  /// The checksum of the bytes so far (the stream may go on).
  uint64_t value() const;

private:
  void blocks(const unsigned char *data, size_t count);
  uint64_t lanes_[kLanes];
  unsigned char pending_[kBlock];
  size_t pending_size_ = 0;
  uint64_t size_ = 0;
};

uint64_t lanes64(std::string_view data);

} // namespace maxc
