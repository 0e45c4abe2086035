// mh-exec -- PROGRAM [ARG...]: the last hop of a sandboxed run (bwrap → setpriv → mh-exec → the
// vendor). Everything before it (bwrap as root in the host's mount namespace, setpriv with
// CAP_SETUID) runs with a fixed environment of the daemon's making, so nothing the run's submitter
// declared (an LD_PRELOAD, say) is ever read by a privileged program. mh-exec runs after the drop,
// as the run's user: it reads the vendor's environment from the sealed memfd named by
// METAHARNESS_EXEC_ENV_FD, closes it, and execs PROGRAM (an absolute path) with exactly that
// environment (under a root daemon setpriv has dropped to the run's uid before it; a daemon that is
// not root has nothing to drop). On any failure it says why on stderr and exits 127, as a failed exec does.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/process/exec_handoff.hpp"

namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "mh-exec: %s\n", why.c_str());
  std::exit(127);
}

std::string errno_text() {
  return std::strerror(errno);
}

// The descriptor named by the variable: decimal, above the standard streams.
int handed_fd() {
  const char* text = std::getenv(mh::daemon::kHandedEnvFdVar);
  if (!text || !*text)
    fail(std::string(mh::daemon::kHandedEnvFdVar) + " is not set: nothing hands the environment over");
  long fd = 0;
  for (const char* c = text; *c; ++c) {
    if (*c < '0' || *c > '9' || fd > 1'000'000) fail(std::string(mh::daemon::kHandedEnvFdVar) + " is not a descriptor");
    fd = fd * 10 + (*c - '0');
  }
  if (fd <= 2) fail(std::string(mh::daemon::kHandedEnvFdVar) + " names a standard stream");
  return static_cast<int>(fd);
}

// The sealed contents: nobody could have changed them after the daemon wrote them.
std::string read_sealed(int fd) {
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals == -1) fail("the handed descriptor is not a sealed memfd: " + errno_text());
  constexpr int kNeeded = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  if ((seals & kNeeded) != kNeeded) fail("the handed memfd is not sealed against writes");
  struct stat info {};
  if (::fstat(fd, &info) == -1) fail("cannot stat the handed memfd: " + errno_text());
  if (info.st_size < 0 || static_cast<std::size_t>(info.st_size) > mh::daemon::kMaxHandedEnvBytes)
    fail("the handed environment is larger than the bound");
  std::string bytes(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n == -1 && errno == EINTR) continue;
    if (n <= 0) fail("cannot read the handed environment: " + (n == 0 ? std::string("short") : errno_text()));
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "--") != 0) fail("usage: mh-exec -- PROGRAM [ARG...]");
  if (argv[2][0] != '/') fail(std::string("the program \"") + argv[2] + "\" is not an absolute path");
  const int fd = handed_fd();
  std::string bytes = read_sealed(fd);
  ::close(fd);
  if (!bytes.empty() && bytes.back() != '\0') fail("the handed environment does not end its last entry");
  std::vector<char*> env;
  for (std::size_t at = 0; at < bytes.size();) {
    char* entry = bytes.data() + at;
    std::size_t length = std::strlen(entry);
    const char* equals = std::strchr(entry, '=');
    if (length == 0 || !equals || equals == entry) fail("the handed environment holds a malformed entry");
    env.push_back(entry);
    at += length + 1;
  }
  env.push_back(nullptr);
  ::execve(argv[2], argv + 2, env.data());
  fail(std::string("cannot execute ") + argv[2] + ": " + errno_text());
}
