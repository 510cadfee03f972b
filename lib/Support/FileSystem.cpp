#include "maxc/Support/FileSystem.h"

#include "maxc/Support/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace maxc {

void write_file_atomically(const std::string &path,
                           const std::vector<std::pair<const void *, size_t>> &chunks) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    throw Error(ErrorCode::FileWrite, "cannot create '" + tmp + "': " + std::strerror(errno), path);
  auto fail = [&](const std::string &what) {
    int err = errno;
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::FileWrite, what + ": " + std::strerror(err), path);
  };
  for (const auto &[ptr, size] : chunks) {
    const char *p = static_cast<const char *>(ptr);
    size_t left = size;
    while (left > 0) {
      ssize_t n = ::write(fd, p, std::min<size_t>(left, size_t(1) << 30));
      if (n < 0) {
        if (errno == EINTR)
          continue;
        fail("cannot write '" + tmp + "'");
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0)
    fail("cannot sync '" + tmp + "'");
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0)
    fail("cannot close '" + tmp + "'");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    fail("cannot rename '" + tmp + "' to '" + path + "'");
}


void write_file_atomically(const std::string &path, const std::string &contents) {
  write_file_atomically(path, {{contents.data(), contents.size()}});
}

InputFile &InputFile::operator=(InputFile &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    other.fd_ = -1;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

namespace {

const char *file_kind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "something else";
}

} // namespace

InputFile open_for_reading(const std::string &path, const std::string &what) {
  if (path.empty())
    throw Error(ErrorCode::FileNotReadable, "cannot open " + what + ": the path is empty", path);
  InputFile f;
  // O_NONBLOCK: opening a FIFO without a writer would otherwise block forever.
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (f.fd_ < 0)
    throw Error(ErrorCode::FileNotReadable, "cannot open " + what + ": " + std::strerror(errno), path);
  struct stat st;
  if (::fstat(f.fd_, &st) != 0)
    throw Error(ErrorCode::FileNotReadable, "cannot stat " + what + ": " + std::strerror(errno), path);
  if (!S_ISREG(st.st_mode)) {
    std::string kind = file_kind(st.st_mode);
    throw Error(ErrorCode::FileNotReadable,
                "cannot read " + what + ": the path is " + kind + ", not a regular file", path);
  }
  int flags = ::fcntl(f.fd_, F_GETFL);
  if (flags < 0 || ::fcntl(f.fd_, F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw Error(ErrorCode::FileNotReadable, "cannot set up " + what + ": " + std::strerror(errno), path);
  f.size_ = static_cast<uint64_t>(st.st_size);
  return f;
}

void read_exactly(int fd, void *data, uint64_t size, uint64_t offset, const std::string &path) {
  char *p = static_cast<char *>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, static_cast<size_t>(std::min<uint64_t>(size, uint64_t(1) << 30)),
                        static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw Error(ErrorCode::FileNotReadable, std::string("cannot read: ") + std::strerror(errno), path);
    if (n == 0)
      throw Error(ErrorCode::FileNotReadable, "the file ends early (was it truncated while being read?)", path);
    p += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

std::string read_file(const std::string &path, const std::string &what) {
  InputFile f = open_for_reading(path, what);
  std::string out(static_cast<size_t>(f.size()), '\0');
  read_exactly(f.fd(), out.data(), out.size(), 0, path);
  return out;
}

namespace {

// The live map_file_readonly mappings: start -> length, and a descriptor
// of the file (-1 where none could be had) for read_mapped_bytes.
struct Mapping {
  size_t size = 0;
  int fd = -1;
};
std::mutex mappings_mutex;
std::map<uintptr_t, Mapping> &mappings() {
  static std::map<uintptr_t, Mapping> m;
  return m;
}

} // namespace

std::shared_ptr<const std::byte> map_file_readonly(int fd, size_t size) {
  void *m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED)
    return nullptr;
  int own_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  {
    std::lock_guard<std::mutex> lock(mappings_mutex);
    mappings()[reinterpret_cast<uintptr_t>(m)] = {size, own_fd};
  }
  return std::shared_ptr<const std::byte>(static_cast<const std::byte *>(m), [size, own_fd](const std::byte *p) {
    {
      std::lock_guard<std::mutex> lock(mappings_mutex);
      mappings().erase(reinterpret_cast<uintptr_t>(p));
    }
    ::munmap(const_cast<std::byte *>(p), size);
    if (own_fd >= 0)
      ::close(own_fd);
  });
}

namespace {
/// The live mapping that holds all of [begin, end), or null; the caller
/// holds mappings_mutex.
const std::pair<const uintptr_t, Mapping> *mapping_holding(uintptr_t begin, uintptr_t end) {
  auto it = mappings().upper_bound(begin);
  if (it == mappings().begin())
    return nullptr;
  --it; // the mapping starting at or before begin
  return end <= it->first + it->second.size ? &*it : nullptr;
}
} // namespace

void release_file_pages(const void *p, size_t n) {
  if (!p || n == 0)
    return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  std::lock_guard<std::mutex> lock(mappings_mutex);
  if (!mapping_holding(begin, end))
    return;
  uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if (first < last) // whole pages only: a neighbour's bytes on a shared page stay
    ::madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

void read_mapped_bytes(const void *p, size_t n, void *dst) {
  uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  int fd = -1;
  uintptr_t start = 0;
  {
    std::lock_guard<std::mutex> lock(mappings_mutex);
    if (auto *m = mapping_holding(begin, end)) {
      fd = m->second.fd;
      start = m->first;
    }
  }
  auto *out = static_cast<char *>(dst);
  size_t done = 0;
  while (fd >= 0 && done < n) {
    ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(begin - start + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break; // the file changed under the mapping: the mapping's bytes
    done += static_cast<size_t>(got);
  }
  if (done < n)
    std::memcpy(out + done, static_cast<const char *>(p) + done, n - done);
}

} // namespace maxc

