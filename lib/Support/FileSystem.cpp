#include "maxc/Support/FileSystem.h"

#include "maxc/Support/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
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

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::FileNotReadable, std::string("cannot open: ") + std::strerror(errno), path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    throw Error(ErrorCode::FileNotReadable, "cannot read", path);
  return buffer.str();
}

} // namespace maxc
