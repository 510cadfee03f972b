// ArtifactWriter: all-or-nothing writes that never destroy a user's file,
// and the depfile's escaping.
#include "TestUtil.h"

#include "maxc/Driver/ArtifactWriter.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Sha256.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

using namespace maxc;
using namespace maxc::driver;

namespace {

std::vector<std::string> listing(const std::string &dir) {
  std::vector<std::string> out;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("ArtifactWriter writes every output or none", "[driver][artifacts]") {
  test::TempDir dir;
  dir.write("m.o", "old object");
  dir.write("m.h", "old header");
  ::mkdir(dir.file("m.manifest.json").c_str(), 0777); // a directory where a file is expected
  ArtifactWriter w;
  w.add("obj", dir.file("m.o"), "new object");
  w.add("header", dir.file("m.h"), "new header");
  CHECK_THROWS_WITH(w.add("manifest", dir.file("m.manifest.json"), "{}"), Catch::Contains("is a directory"));
  // A failing rename (the target directory vanished) leaves the old files.
  ArtifactWriter v;
  v.add("obj", dir.file("m.o"), "new object");
  ::mkdir(dir.file("sub").c_str(), 0777);
  v.add("header", dir.file("sub/m.h"), "new header");
  ::rmdir(dir.file("sub").c_str());
  CHECK_THROWS_AS(v.commit(), Error);
  CHECK(read_file(dir.file("m.o")) == "old object");
  CHECK(listing(dir.path) == std::vector<std::string>{"m.h", "m.manifest.json", "m.o"}); // no temps left
  w.commit();
  CHECK(read_file(dir.file("m.o")) == "new object");
  CHECK(read_file(dir.file("m.h")) == "new header");
}

TEST_CASE("ArtifactWriter refuses to overwrite inputs or write one file twice", "[driver][artifacts]") {
  test::TempDir dir;
  std::string model = dir.write("model.json", "{}");
  ArtifactWriter w;
  w.add_input(model);
  CHECK_THROWS_WITH(w.add("obj", model, "x"), Catch::Contains("would overwrite the input"));
  CHECK_THROWS_WITH(w.add("obj", dir.path + "/./model.json", "x"), Catch::Contains("would overwrite the input"));
  // A hard link is the same file.
  REQUIRE(::link(model.c_str(), dir.file("alias.o").c_str()) == 0);
  CHECK_THROWS_WITH(w.add("obj", dir.file("alias.o"), "x"), Catch::Contains("would overwrite the input"));
  // Not existing yet: compared by normalized path.
  w.add("obj", dir.file("m.o"), "x");
  CHECK_THROWS_WITH(w.add("header", dir.path + "/../" + std::filesystem::path(dir.path).filename().string() + "/m.o", "y"),
                    Catch::Contains("are the same file"));
  CHECK_THROWS_WITH(w.add("obj", "", "x"), Catch::Contains("empty output path"));
  CHECK(read_file(model) == "{}");
}

TEST_CASE("ArtifactWriter writes through character devices and follows symlinks", "[driver][artifacts]") {
  test::TempDir dir;
  ArtifactWriter w;
  w.add("obj", "/dev/null", "bytes");
  w.add("header", "/dev/null", "more bytes"); // devices may take several outputs
  std::string target = dir.write("real.h", "old");
  REQUIRE(::symlink(target.c_str(), dir.file("link.h").c_str()) == 0);
  w.add("manifest", dir.file("link.h"), "new");
  w.commit();
  struct stat st;
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  REQUIRE(::lstat(dir.file("link.h").c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode)); // the link stays
  CHECK(read_file(target) == "new");
  // A FIFO would block: refused. A dangling symlink: refused.
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0666) == 0);
  ArtifactWriter v;
  CHECK_THROWS_WITH(v.add("obj", dir.file("fifo"), "x"), Catch::Contains("FIFO"));
  REQUIRE(::symlink(dir.file("nowhere/x").c_str(), dir.file("dangling").c_str()) == 0);
  CHECK_THROWS_WITH(v.add("obj", dir.file("dangling"), "x"), Catch::Contains("symlink"));
}

TEST_CASE("depfiles escape spaces, '#', '$' and backslashes", "[driver][artifacts]") {
  CHECK(depfile_text("out dir/m.o", {"my model.json", "w#1.safetensors", "$HOME/x", "a\\b"}) ==
        "out\\ dir/m.o: \\\n  my\\ model.json \\\n  w\\#1.safetensors \\\n  $$HOME/x \\\n  a\\\\b\n");
  CHECK_THROWS_AS(depfile_text("m.o", {"new\nline"}), Error);
}

