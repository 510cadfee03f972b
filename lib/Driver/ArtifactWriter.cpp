#include "maxc/Driver/ArtifactWriter.h"
#include "maxc/Support/FileSystem.h"

#include "maxc/Support/Async.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/Sha256.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <future>
#include <system_error>
#include <utility>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

namespace maxc::driver {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string directory_of(const std::string &path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// "a/./b/../c" → "/cwd/a/c" (lexically; for files that do not exist yet,
// with the directory resolved when it exists).
std::string normalize(const std::string &path) {
  std::string dir = directory_of(path), base = path.substr(path.find_last_of('/') + 1);
  if (path.find('/') == std::string::npos)
    base = path;
  char resolved[PATH_MAX];
  std::string prefix;
  if (::realpath(dir.c_str(), resolved))
    prefix = resolved;
  else {
    char cwd[PATH_MAX];
    prefix = (path[0] == '/' || !::getcwd(cwd, sizeof cwd)) ? dir : std::string(cwd) + "/" + dir;
  }
  return prefix + "/" + base;
}

void write_all(int fd, const char *data, size_t size, const std::string &path) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw Error(ErrorCode::FileWrite, "cannot write: " + errno_text(), path);
    done += static_cast<size_t>(n);
  }
}

/// Writes `bytes` to fd (fd < 0: writes nothing) piece by piece, hashing
/// them on the way into `digest` (and `visit`, if set, seeing each piece in
/// order). Large artifacts go in batches of about 8 MiB, each hashed on a
/// second thread while this one writes it (the digest is updated in order,
/// so it is the same whatever the timing); a written batch's pages of a
/// mapped weights file are then released, and its writeback to disk is
/// started (Linux sync_file_range, not waited for): ext4 allocates the
/// blocks of a file renamed over another one in rename(2) otherwise
/// (auto_da_alloc), on the critical path at commit.
/// `cancel`, once set, stops it (throws) at the next piece.
void write_hashed(int fd, const ByteChunks &bytes, const std::string &path, Sha256Stream &digest,
                  const EarlyWrites::Visitor &visit = {}, const std::atomic<bool> *cancel = nullptr) {
  constexpr size_t kBatch = size_t(8) << 20;
  std::vector<std::pair<const char *, size_t>> batch;
  size_t batch_bytes = 0;
  off_t written = fd >= 0 ? ::lseek(fd, 0, SEEK_CUR) : -1; // where the batch starts in the file
  auto flush = [&] {
    auto hash = [&] {
      for (const auto &[data, size] : batch) {
        digest.update(data, size);
        if (visit)
          visit(data, size);
      }
    };
    std::future<void> hashed;
    if (fd >= 0 && batch_bytes >= kBatch)
      try {
        hashed = std::async(std::launch::async, hash);
      } catch (const std::system_error &) { // no thread to be had: hash here
      }
    if (hashed.valid()) {
      try {
        for (const auto &[data, size] : batch)
          write_all(fd, data, size, path);
      } catch (...) {
        hashed.wait();
        throw;
      }
      hashed.get();
    } else {
      hash();
      if (fd >= 0)
        for (const auto &[data, size] : batch)
          write_all(fd, data, size, path);
    }
    for (const auto &[data, size] : batch)
      release_file_pages(data, size); // a view of a mapped weights file: written, not needed resident
#ifdef SYNC_FILE_RANGE_WRITE
    if (written >= 0 && batch_bytes >= kBatch) // best effort: a file system without it writes back later
      ::sync_file_range(fd, written, static_cast<off_t>(batch_bytes), SYNC_FILE_RANGE_WRITE);
#endif
    if (written >= 0)
      written += static_cast<off_t>(batch_bytes);
    batch.clear();
    batch_bytes = 0;
  };
  bytes.for_each([&](const char *data, size_t size) {
    if (cancel && cancel->load(std::memory_order_relaxed))
      throw Error(ErrorCode::FileWrite, "the write was cancelled", path);
    batch.emplace_back(data, size);
    batch_bytes += size;
    if (batch_bytes >= kBatch)
      flush();
  });
  flush();
}

std::string write_hashed(int fd, const ByteChunks &bytes, const std::string &path) {
  Sha256Stream digest;
  write_hashed(fd, bytes, path, digest);
  return digest.hex();
}

/// Temps are 0600; outputs get the usual 0666 & ~umask. Closes fd.
void finish_temp(int fd, const std::string &path) {
  mode_t mask = ::umask(0);
  ::umask(mask);
  bool ok = ::fchmod(fd, 0666 & ~mask) == 0;
  if (::close(fd) != 0 || !ok)
    throw Error(ErrorCode::FileWrite, "cannot write: " + errno_text(), path);
}

} // namespace

