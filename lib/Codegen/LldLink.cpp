#include "LldLink.h"

#include "maxc/Support/Error.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>

#ifdef MAXC_HAVE_LLD
#include <lld/Common/Driver.h>
LLD_HAS_DRIVER(elf)
#endif

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <mutex>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace maxc::codegen {

namespace {

constexpr const char *kFallbackLinker = "/usr/lib/llvm-19/bin/ld.lld";

/// A mkdtemp directory whose known files are removed with it.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/maxc-lld-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data()))
      throw Error(ErrorCode::FileWrite, "cannot create a temporary directory from '" + pattern +
                                            "': " + std::strerror(errno));
    path_ = buffer.data();
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  ~TempDir() {
    for (const std::string &file : files_)
      ::unlink(file.c_str());
    ::rmdir(path_.c_str());
  }
  /// A path inside the directory, removed with it.
  std::string file(const std::string &name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

private:
  std::string path_;
  std::vector<std::string> files_;
};

void write_bytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out)
    throw Error(ErrorCode::FileWrite, "cannot write '" + path + "'");
}

std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::FileNotReadable, "cannot read '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string find_linker() {
  if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName("ld.lld-19"))
    return *found;
  if (::access(kFallbackLinker, X_OK) == 0)
    return kFallbackLinker;
  throw Error(ErrorCode::Internal, std::string("cannot find the linker: no ld.lld-19 on the PATH and no ") +
                                       kFallbackLinker + " (install lld-19)");
}

/// Runs `argv` (argv[0] a full path) with stdout and stderr sent to
/// `log_path`; returns the exit status, or throws when it cannot run.
int run_process(const std::vector<std::string> &argv, const std::string &log_path) {
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0)
    throw Error(ErrorCode::Internal, "posix_spawn_file_actions_init failed");
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);

  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);

  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw Error(ErrorCode::Internal, "cannot run '" + argv[0] + "': " + std::strerror(rc));

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw Error(ErrorCode::Internal, "waiting for '" + argv[0] + "' failed: " + std::strerror(errno));
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

#ifdef MAXC_HAVE_LLD
// LLD keeps its state in globals: one link at a time in this process; after
// a link it cannot recover from (canRunAgain false), the subprocess.
std::mutex lld_mutex;
bool lld_in_process = true;

/// Links in process; false when LLD cannot run again (use the subprocess).
bool link_in_process(const std::vector<std::string> &argv, int &rc, std::string &log) {
  std::lock_guard<std::mutex> lock(lld_mutex);
  if (!lld_in_process)
    return false;
  std::vector<const char *> args;
  for (const std::string &a : argv)
    args.push_back(a.c_str());
  std::string out_text, err_text;
  llvm::raw_string_ostream out(out_text), err(err_text);
  lld::Result result = lld::lldMain(args, out, err, {{lld::Gnu, &lld::elf::link}});
  out.flush();
  err.flush();
  log = err_text + out_text;
  rc = result.retCode;
  lld_in_process = result.canRunAgain;
  return true;
}
#endif

} // namespace

std::string run_lld(const std::vector<std::string> &flags, const std::vector<std::string> &inputs,
                    const std::string &what) {
  TempDir dir;
  std::vector<std::string> argv = {"ld.lld"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (size_t i = 0; i < inputs.size(); ++i) {
    argv.push_back(dir.file("in" + std::to_string(i) + ".o"));
    write_bytes(argv.back(), inputs[i]);
  }
  std::string output = dir.file("out");
  argv.insert(argv.end(), {"-o", output});
  int rc = 0;
  std::string log, linker = "LLD (in process)";
#ifdef MAXC_HAVE_LLD
  bool linked = link_in_process(argv, rc, log);
#else
  bool linked = false;
#endif
  if (!linked) {
    argv[0] = linker = find_linker();
    std::string log_path = dir.file("ld.log");
    rc = run_process(argv, log_path);
    if (rc != 0)
      try {
        log = read_bytes(log_path);
      } catch (const Error &) {
      }
  }
  log = llvm::StringRef(log).trim().str();
  if (rc != 0) {
    throw Error(ErrorCode::Internal, "linking " + what + " failed (" + linker + " exit " + std::to_string(rc) +
                                         "): " + (log.empty() ? "no message" : log));
  }
  return read_bytes(output);
}

} // namespace maxc::codegen