TEST_CASE("sha256_file_hex streams a file and agrees with sha256_hex", "[driver][artifacts]") {
  test::TempDir dir;
  std::string big(3 * (1 << 20) + 17, 'a'); // several read chunks and a partial one
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 131 % 251);
  std::string path = dir.write("big.bin", big);
  uint64_t bytes = 0;
  CHECK(sha256_file_hex(path, &bytes) == sha256_hex(big));
  CHECK(bytes == big.size());
  CHECK(sha256_file_hex(dir.write("empty", "")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK_THROWS_AS(sha256_file_hex(dir.file("missing")), Error);
}

TEST_CASE("a large artifact is hashed beside its write: same bytes, same digest", "[driver][artifacts]") {
  // ~21 MiB in views, owned pieces and zero runs: several of the writer's
  // 8 MiB batches, each hashed on a second thread while it is written.
  test::TempDir dir;
  auto block = std::make_shared<std::string>(size_t(3) << 20, '\0');
  for (size_t i = 0; i < block->size(); ++i)
    (*block)[i] = static_cast<char>((i * 2654435761u) >> 11);
  ByteChunks bytes("head");
  for (int k = 0; k < 6; ++k) {
    bytes.append_view(block->data() + k, block->size() - k, block);
    bytes.append_zeros(size_t(100) << 10);
    bytes.append(std::string(1000 + k, static_cast<char>('a' + k)));
  }
  ArtifactWriter w;
  w.add("obj", dir.file("big.o"), bytes);
  w.commit();
  std::string flat = bytes.str(), written = read_file(dir.file("big.o"));
  CHECK(written.size() == flat.size());
  CHECK(written == flat);
  CHECK(w.outputs()[0].sha256 == sha256_hex(flat));
}

namespace {

/// ~10 MiB of views and zeros (more than one 8 MiB batch of the writer).
ByteChunks big_bytes(const std::shared_ptr<std::string> &block) {
  for (size_t i = 0; i < block->size(); ++i)
    (*block)[i] = static_cast<char>((i * 2654435761u) >> 13);
  ByteChunks bytes("ELF?");
  bytes.append_zeros(60);
  for (int k = 0; k < 3; ++k) {
    bytes.append_view(block->data() + k, block->size() - k, block);
    bytes.append_zeros(size_t(64) << 10);
  }
  return bytes;
}

} // namespace

TEST_CASE("ArtifactWriter::start writes an output's head early, the rest at stage", "[driver][artifacts]") {
  test::TempDir dir;
  auto block = std::make_shared<std::string>(size_t(3) << 20, '\0');
  ByteChunks head = big_bytes(block);
  dir.write("m.o", "old object");
  for (bool same_head : {true, false}) {
    std::string before = read_file(dir.file("m.o"));
    ArtifactWriter w;
    Lanes64 sum;
    size_t visited = 0;
    w.start("obj", dir.file("m.o"), head, [&](const char *data, size_t size) {
      sum.update(data, size);
      visited += size;
    });
    CHECK(w.wait("obj") >= 0);
    CHECK(visited == head.size());
    CHECK(sum.value() == lanes64(head));
    CHECK(read_file(dir.file("m.o")) == before); // written to a temp, not renamed yet
    // The final bytes: the head itself and more (written on), or other
    // bytes of the same start (not the same pieces: written whole again).
    ByteChunks final_bytes = same_head ? head : ByteChunks(head.str());
    final_bytes.append(std::string("the code"));
    CHECK(final_bytes.starts_with(head) == same_head);
    w.add("header", dir.file("m.h"), "header");
    w.add("obj", dir.file("m.o"), final_bytes);
    w.commit();
    std::string flat = final_bytes.str();
    CHECK(read_file(dir.file("m.o")) == flat);
    CHECK(w.outputs()[0].sha256 == sha256_hex(flat));
    CHECK(w.outputs()[0].size == flat.size());
  }
  CHECK(listing(dir.path) == std::vector<std::string>{"m.h", "m.o"}); // no temps left
}

TEST_CASE("ArtifactWriter::start: a failed or abandoned compile leaves the old files and no temps",
          "[driver][artifacts]") {
  test::TempDir dir;
  auto block = std::make_shared<std::string>(size_t(3) << 20, '\0');
  ByteChunks head = big_bytes(block);
  dir.write("m.o", "old object");
  { // abandoned while the head is written (the backend failed): cancelled, joined, removed
    ArtifactWriter w;
    w.start("obj", dir.file("m.o"), head, {});
    w.cancel("obj");
  }
  { // never waited for: the destructor stops it
    ArtifactWriter w;
    w.start("obj", dir.file("m.o"), head, {});
  }
  { // a later output refused: nothing renamed
    ArtifactWriter w;
    w.start("obj", dir.file("m.o"), head, {});
    ::mkdir(dir.file("m.h").c_str(), 0777);
    CHECK_THROWS_WITH(w.add("header", dir.file("m.h"), "x"), Catch::Contains("is a directory"));
    ::rmdir(dir.file("m.h").c_str());
  }
  { // the head's directory gone before the rest: stage fails, the old file stays
    ArtifactWriter w;
    ::mkdir(dir.file("sub").c_str(), 0777);
    w.start("obj", dir.file("m.o"), head, {});
    w.add("obj", dir.file("m.o"), head);
    w.add("header", dir.file("sub/m.h"), "header");
    ::rmdir(dir.file("sub").c_str());
    CHECK_THROWS_AS(w.commit(), Error);
  }
  CHECK(read_file(dir.file("m.o")) == "old object");
  CHECK(listing(dir.path) == std::vector<std::string>{"m.o"});
  // Refused paths start nothing.
  ArtifactWriter w;
  std::string model = dir.write("model.json", "{}");
  w.add_input(model);
  CHECK_THROWS_WITH(w.start("obj", model, head, {}), Catch::Contains("would overwrite the input"));
  CHECK_THROWS_WITH(w.start("obj", dir.file("none/m.o"), head, {}), Catch::Contains("cannot create a file"));
  CHECK_THROWS_AS(w.wait("obj"), Error);
  // A character device takes the head too (hashed, written at commit).
  if (::access("/dev/null", W_OK) == 0) {
    ArtifactWriter n;
    n.start("obj", "/dev/null", head, {});
    ByteChunks all = head;
    all.append(std::string("tail"));
    n.add("obj", "/dev/null", all);
    n.commit();
    CHECK(n.outputs()[0].sha256 == sha256_hex(all.str()));
  }
}
