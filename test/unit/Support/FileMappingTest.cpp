// map_file_readonly / release_file_pages: released pages of a file mapping
// read back the same bytes; memory that is not such a mapping is untouched.
#include "maxc/Support/FileSystem.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

using namespace maxc;

namespace {

/// `size` bytes written to `path`, then mapped (map_file_readonly); the
/// descriptor is closed again (the mapping keeps the file).
std::shared_ptr<const std::byte> map_temp_file(const std::string &path, const void *bytes, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(std::fwrite(bytes, 1, size, f) == size);
  std::fclose(f);
  int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  auto mapping = map_file_readonly(fd, size);
  ::close(fd);
  return mapping;
}

} // namespace

TEST_CASE("released file pages read back the file's bytes; other memory is left alone", "[support][mapping]") {
  std::string path = "/tmp/maxc-file-mapping-test-" + std::to_string(::getpid());
  const size_t size = 5 * 4096 + 123;
  std::vector<unsigned char> bytes(size);
  for (size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<unsigned char>((i * 131 + 7) & 0xff);
  auto mapping = map_temp_file(path, bytes.data(), size);
  ::unlink(path.c_str()); // and its bytes, even unlinked
  REQUIRE(mapping);
  const auto *p = reinterpret_cast<const unsigned char *>(mapping.get());
  CHECK(std::memcmp(p, bytes.data(), size) == 0);
  release_file_pages(p + 100, size - 200); // partial pages at both ends stay
  release_file_pages(p, size);
  CHECK(std::memcmp(p, bytes.data(), size) == 0);
  release_file_pages(p + size - 10, 100); // past the mapping's end: refused
  CHECK(std::memcmp(p, bytes.data(), size) == 0);

  // Heap memory (MADV_DONTNEED would zero it) is never released.
  std::vector<unsigned char> heap(bytes);
  release_file_pages(heap.data(), heap.size());
  CHECK(heap == bytes);
  release_file_pages(nullptr, 10);
}

TEST_CASE("read_mapped_bytes reads a mapping's bytes from its file, other memory as it is", "[support][mapping]") {
  std::string path = "/tmp/maxc-read-mapped-test-" + std::to_string(::getpid());
  const size_t size = 3 * 4096 + 77;
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<char>((i * 37 + 11) & 0xff);
  auto mapping = map_temp_file(path, bytes.data(), size);
  ::unlink(path.c_str()); // read through the mapping's own descriptor
  REQUIRE(mapping);
  const char *p = reinterpret_cast<const char *>(mapping.get());
  for (auto [at, n] : {std::pair<size_t, size_t>{0, 1024}, {4000, 200}, {size - 2048, 2048}, {size - 1, 1}, {5, 0}}) {
    std::string out(n, '\x5a');
    read_mapped_bytes(p + at, n, out.data());
    CHECK(out == bytes.substr(at, n));
  }
  std::string heap = bytes, out(100, '\0'); // not a mapping: copied
  read_mapped_bytes(heap.data() + 10, 100, out.data());
  CHECK(out == bytes.substr(10, 100));
}
