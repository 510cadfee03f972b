// Small file helpers shared by every writer of artifacts.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace maxc {

/// Writes `chunks` to `path` through a temp file (`path.tmp.<pid>`) renamed
/// over it, so nobody ever sees a half-written file and a failed write leaves
/// nothing behind. Throws maxc::Error (FileWrite).
void write_file_atomically(const std::string &path, const std::vector<std::pair<const void *, size_t>> &chunks);
void write_file_atomically(const std::string &path, const std::string &contents);

/// An input file open for reading. Every reader of user files (models,
/// weights, .npy, graph JSON) opens through open_for_reading, so a FIFO, a
/// device or a directory is refused with a clear error instead of hanging
/// in open()/read() or failing later with a confusing message.
class InputFile {
public:
  InputFile() = default;
  InputFile(InputFile &&other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }
  InputFile &operator=(InputFile &&other) noexcept;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  /// The size fstat reported when the file was opened.
  uint64_t size() const { return size_; }

private:
  friend InputFile open_for_reading(const std::string &path, const std::string &what);
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// Opens `path` read-only with O_NONBLOCK (so opening a FIFO cannot block),
/// requires a regular file (fstat), then switches the descriptor back to
/// blocking reads. `what` names the file's role in errors ("model file",
/// ".npy file"). Throws maxc::Error (FileNotReadable) whose location is the
/// path and whose message says what the path is instead ("is a directory",
/// "is a FIFO (named pipe)", "is a character device", ...).
InputFile open_for_reading(const std::string &path, const std::string &what = "file");

/// Reads `size` bytes at `offset`; throws maxc::Error (FileNotReadable) on an
/// I/O error or when the file is shorter.
void read_exactly(int fd, void *data, uint64_t size, uint64_t offset, const std::string &path);

/// The whole file, opened with open_for_reading; throws maxc::Error
/// (FileNotReadable) naming the path.
std::string read_file(const std::string &path, const std::string &what = "file");

/// A read-only private mapping of the first `size` (> 0) bytes of the open
/// file `fd`, unmapped when the last owner goes; null on failure (errno
/// set). The mapping is registered so that release_file_pages can drop its
/// pages: a weights file is touched once to lay out or write its tensors,
/// and need not stay resident for the rest of the compile.
std::shared_ptr<const std::byte> map_file_readonly(int fd, size_t size);

/// Drops the resident pages wholly inside [p, p + n) that belong to a
/// mapping made by map_file_readonly (madvise MADV_DONTNEED: touched again,
/// they are read back from the file, so the bytes never change). Memory of
/// any other kind is left alone, so any pointer may be passed.
void release_file_pages(const void *p, size_t n);

/// The n bytes at p, copied to dst: read from the file (pread) where they
/// lie inside a map_file_readonly mapping, so that sampling a few bytes of a
/// mapped tensor maps no page of it (a page fault costs ~30 us on the dev
/// VM), else copied from memory.
void read_mapped_bytes(const void *p, size_t n, void *dst);

} // namespace maxc
