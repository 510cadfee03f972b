// ByteChunks' generated pieces (bytes made on demand, as the CPU's packed
// GEMM weights are while the blob is written): the same bytes, hash and
// equality as the flat string, across several kGeneratedBlock blocks and
// between other pieces; pointers stay valid for kGeneratedKeepBytes.
#include "TestUtil.h"

#include "maxc/Codegen/WeightsSection.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace maxc;

TEST_CASE("ByteChunks: generated pieces made block by block", "[codegen][weights]") {
  const size_t block = ByteChunks::kGeneratedBlock, size = 2 * block + 1000;
  auto byte_at = [](uint64_t i) { return static_cast<char>((i * 7 + i / 251) & 0xff); };
  size_t calls = 0;
  ByteChunks a("head");
  a.append_generated(size, [&](uint64_t offset, size_t n, char *dst) {
    ++calls;
    CHECK(offset % block == 0);
    for (size_t i = 0; i < n; ++i)
      dst[i] = byte_at(offset + i);
  });
  a.append_zeros(5);
  std::string flat = "head";
  for (size_t i = 0; i < size; ++i)
    flat += byte_at(i);
  flat += std::string(5, '\0');
  CHECK(a.size() == flat.size());
  CHECK(a.str() == flat);
  CHECK(calls == 3);
  CHECK(lanes64(a) == lanes64(ByteChunks(flat)));
  CHECK(a == ByteChunks(flat));
  CHECK(ByteChunks(flat) == a);
  CHECK(a == a);
  std::string changed = flat;
  changed[4 + block + 17] ^= 1;
  CHECK(a != ByteChunks(changed));
  // Every pointer handed out is still readable when the last of the piece's
  // blocks is handed out (8 MiB and 1000 bytes < kGeneratedKeepBytes).
  std::vector<std::pair<const char *, size_t>> spans;
  a.for_each([&](const char *d, size_t n) {
    spans.emplace_back(d, n);
    if (spans.size() == 4) { // head + the 3 generated blocks
      std::string seen;
      for (const auto &[p, len] : spans)
        seen.append(p, len);
      CHECK(seen == flat.substr(0, seen.size()));
    }
  });
}