ArtifactWriter::Identity ArtifactWriter::identify(const std::string &path) {
  Identity id;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  id.normalized = normalize(path);
  return id;
}

bool ArtifactWriter::same(const Identity &a, const Identity &b) const {
  if (a.exists && b.exists)
    return a.dev == b.dev && a.ino == b.ino;
  return a.normalized == b.normalized;
}

void ArtifactWriter::add_input(const std::string &path) { inputs_.emplace_back(path, identify(path)); }

namespace {
[[noreturn]] void cannot_create_in(const std::string &dir, const std::string &path) {
  throw Error(ErrorCode::FileWrite, "cannot create a file in " + dir + ": " + errno_text(), path);
}
} // namespace

void ArtifactWriter::check_directory(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && (S_ISLNK(st.st_mode) || S_ISCHR(st.st_mode)))
    return; // the link's target's directory; a device is written through
  const std::string dir = directory_of(path);
  if (::stat(dir.c_str(), &st) != 0)
    cannot_create_in(dir, path);
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    cannot_create_in(dir, path);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    cannot_create_in(dir, path);
}

ArtifactWriter::Output &ArtifactWriter::check(const std::string &kind, const std::string &path) {
  if (path.empty())
    throw Error(ErrorCode::InvalidArgument, "an empty output path (" + kind + ")", "-o");
  Output out;
  out.kind = kind;
  out.path = out.target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (!::realpath(path.c_str(), resolved))
      throw Error(ErrorCode::InvalidArgument,
                  "the output is a symlink to a file that cannot be resolved (" + errno_text() + ")", path);
    out.target = resolved;
  }
  if (::stat(out.target.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw Error(ErrorCode::FileWrite, "the output path is a directory", path);
    if (S_ISCHR(st.st_mode))
      out.write_through = true;
    else if (!S_ISREG(st.st_mode))
      throw Error(ErrorCode::InvalidArgument,
                  "the output path is a FIFO, socket or block device; maxc writes regular files (or character "
                  "devices such as /dev/null)",
                  path);
  }
  Identity id = identify(out.target);
  for (const auto &[input, input_id] : inputs_)
    if (same(id, input_id))
      throw Error(ErrorCode::InvalidArgument,
                  "the " + kind + " output would overwrite the input " + input + "; choose another output path",
                  path);
  // Character devices (/dev/null) may take several outputs.
  if (!out.write_through)
    for (size_t i = 0; i < output_ids_.size(); ++i)
      if (same(id, output_ids_[i]))
        throw Error(ErrorCode::InvalidArgument,
                    "the " + kind + " output and the " + outputs_[i].kind + " output are the same file", path);
  output_ids_.push_back(id);
  outputs_.push_back(std::move(out));
  return outputs_.back();
}

ArtifactWriter::Output *ArtifactWriter::started(const std::string &kind) {
  for (Output &o : outputs_)
    if (o.early && o.kind == kind)
      return &o;
  return nullptr;
}

void ArtifactWriter::add(const std::string &kind, const std::string &path, ByteChunks bytes) {
  Output *o = started(kind);
  if (o && o->path != path)
    throw Error(ErrorCode::Internal, "the " + kind + " output was started as " + o->path, path);
  if (!o)
    o = &check(kind, path);
  else
    o->early->added = true;
  o->size = bytes.size();
  o->bytes = std::move(bytes);
}

void ArtifactWriter::open_temp(Output &o, int *fd) {
  std::string tmpl = o.target + ".tmp.XXXXXX";
  *fd = ::mkstemp(tmpl.data());
  if (*fd < 0)
    cannot_create_in(directory_of(o.target), o.path);
  o.temp = tmpl;
}

void ArtifactWriter::start(const std::string &kind, const std::string &path, ByteChunks head,
                           EarlyWrites::Visitor visit) {
  if (started(kind))
    throw Error(ErrorCode::Internal, "the " + kind + " output was started twice", path);
  Output &o = check(kind, path);
  auto early = std::make_unique<Early>();
  early->head = std::move(head);
  early->digest = std::make_unique<Sha256Stream>();
  if (!o.write_through)
    try {
      open_temp(o, &early->fd);
    } catch (...) {
      outputs_.pop_back();
      output_ids_.pop_back();
      throw;
    }
  Early *e = early.get();
  o.early = std::move(early);
  auto write = [e, path, visit = std::move(visit)] {
    auto begin = std::chrono::steady_clock::now();
    write_hashed(e->fd, e->head, path, *e->digest, visit, &e->cancel);
    e->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  };
  e->done = async_background(std::move(write)); // no thread to be had: written when waited for
}

