// Writing a command's outputs so that a failure never destroys a file:
//   - every output is first written to a temp file beside it, then all are
//     renamed into place; on any failure only the temps are removed, so the
//     previous good outputs stay intact;
//   - an output may not be one of the command's inputs (model, weights) or
//     another of its outputs: compared by device and inode where the file
//     exists, else by normalized absolute path;
//   - an empty path is an error;
//   - an existing character device (/dev/null) is written through, never
//     renamed over; a FIFO, socket, block device or directory is refused;
//   - a symlink is followed: the file it points to is replaced (the link
//     stays); a dangling symlink is refused.
// Errors are maxc::Error (FileWrite, or InvalidArgument for a path that
// must not be written) with the path as location.
#pragma once

#include "maxc/Codegen/WeightsSection.h"
#include "maxc/Support/Sha256.h"

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace maxc::driver {

class ArtifactWriter {
public:
  ArtifactWriter() = default;
  ArtifactWriter(const ArtifactWriter &) = delete;
  ArtifactWriter &operator=(const ArtifactWriter &) = delete;
  ~ArtifactWriter(); // removes the temps of an uncommitted write

  /// A file the command reads: no output may be it.
  void add_input(const std::string &path);
  /// Throws the maxc::Error a write of `path` would end with (FileWrite,
  /// "cannot create a file in DIR: ...") when its directory is missing, not
  /// a directory or not writable; a path that is a symlink or an existing
  /// character device is left to the write. Lets a compile fail before it
  /// does the work.
  static void check_directory(const std::string &path);
  /// Checks `path` (see above) and queues `bytes` for it. Throws maxc::Error.
  /// For an output start() began: its whole bytes (`path` the same).
  void add(const std::string &kind, const std::string &path, ByteChunks bytes);
  /// Checks `path` as add() does, creates its temp and starts writing
  /// `head`, the first bytes of the output, on a second thread (hashing it;
  /// `visit`, if set, sees each span in order on that thread). add() gives
  /// the whole bytes later: stage() writes on after `head` where they start
  /// with it (ByteChunks::starts_with), else writes them whole again.
  /// Throws maxc::Error (nothing started then).
  void start(const std::string &kind, const std::string &path, ByteChunks head, EarlyWrites::Visitor visit);
  /// Waits for `kind`'s started write; rethrows its error. Returns the time
  /// the writing thread took (ms).
  double wait(const std::string &kind);
  /// Stops `kind`'s started write at its next span and waits for it.
  void cancel(const std::string &kind);
  /// Writes the queued outputs to their temps, hashing each while it is
  /// written (Output::sha256); outputs added later are staged by the next
  /// call. Throws maxc::Error; the temps are removed then.
  void stage();
  /// Stages what is left, then renames every temp into place. Throws
  /// maxc::Error naming the path that failed; nothing is changed then.
  void commit();

  /// A started write (start()).
  struct Early {
    ByteChunks head;
    int fd = -1;
    std::unique_ptr<Sha256Stream> digest; // of `head`, continued by stage()
    std::atomic<bool> cancel{false};
    std::future<void> done;
    bool joined = false, added = false;
    std::exception_ptr error;
    double ms = 0;
  };
  struct Output {
    std::string kind, path, target; // target: where the bytes go (symlinks resolved)
    ByteChunks bytes;
    uint64_t size = 0;
    std::string sha256;             // set by stage()
    std::string temp;               // the staged temp file
    bool staged = false;
    bool write_through = false; // a character device
    std::unique_ptr<Early> early;  // set by start()
  };
  const std::vector<Output> &outputs() const { return outputs_; }

private:
  struct Identity {
    bool exists = false;
    unsigned long long dev = 0, ino = 0;
    std::string normalized;
  };
  static Identity identify(const std::string &path);
  bool same(const Identity &a, const Identity &b) const;
  Output &check(const std::string &kind, const std::string &path);
  void open_temp(Output &o, int *fd);
  Output *started(const std::string &kind);
  void join(Early &e);

  std::vector<std::pair<std::string, Identity>> inputs_;
  std::vector<Identity> output_ids_;
  std::vector<Output> outputs_;
};

/// A Make/Ninja depfile line "target: dep dep ..." with spaces, '#', '$'
/// and backslashes escaped. Throws maxc::Error for a newline in a path.
std::string depfile_text(const std::string &target, const std::vector<std::string> &dependencies);

} // namespace maxc::driver
