#include "daemon/stream/event_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>

#include "daemon/log.hpp"
#include "daemon/stream/close_syncer.hpp"
#include "protocol/line_framer.hpp"
#include "protocol/reader.hpp"
#include "protocol/time_text.hpp"

namespace mh::daemon {

namespace {

// A scratch buffer grown by one huge event is given back rather than kept for the run's life.
constexpr std::size_t kScratchKeepBytes = 64 * 1024;
// Recovery validates lines up to the longest a writer can be configured to write; a longer
// complete line (not written by this writer) is kept but reported.
constexpr std::size_t kRecoveryMaxLineBytes = protocol::kMaxEventLineBytes;
constexpr std::size_t kRecoveryReadChunk = 1u << 20;

// The writer's own clock on every line it writes (recorded_at), formatted once per millisecond.
std::string recorded_now() {
  static thread_local std::int64_t last_ms = -1;
  static thread_local std::string last_text;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  if (ms != last_ms) {
    last_ms = ms;
    last_text = protocol::rfc3339_millis(ms).value_or("");
  }
  return last_text;
}

std::string errno_text(int error) {
  return std::system_category().message(error);
}

// The new file's name must survive a machine crash too once close() has synced the data.
void sync_parent_directory(const std::filesystem::path& path) {
  auto parent = path.parent_path();
  if (parent.empty()) parent = ".";
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir) ::fsync(dir.get());
}

}  // namespace

std::string RecoveryReport::describe() const {
  std::string s = "recovered events.jsonl after a restart: " + std::to_string(lines) + " complete line(s) kept";
  if (torn_bytes_cut > 0) s += ", a torn last line of " + std::to_string(torn_bytes_cut) + " byte(s) cut";
  if (first_bad_line)
    s += "; line " + std::to_string(*first_bad_line) + " is not well formed (" + first_bad_reason + ")";
  return s;
}

EventLog::EventLog(UniqueFd fd, std::shared_ptr<SharedStreamState> shared, EventLogOptions options)
    : fd_(std::move(fd)), shared_(std::move(shared)), options_(options), redactor_(options_.redactions) {
  scratch_.reserve(1024);
}

EventLog& EventLog::operator=(EventLog&& other) noexcept {
  if (this != &other) {
    abandon();
    fd_ = std::move(other.fd_);
    shared_ = std::move(other.shared_);
    options_ = other.options_;
    last_seq_ = other.last_seq_;
    committed_seq_ = other.committed_seq_;
    committed_bytes_ = other.committed_bytes_;
    closed_ = other.closed_;
    holding_ = other.holding_;
    scratch_ = std::move(other.scratch_);
    pending_index_ = std::move(other.pending_index_);
    redactor_ = std::move(other.redactor_);
  }
  return *this;
}

EventLog::~EventLog() {
  abandon();
}

void EventLog::abandon() {
  if (shared_ && !closed_ && last_seq_ > committed_seq_) (void)commit_pending(false);  // a hold never released
  if (shared_ && !closed_) {
    shared_->mark_writer_gone();
    shared_->wake_waiters();
  }
}

boost::system::result<EventLog, std::string> EventLog::create(const std::filesystem::path& path, std::string run_id,
                                                              EventLogOptions options) {
  if (options.index_interval == 0) return std::string("index_interval must be at least 1");
  if (options.max_line_bytes < protocol::kMinEventLineBytes || options.max_line_bytes > protocol::kMaxEventLineBytes)
    return "max_line_bytes " + std::to_string(options.max_line_bytes) + " is outside " +
           std::to_string(protocol::kMinEventLineBytes) + ".." + std::to_string(protocol::kMaxEventLineBytes);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640));
  if (!fd) return "cannot create " + path.string() + ": " + errno_text(errno);
  ::fchmod(fd.get(), 0640);  // exactly 0640, whatever the daemon's umask
  sync_parent_directory(path);
  auto shared =
      std::make_shared<SharedStreamState>(path, std::move(run_id), options.index_interval, options.recent_bytes);
  return EventLog(std::move(fd), std::move(shared), options);
}

