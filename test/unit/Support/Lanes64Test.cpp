// The lanes64 checksum (Support/Sha256.h) that NAME_set_weights checks
// external weights with: the spec written out byte by byte, streaming in
// spans of any size, and a change in each lane and in the tail detected.
#include "maxc/Support/Sha256.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

using namespace maxc;

namespace {

/// docs/manifest.md's definition, with the words assembled from bytes.
uint64_t reference(const std::string &bytes) {
  auto step = [](uint64_t x, uint64_t w) {
    uint64_t y = (x ^ w) * 0x100000001b3ull;
    return (y << 31) | (y >> 33);
  };
  uint64_t lane[8];
  for (int k = 0; k < 8; ++k)
    lane[k] = 0xcbf29ce484222325ull + k;
  size_t blocks = bytes.size() / 64;
  for (size_t j = 0; j < blocks; ++j)
    for (int k = 0; k < 8; ++k) {
      uint64_t w = 0;
      for (int b = 7; b >= 0; --b)
        w = (w << 8) | static_cast<unsigned char>(bytes[64 * j + 8 * k + b]);
      lane[k] = step(lane[k], w);
    }
  uint64_t h = 0xcbf29ce484222325ull;
  for (int k = 0; k < 8; ++k)
    h = step(h, lane[k]);
  for (size_t i = blocks * 64; i < bytes.size(); ++i)
    h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  return step(h, bytes.size());
}

std::string random_bytes(std::mt19937 &rng, size_t size) {
  std::string s(size, '\0');
  for (char &c : s)
    c = static_cast<char>(rng());
  return s;
}

} // namespace

TEST_CASE("lanes64 follows its definition, in spans of any size", "[support]") {
  std::mt19937 rng(20261204);
  for (size_t size : {0, 1, 7, 8, 63, 64, 65, 127, 128, 129, 200, 511, 512, 1000, 4096 + 17}) {
    std::string bytes = random_bytes(rng, size);
    const uint64_t expected = reference(bytes);
    CHECK(lanes64(bytes) == expected);
    for (int trial = 0; trial < 8; ++trial) { // random spans, empty ones too
      Lanes64 sum;
      size_t at = 0;
      while (at < size) {
        size_t n = std::min<size_t>(size - at, rng() % 150);
        sum.update(bytes.data() + at, n);
        at += n;
      }
      CHECK(sum.value() == expected);
      sum.update(bytes.data(), 0);
      CHECK(sum.value() == expected); // value() does not end the stream
    }
  }
  // Pinned: a change of the definition is a format change (header, manifest,
  // every external-weights object's NAME_set_weights).
  std::string counting;
  for (int i = 0; i < 200; ++i)
    counting += static_cast<char>(i);
  CHECK(lanes64(counting) == reference(counting));
  CHECK(lanes64("") == reference(""));
  CHECK(lanes64(counting) == 0xc67fb600cc62948dull);
}

TEST_CASE("lanes64 sees a change in every lane, in the tail and in the size", "[support]") {
  std::mt19937 rng(7);
  const std::string bytes = random_bytes(rng, 64 * 5 + 40); // 5 blocks and a 40-byte tail
  const uint64_t base = lanes64(bytes);
  for (size_t block = 0; block < 5; ++block)
    for (size_t k = 0; k < 8; ++k)
      for (size_t b : {size_t(0), size_t(7)}) { // the word's low and high byte
        std::string changed = bytes;
        changed[64 * block + 8 * k + b] ^= (b == 7 ? '\x80' : '\x01');
        CHECK(lanes64(changed) != base);
      }
  for (size_t i = 64 * 5; i < bytes.size(); ++i) {
    std::string changed = bytes;
    changed[i] ^= 1;
    CHECK(lanes64(changed) != base);
  }
  // The top bits of two words of one lane (which a multiply alone would
  // cancel), two lanes' words swapped, a zero byte more.
  std::string changed = bytes;
  changed[8 * 2 + 7] ^= '\x80';
  changed[64 + 8 * 2 + 7] ^= '\x80';
  CHECK(lanes64(changed) != base);
  changed = bytes;
  std::swap_ranges(changed.begin() + 8, changed.begin() + 16, changed.begin() + 24);
  CHECK(lanes64(changed) != base);
  CHECK(lanes64(bytes + std::string(1, '\0')) != base);
}
