// metaharness-supervisor --spec <file>: a run's supervisor (docs/supervisor.md). Started by the
// daemon, one per run; outlives the daemon. Exit codes in supervisor.hpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "daemon/process/unique_fd.hpp"
#include "daemon/supervisor/supervisor.hpp"

namespace {

using mh::daemon::UniqueFd;
namespace sv = mh::supervisor;

int refuse(const std::string& why) {
  std::fprintf(stderr, "metaharness-supervisor: %s\n", why.c_str());
  return sv::kExitBadSpec;
}

std::optional<std::string> read_spec_file(const char* path, std::string& error) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) {
    error = std::string("cannot read the spec ") + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string text;
  char chunk[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = std::string("cannot read the spec ") + path + ": " + std::strerror(errno);
      return std::nullopt;
    }
    if (n == 0) return text;
    text.append(chunk, static_cast<std::size_t>(n));
    if (text.size() > (16u << 20)) {
      error = std::string("the spec ") + path + " is over 16 MiB";
      return std::nullopt;
    }
  }
}

// Not to die with the daemon: its own session (no terminal's or group's signal reaches it),
// nothing read from the daemon's stdin, its output in the run's supervisor.log.
bool detach_from_daemon(const sv::SupervisorSpec& spec) {
  if (::setsid() == -1 && ::getsid(0) != ::getpid()) return false;  // EPERM: leads a group already
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd log(::open(spec.log_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640));
  if (!null || !log) return false;
  ::fchmod(log.get(), 0640);
  return ::dup2(null.get(), STDIN_FILENO) != -1 && ::dup2(log.get(), STDOUT_FILENO) != -1 &&
         ::dup2(log.get(), STDERR_FILENO) != -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string_view(argv[1]) != "--spec") return refuse("usage: metaharness-supervisor --spec <file>");
  std::string error;
  auto text = read_spec_file(argv[2], error);
  if (!text) return refuse(error);
  auto spec = sv::parse_spec(*text);
  if (!spec) return refuse(std::string(argv[2]) + ": " + spec.error());
  if (!detach_from_daemon(*spec))
    return refuse("cannot detach (session, stdio to " + spec->log_file().string() + "): " + std::strerror(errno));
  const std::string run_id = spec->run_id;
  sv::supervisor_log(run_id, "started for " + spec->program.string());
  int code = sv::kExitSetupFailed;
  {
    boost::asio::io_context io(1);
    {
      auto supervisor = sv::Supervisor::start(io, std::move(*spec));
      if (!supervisor) {
        sv::supervisor_log(run_id, "cannot start: " + supervisor.error());
        return sv::kExitSetupFailed;
      }
      code = (*supervisor)->run();
    }
  }
  sv::supervisor_log(run_id, "exits " + std::to_string(code));
  return code;
}