void ArtifactWriter::join(Early &e) {
  if (e.joined)
    return;
  e.joined = true;
  try {
    e.done.get();
  } catch (...) {
    e.error = std::current_exception();
  }
}

double ArtifactWriter::wait(const std::string &kind) {
  Output *o = started(kind);
  if (!o)
    throw Error(ErrorCode::Internal, "no " + kind + " output was started");
  join(*o->early);
  if (o->early->error)
    std::rethrow_exception(o->early->error);
  return o->early->ms;
}

void ArtifactWriter::cancel(const std::string &kind) {
  if (Output *o = started(kind)) {
    o->early->cancel = true;
    join(*o->early);
  }
}

ArtifactWriter::~ArtifactWriter() {
  for (Output &o : outputs_)
    if (o.early) {
      o.early->cancel = true;
      join(*o.early);
      if (o.early->fd >= 0)
        ::close(o.early->fd);
    }
  for (const Output &o : outputs_)
    if (!o.temp.empty())
      ::unlink(o.temp.c_str());
}

void ArtifactWriter::stage() {
  try {
    for (Output &o : outputs_) {
      if (o.staged)
        continue;
      if (o.early) { // the head written (or being written) by start()
        Early &e = *o.early;
        if (!e.added)
          throw Error(ErrorCode::Internal, "the " + o.kind + " output was started but never given", o.path);
        join(e);
        if (e.error)
          std::rethrow_exception(e.error);
        if (o.bytes.starts_with(e.head)) {
          write_hashed(e.fd, o.bytes.after(e.head), o.path, *e.digest);
        } else { // other bytes after all: written whole
          if (e.fd >= 0 && (::ftruncate(e.fd, 0) != 0 || ::lseek(e.fd, 0, SEEK_SET) != 0))
            throw Error(ErrorCode::FileWrite, "cannot write: " + errno_text(), o.path);
          e.digest = std::make_unique<Sha256Stream>();
          write_hashed(e.fd, o.bytes, o.path, *e.digest);
        }
        o.sha256 = e.digest->hex();
        if (e.fd >= 0) {
          int fd = e.fd;
          e.fd = -1;
          finish_temp(fd, o.path);
        }
        o.staged = true;
        continue;
      }
      if (o.write_through) { // written at commit; hashed now
        o.sha256 = write_hashed(-1, o.bytes, o.path);
        o.staged = true;
        continue;
      }
      int fd = -1;
      open_temp(o, &fd);
      try {
        o.sha256 = write_hashed(fd, o.bytes, o.path);
      } catch (...) {
        ::close(fd);
        throw;
      }
      finish_temp(fd, o.path);
      o.staged = true;
    }
  } catch (...) {
    for (Output &o : outputs_) {
      if (o.early && o.early->fd >= 0) {
        ::close(o.early->fd);
        o.early->fd = -1;
      }
      if (!o.temp.empty()) {
        ::unlink(o.temp.c_str());
        o.temp.clear();
        o.staged = false;
      }
    }
    throw;
  }
}

void ArtifactWriter::commit() {
  stage();
  try {
    for (Output &o : outputs_) {
      if (o.write_through)
        continue;
      if (::rename(o.temp.c_str(), o.target.c_str()) != 0)
        throw Error(ErrorCode::FileWrite, "cannot replace the file: " + errno_text(), o.path);
      o.temp.clear();
    }
  } catch (...) {
    for (Output &o : outputs_)
      if (!o.temp.empty()) {
        ::unlink(o.temp.c_str());
        o.temp.clear();
      }
    throw;
  }
  for (const Output &o : outputs_) {
    if (!o.write_through)
      continue;
    int fd = ::open(o.target.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      throw Error(ErrorCode::FileWrite, "cannot open: " + errno_text(), o.path);
    try {
      write_hashed(fd, o.bytes, o.path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
}

std::string depfile_text(const std::string &target, const std::vector<std::string> &dependencies) {
  auto escape = [](const std::string &path) {
    if (path.find('\n') != std::string::npos)
      throw Error(ErrorCode::InvalidArgument, "a path with a newline cannot be written to a depfile", path);
    std::string out;
    for (char c : path) {
      if (c == ' ' || c == '#' || c == '\\')
        out += '\\';
      if (c == '$')
        out += '$';
      out += c;
    }
    return out;
  };
  std::string dep = escape(target) + ":";
  for (const std::string &f : dependencies)
    dep += " \\\n  " + escape(f);
  return dep + "\n";
}

} // namespace maxc::driver
