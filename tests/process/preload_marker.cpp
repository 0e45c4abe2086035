// A library a test preloads (LD_PRELOAD) to see who loads it: on load it creates
// "$MH_PRELOAD_MARKER_DIR/uid-<uid>-<pid>-<program>", so a test can tell a program that ran as root
// (a privileged hop before the drop) from the run's own. What an attacker's constructor would do
// instead (read /etc/shadow) is left out.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

__attribute__((constructor)) void mark_the_loader() {
  const char* dir = std::getenv("MH_PRELOAD_MARKER_DIR");
  if (!dir) return;
  char program[64] = "unknown";
  int comm = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (comm >= 0) {
    ssize_t n = ::read(comm, program, sizeof program - 1);
    if (n > 0) program[n - (program[n - 1] == '\n' ? 1 : 0)] = '\0';
    ::close(comm);
  }
  char path[4096];
  std::snprintf(path, sizeof path, "%s/uid-%u-%d-%s", dir, static_cast<unsigned>(::getuid()), ::getpid(), program);
  int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

}  // namespace
