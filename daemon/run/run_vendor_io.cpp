// The vendor's process from the run's side: its stdin queue, the drain of its stdout and stderr
// pipes into the io thread's buffer, the raw transcripts, its exit and the grace kill. Separate
// from the record: these are the bytes that move, not what is made of them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "daemon/log.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/run_impl.hpp"

namespace mh::daemon {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Run::Impl::write_vendor(std::string line) {
  if (replay) {  // delivered before, or to be delivered once the replay is reconciled
    replay->stdin_bytes += line;
    replay->stdin_bytes.push_back('\n');
    return;
  }
  if (options.seam_probe) options.seam_probe->answer_written();
  if (link) {  // the supervisor writes it to the vendor and keeps the copy
    link->send(supervisor::In{std::move(line)});
    return;
  }
  line.push_back('\n');
  to_vendor.emplace_back(std::move(line));
  pump_stdin();
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
  if (replay) {
    replay->stdin_closed = true;
    if (!replay->kill_at) replay->kill_at = replay->now + options.exit_grace;
    return;
  }
  if (link) {
    link->send(supervisor::CloseStdin{});
    arm_grace(options.exit_grace);
    return;
  }
  to_vendor.emplace_back(std::nullopt);
  pump_stdin();
  arm_grace(options.exit_grace);
}

void Run::Impl::terminate_vendor(std::chrono::milliseconds grace) {
  if (replay) {
    replay->stdin_closed = true;
    Instant at = replay->now + grace;
    if (!replay->kill_at || at < *replay->kill_at) replay->kill_at = at;
    return;
  }
  if (link) {
    link->send(supervisor::CloseStdin{});
    arm_grace(grace);
    return;
  }
  to_vendor.emplace_back(std::nullopt);
  pump_stdin();
  arm_grace(grace);
}

void Run::Impl::pump_stdin() {
  if (writing || !child) return;
  writing = true;
  asio::co_spawn(strand, write_stdin(self.lock()), asio::detached);
}

asio::awaitable<void> Run::Impl::write_stdin(std::shared_ptr<Run> keep) {
  (void)keep;
  while (!to_vendor.empty()) {
    auto next = std::move(to_vendor.front());
    to_vendor.pop_front();
    if (!next) {
      if (!stdin_closed) child->close_stdin();
      stdin_closed = true;
      continue;
    }
    if (stdin_closed) continue;  // the vendor will never read it; it was not delivered
    stdin_log.append(*next);
    if (!co_await child->write_stdin(*next)) stdin_closed = true;
  }
  writing = false;
}

char* Run::Impl::thread_buffer() {
  thread_local std::unique_ptr<char[]> buffer(new char[kChunk]);
  return buffer.get();
}

// Drains a non-blocking descriptor, handing each chunk to `consume` (synchronously: the chunk
// lives in the thread's buffer). Returns false at end of file or on an error.
template <class Consume>
asio::awaitable<bool> Run::Impl::drain(asio::posix::stream_descriptor& from, Consume&& consume) {
  std::size_t this_turn = 0;
  for (;;) {
    ssize_t n = ::read(from.native_handle(), thread_buffer(), kChunk);
    if (n > 0) {
      consume(std::string_view(thread_buffer(), static_cast<std::size_t>(n)));
      this_turn += static_cast<std::size_t>(n);
      if (this_turn >= kDrainPerTurn) {
        // Fairness: a chatty vendor must not hold the io thread; come back right after others.
        co_await asio::post(strand, asio::use_awaitable);
        this_turn = 0;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) co_return true;
    co_return false;  // end of file, or an error: nothing more will come
  }
}

template <class Consume>
asio::awaitable<void> Run::Impl::read_until_end(asio::posix::stream_descriptor& from, Consume& consume) {
  boost::system::error_code ec;
  from.non_blocking(true, ec);
  for (;;) {
    // The reactor is edge-triggered: only wait once the descriptor has been drained.
    if (!co_await drain(from, consume)) co_return;
    auto [wait_ec] =
        co_await from.async_wait(asio::posix::descriptor_base::wait_read, asio::as_tuple(asio::use_awaitable));
    if (wait_ec) co_return;
  }
}

asio::awaitable<void> Run::Impl::read_stdout() {
  SeamProbe* probe = options.seam_probe.get();
  auto take = [&](std::string_view chunk) {
    Instant now = Clock::now();
    if (probe) probe->input_read(now);
    InputExtras extras;
    extras.bytes = chunk;
    input(journal::VendorOut{stdout_fed + chunk.size(), unix_ms_now()}, now, std::move(extras));
    if (probe) probe->input_done();
    // Byte for byte, as read. Written after the chunk's lines are handled so that answering
    // the vendor never waits on the copy; it is on disk before the next read.
    transcript.append(chunk);
  };
  // Redacted as read (a secret split across reads is held until whole): the adapter, the
  // transcript and the journal's offsets all see the same, redacted, bytes.
  auto consume = [&](std::string_view raw) {
    if (const std::string_view chunk = stdout_redactor.feed(raw, redactor); !chunk.empty()) take(chunk);
  };
  co_await read_until_end(*vendor_stdout, consume);
  if (const std::string_view rest = stdout_redactor.finish(redactor); !rest.empty()) take(rest);
  // Nothing more will come: the adapter flushes what it held for a later line (wind_up would
  // too, but only once the vendor's processes are gone; the record is due now).
  input(journal::VendorEnd{}, Clock::now());
  after_core();
}

asio::awaitable<void> Run::Impl::read_stderr() {
  auto consume = [this](std::string_view raw) { stderr_log.append(stderr_redactor.feed(raw, redactor)); };
  co_await read_until_end(*vendor_stderr, consume);
  stderr_log.append(stderr_redactor.finish(redactor));
}

// Waits for the vendor to exit, then kills whatever of the run is left (background jobs,
// setsid'd tool processes), so nothing of the run survives it and its stdout can end.
asio::awaitable<protocol::ProcessTermination> Run::Impl::supervise_exit() {
  protocol::ProcessTermination termination = co_await child->async_wait();
  vendor_reaped = true;
  timers.cancel_grace();
  const auto& plan = std::get<adapters::LaunchPlan>(planned);
  if (containment) {
    std::string problems = co_await containment->end(strand, std::nullopt, std::chrono::seconds(10));
    if (!problems.empty()) daemon::log(LogPriority::warning, "run " + log->run_id() + ": at its end: " + problems);
    co_return containment->vendor_termination(termination);
  }
  KillReport report = co_await kill_run_processes(strand, std::nullopt, plan.run_marker, std::chrono::seconds(10));
  if (!report.clean())
    daemon::log(LogPriority::warning, "run " + log->run_id() + ": leftover processes: " + report.summary());
  co_return termination;
}

void Run::Impl::arm_grace(std::chrono::milliseconds grace) {
  arm_grace_at(Clock::now() + grace);
}

// A grace that began before an adoption: it ends when it would have (at once, if it is over).
void Run::Impl::arm_grace_at(Instant when) {
  if (vendor_reaped) return;  // nothing is left to kill
  timers.arm_grace_at(when);
}

asio::awaitable<void> Run::Impl::kill_everything(std::shared_ptr<Run> keep) {
  (void)keep;
  if (link) {
    if (!vendor_exit) co_await end_body(vendor_pid ? std::optional<pid_t>(vendor_pid) : std::nullopt);
    co_return;
  }
  if (vendor_reaped || !child) co_return;
  if (containment) {
    co_await containment->end(strand, child->pid(), std::chrono::seconds(10));
    co_return;
  }
  const auto& plan = std::get<adapters::LaunchPlan>(planned);
  co_await kill_run_processes(strand, child->pid(), plan.run_marker, std::chrono::seconds(10));
}

}  // namespace mh::daemon
