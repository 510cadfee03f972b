// allocate_bulk / transpose_matrices / sampled_fingerprint (Support/BulkMemory.h).
#include "maxc/Support/BulkMemory.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace maxc;

TEST_CASE("transpose_matrices matches the element-by-element transpose", "[support][bulk]") {
  // Shapes around the 8 x 8 blocks and 64 x 64 tiles (ragged edges on both
  // sides, one row, one column), batched, for 1-, 2-, 4- and 8-byte elements.
  const int64_t shapes[][3] = {{1, 1, 1}, {1, 1, 37}, {1, 37, 1}, {1, 8, 8},   {1, 64, 64},
                               {1, 65, 63}, {2, 13, 70}, {3, 129, 7}, {1, 200, 130},
                               {1, 300, 700}, {2, 256, 300}}; // the last two split over threads
  for (size_t es : {size_t(1), size_t(2), size_t(4), size_t(8)})
    for (const auto &s : shapes) {
      int64_t batches = s[0], rows = s[1], cols = s[2];
      size_t n = static_cast<size_t>(batches * rows * cols) * es;
      std::vector<std::byte> src(n), got(n, std::byte{0xee}), want(n);
      for (size_t i = 0; i < n; ++i)
        src[i] = static_cast<std::byte>((i * 2654435761u >> 13) & 0xff);
      for (int64_t b = 0; b < batches; ++b)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            std::memcpy(&want[((b * cols + j) * rows + i) * es], &src[((b * rows + i) * cols + j) * es], es);
      transpose_matrices(src.data(), got.data(), batches, rows, cols, es);
      INFO("element size " << es << ", " << batches << " x " << rows << " x " << cols);
      CHECK(got == want);
    }
}

TEST_CASE("allocate_bulk gives aligned, writable, separate blocks", "[support][bulk]") {
  std::vector<std::shared_ptr<std::byte>> blocks;
  const size_t sizes[] = {0, 1, 100, size_t(1) << 20, (size_t(3) << 20) + 5, size_t(70) << 20, 4096};
  for (size_t size : sizes) {
    blocks.push_back(allocate_bulk(size));
    REQUIRE(blocks.back());
    CHECK(reinterpret_cast<uintptr_t>(blocks.back().get()) % 64 == 0);
    std::memset(blocks.back().get(), static_cast<int>(blocks.size()), size);
  }
  for (size_t k = 0; k < blocks.size(); ++k) // nothing overwrote another block
    for (size_t i = 0; i < sizes[k]; i += 4093)
      CHECK(blocks[k].get()[i] == static_cast<std::byte>(k + 1));
  blocks.clear(); // the arenas go with their last block
  CHECK(allocate_bulk(size_t(1) << 20));
}

TEST_CASE("sampled_fingerprint: equal bytes, equal fingerprints; it reads the size and the samples", "[support][bulk]") {
  std::vector<unsigned char> a(1 << 20), b;
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<unsigned char>(i * 7 + 3);
  b = a;
  CHECK(sampled_fingerprint(a.data(), a.size()) == sampled_fingerprint(b.data(), b.size()));
  CHECK(sampled_fingerprint(a.data(), a.size()) != sampled_fingerprint(a.data(), a.size() - 1));
  b[0] ^= 1;
  CHECK(sampled_fingerprint(a.data(), a.size()) != sampled_fingerprint(b.data(), b.size()));
  b = a;
  b.back() ^= 1;
  CHECK(sampled_fingerprint(a.data(), a.size()) != sampled_fingerprint(b.data(), b.size()));
  CHECK(sampled_fingerprint(a.data(), 10) == sampled_fingerprint(b.data(), 10));
}
