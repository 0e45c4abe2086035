// The shell's live vendor effects: what the core asks of the vendor (a line, stdin closed, the
// end with a grace, a hook answered) handed to the run's body (vendor_body.hpp), whichever it is
// (while an adoption replays the journal the core's effects go to a ReplayEffects instead);
// the grace kill; the tail of the vendor's stderr a warning quotes; the io thread's read buffer
// both bodies drain into.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/run/run_dir.hpp"
#include "daemon/run/run_impl.hpp"

namespace mh::daemon {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Run::Impl::write_vendor(std::string line) {
  if (options.seam_probe) options.seam_probe->answer_written();
  body->write_line(std::move(line));
}

void Run::Impl::reply_hook(std::uint64_t connection, std::string line) {
  body->reply_hook(connection, std::move(line));
}

// The last bytes the vendor wrote to stderr, from its start of line: what a warning quotes
// when the vendor stopped on its own.
std::string Run::Impl::stderr_tail() const {
  constexpr std::size_t kTail = 480;
  UniqueFd fd(::open(RunDir(options.run_dir).vendor_stderr().c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0) return {};
  std::size_t want = std::min<std::size_t>(kTail, static_cast<std::size_t>(st.st_size));
  std::string tail(want, '\0');
  ssize_t n = ::pread(fd.get(), tail.data(), want, st.st_size - static_cast<off_t>(want));
  if (n <= 0) return {};
  tail.resize(static_cast<std::size_t>(n));
  if (want < static_cast<std::size_t>(st.st_size))
    if (auto nl = tail.find('\n'); nl != std::string::npos) tail.erase(0, nl + 1);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' '))
    tail.pop_back();
  for (char& c : tail)
    if (c == '\n') c = ' ';
  return protocol::excerpt(tail, kTail);
}

void Run::Impl::close_vendor_stdin() {
  body->close_stdin(options.exit_grace);
}

void Run::Impl::terminate_vendor(std::chrono::milliseconds grace) {
  body->close_stdin(grace);
}

char* Run::Impl::thread_buffer() {
  thread_local std::unique_ptr<char[]> buffer(new char[kChunk]);
  return buffer.get();
}

// The grace ran out: whatever of the run is left is killed.
asio::awaitable<void> Run::Impl::kill_everything(std::shared_ptr<Run> keep) {
  (void)keep;
  if (body) co_await body->terminate();
}

}  // namespace mh::daemon