boost::system::result<std::uint64_t, std::string> EventLog::append(protocol::EventPayload payload,
                                                                   std::optional<std::string> at,
                                                                   std::vector<protocol::CutField> cut) {
  if (!shared_) return std::string("append on a moved-from EventLog");
  if (closed_)
    return "append after stream.closed (seq " + std::to_string(last_seq_) + "): the stream of run " +
           shared_->run_id() + " is closed";
  if (std::holds_alternative<protocol::ev::StreamClosed>(payload))
    return std::string("stream.closed is written by close(), never appended");
  return write_event(std::move(payload), std::move(at), std::move(cut));
}

boost::system::result<std::uint64_t, std::string> EventLog::close(
    protocol::CloseReason reason, protocol::ProcessTermination process,
    std::function<void(std::uint64_t seq)> before_readers_see, std::optional<protocol::ev::RunResources> resources) {
  if (!shared_) return std::string("close on a moved-from EventLog");
  if (closed_) return "the stream of run " + shared_->run_id() + " is closed already";
  protocol::ev::StreamClosed marker;
  holding_ = false;
  if (auto written = commit_pending(false); !written) return written.error();
  marker.events = last_seq_;
  marker.reason = reason;
  marker.run_id = shared_->run_id();
  marker.process = process;
  marker.resources = std::move(resources);
  marker.failure = witness_.judge(reason, process);
  before_final_publish_ = std::move(before_readers_see);
  final_sync_error_ = 0;
  auto seq = write_event(std::move(marker), std::nullopt);
  before_final_publish_ = nullptr;
  if (!seq) return seq;
  closed_ = true;
  if (final_sync_error_ != 0)
    return "stream.closed written as seq " + std::to_string(*seq) +
           ", but fdatasync failed: " + errno_text(final_sync_error_);
  return seq;
}

boost::system::result<std::uint64_t, std::string> EventLog::write_event(protocol::EventPayload payload,
                                                                        std::optional<std::string> at,
                                                                        std::vector<protocol::CutField> cut) {
  const bool closing = std::holds_alternative<protocol::ev::StreamClosed>(payload);
  // Seen before it is written: a write that then fails takes back an event the witness keeps,
  // which can only make a failure's reason more specific, never wrong.
  if (!closing) witness_.observe(payload);
  const std::uint64_t seq = last_seq_ + 1;
  const std::uint64_t offset = committed_bytes_ + scratch_.size();
  // serialize_within appends, with no separator after a '\n': scratch_ is empty or ends with one.
  protocol::Event event{seq, shared_->run_id(), std::move(at), std::move(payload)};
  event.recorded_at = recorded_now();
  event.cut = std::move(cut);
  const std::size_t start = scratch_.size();
  if (redactor_.empty()) {
    protocol::serialize_within(scratch_, event, options_.max_line_bytes);
  } else {
    redact_into_scratch(event, start);
  }
  scratch_.push_back('\n');
  if ((seq - 1) % options_.index_interval == 0) pending_index_.push_back(offset);
  last_seq_ = seq;
  if (holding_ && !closing) return seq;
  if (auto written = commit_pending(closing); !written) return written.error();
  return seq;
}

// The line of `event`, redacted, appended to scratch_ from `start`. The whole event is serialized
// and redacted first (its JSON-escaped text is where a secret is found as the line would hold it);
// when something was replaced, that redacted line is read back as the event and serialized within
// the bound again, so whatever the bound cuts, and the SHA-256 a cut records, is of the redacted
// content: no digest of a secret's text is ever written (docs/hermetic.md).
void EventLog::redact_into_scratch(protocol::Event& event, std::size_t start) {
  protocol::serialize_to(scratch_, event);
  if (redactor_.redact(scratch_, start) == 0) {
    if (scratch_.size() - start <= options_.max_line_bytes) return;  // the whole line fits as it is
    scratch_.resize(start);
    protocol::serialize_within(scratch_, event, options_.max_line_bytes);
    return;
  }
  auto redacted = protocol::read_event_line(std::string_view(scratch_).substr(start));
  if (redacted) {
    scratch_.resize(start);
    protocol::serialize_within(scratch_, *redacted, options_.max_line_bytes);
    return;
  }
  // Never expected (the line is ours, and a marker is plain text): keep the secret out anyway,
  // cutting the unredacted event and redacting what is left of it.
  scratch_.resize(start);
  protocol::serialize_within(scratch_, event, options_.max_line_bytes);
  redactor_.redact(scratch_, start);
}

boost::system::result<void, std::string> EventLog::release() {
  holding_ = false;
  if (!shared_) return std::string("release on a moved-from EventLog");
  return commit_pending(false);
}

boost::system::result<void, std::string> EventLog::commit_pending(bool closing) {
  if (last_seq_ == committed_seq_) return {};
  // One write(2) for the whole batch in the normal case; write_all loops only on a partial write.
  int error = write_all(fd_.get(), scratch_) ? 0 : errno;
  if (error == 0 && options_.durability == Durability::fsync_each && ::fdatasync(fd_.get()) == -1) error = errno;
  if (error != 0) {
    // Nothing past committed_bytes_ was ever published; cut it so the file ends with a complete
    // line and the next append reuses these seqs.
    std::string message = "write of seq " + std::to_string(committed_seq_ + 1) +
                          (last_seq_ > committed_seq_ + 1 ? ".." + std::to_string(last_seq_) : std::string()) + " to " +
                          shared_->path().string() + " failed: " + errno_text(error);
    last_seq_ = committed_seq_;
    scratch_.clear();
    pending_index_.clear();
    if (::ftruncate(fd_.get(), static_cast<off_t>(committed_bytes_)) == -1) {
      // The file may now end with a partial line that no reader can see; stop writing rather
      // than put a complete line after it.
      message += "; cutting the partial line failed too (" + errno_text(errno) + "): the log refuses further appends";
      closed_ = true;
      shared_->mark_writer_gone();
      shared_->wake_waiters();
    }
    return message;
  }

  // The bytes just written, for caught-up readers; published with the rest below, and read only
  // below the committed length, so a reader never takes from here what the file would not give.
  shared_->recent().keep(committed_bytes_, scratch_);
  for (std::uint64_t offset : pending_index_)
    shared_->push_index_entry(offset);
  pending_index_.clear();
  committed_bytes_ += scratch_.size();
  committed_seq_ = last_seq_;
  bool published_later = false;
  if (closing && options_.close_syncer) {
    // Written; the syncer makes it durable and only then publishes it (close_syncer.hpp), off
    // this strand. Whoever close() tells hears of it now, before any reader can see it.
    if (auto fd = std::make_shared<UniqueFd>(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0)); *fd) {
      shared_->mark_close_pending();
      if (before_final_publish_) before_final_publish_(committed_seq_);
      options_.close_syncer->submit(
          [shared = shared_, fd, bytes = committed_bytes_, seq = committed_seq_, path = shared_->path()] {
            if (::fdatasync(fd->get()) == -1) {
              const int error = errno;
              daemon::log(LogPriority::error, "stream.closed written as seq " + std::to_string(seq) + " to " +
                                                  path.string() + ", but fdatasync failed: " + errno_text(error));
            }
            shared->set_final_seq(seq);
            shared->publish(bytes, seq);
            shared->wake_waiters();
          });
      published_later = true;
    }  // no descriptor to hand over: synced here, as without a syncer
  }
  if (closing && !published_later) {
    if (::fdatasync(fd_.get()) == -1) final_sync_error_ = errno;
    if (before_final_publish_) before_final_publish_(committed_seq_);
    shared_->set_final_seq(committed_seq_);
  }
  if (!published_later) {
    shared_->publish(committed_bytes_, committed_seq_);
    shared_->wake_waiters();
  }
  scratch_.clear();
  if (scratch_.capacity() > kScratchKeepBytes) {
    scratch_.shrink_to_fit();
    scratch_.reserve(1024);
  }
  return {};
}

boost::system::result<RecoveredLog, std::string> EventLog::recover(const std::filesystem::path& path,
                                                                   std::string run_id, EventLogOptions options) {
  if (options.index_interval == 0) return std::string("index_interval must be at least 1");
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
  if (!fd) return "cannot open " + path.string() + " for recovery: " + errno_text(errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) == -1) return "cannot stat " + path.string() + ": " + errno_text(errno);
  const auto size = static_cast<std::uint64_t>(info.st_size);

  auto shared = std::make_shared<SharedStreamState>(path, run_id, options.index_interval, options.recent_bytes);
  RecoveryReport report;
  std::uint64_t complete_end = 0;  // offset just past the last '\n' seen
  bool last_is_closed = false;
  std::optional<std::uint64_t> closed_at;
  protocol::FailureWitness witness;  // what the kept lines say, for the close that may follow

  auto bad = [&](std::uint64_t line, std::string reason) {
    if (!report.first_bad_line) {
      report.first_bad_line = line;
      report.first_bad_reason = std::move(reason);
    }
  };
  protocol::LineFramer framer(kRecoveryMaxLineBytes);
  auto on_line = [&](const protocol::FramedLine& line) {
    const std::uint64_t n = line.number;
    if ((n - 1) % options.index_interval == 0) shared->push_index_entry(complete_end);
    complete_end += line.length + 1;
    report.lines = n;
    last_is_closed = false;
    if (closed_at) bad(n, "a line after stream.closed (line " + std::to_string(*closed_at) + ")");
    if (line.too_long) {
      bad(n, "longer than " + std::to_string(kRecoveryMaxLineBytes) + " bytes: not validated");
      return;
    }
    auto event = protocol::read_event_line(line.text);
    if (!event) {
      bad(n, event.error().message);
      return;
    }
    if (event->seq != n) bad(n, "seq " + std::to_string(event->seq) + " on line " + std::to_string(n));
    if (event->run != run_id) bad(n, "run \"" + event->run + "\" is not \"" + run_id + "\"");
    if (std::holds_alternative<protocol::ev::StreamClosed>(event->payload)) {
      last_is_closed = true;
      if (!closed_at) closed_at = n;
    } else {
      witness.observe(event->payload);
    }
  };

  std::string chunk(kRecoveryReadChunk, '\0');
  for (std::uint64_t offset = 0; offset < size;) {
    ssize_t n = ::pread(fd.get(), chunk.data(), chunk.size(), static_cast<off_t>(offset));
    if (n == -1 && errno == EINTR) continue;
    if (n == -1) return "cannot read " + path.string() + ": " + errno_text(errno);
    if (n == 0) break;  // shrank under us; what we have is what there is
    framer.feed(std::string_view(chunk.data(), static_cast<std::size_t>(n)), on_line);
    offset += static_cast<std::uint64_t>(n);
  }
  // No framer.finish(): bytes after the last '\n' are a torn line, never an event.
  report.torn_bytes_cut = size - complete_end;
  report.already_closed = last_is_closed;
  if (report.torn_bytes_cut > 0) {
    if (::ftruncate(fd.get(), static_cast<off_t>(complete_end)) == -1)
      return "cannot cut the torn last line of " + path.string() + ": " + errno_text(errno);
    if (::fdatasync(fd.get()) == -1)
      return "cannot sync " + path.string() + " after cutting its torn line: " + errno_text(errno);
  }

  EventLog log(std::move(fd), shared, options);
  log.last_seq_ = report.lines;
  log.committed_seq_ = report.lines;
  log.committed_bytes_ = complete_end;
  log.closed_ = last_is_closed;
  log.witness_ = std::move(witness);
  if (last_is_closed) shared->set_final_seq(report.lines);
  shared->publish(complete_end, report.lines);
  return RecoveredLog{std::move(log), std::move(report)};
}

}  // namespace mh::daemon
