// A run's durable event stream: events.jsonl, one JSON line per event, seq 1..N, stream.closed
// last. The file is the buffer: readers (StreamReader) read it at their own pace, so a slow or
// stalled reader cannot slow the run or make the daemon hold more memory. The one exception is a
// bounded copy of the bytes committed last (RecentBytes, `recent_bytes`, kept only while a
// reader is open): a reader that is caught up takes the lines just written from it instead of
// reading them back from the file. It holds the file's own bytes, published with them, so what a
// reader gets is the same either way.
//
// Writing: append() assigns the next seq, serialises with protocol::serialize_within (one line
// never longer than the options' bound: oversized content is cut and the line says so) and writes the
// whole line including its '\n' with one write(2) (looping only on a partial write), and only
// then publishes the new committed length and seq to readers (SharedStreamState). A reader
// therefore never sees a line before it is complete. close() appends stream.closed as the last
// line (events = its seq - 1, run_id = this run), fdatasyncs, and only then publishes it: a reader
// that sees stream.closed sees a durable stream, and whoever close() told first (the daemon's
// registry) heard of the close before any reader could.
//
// Durability: `write` (default) leaves the line in the page cache once write(2) returns: it
// survives a crash of the daemon, not of the machine. `fsync_each` fdatasyncs every line before
// publishing it. close() always fdatasyncs, on the caller's thread or (EventLogOptions'
// close_syncer) on a syncer's, before it publishes stream.closed.
//
// Threading: an EventLog is owned and used on its run's strand; it is not thread-safe, by design
// (one writer, no locks). The only state shared with readers on other strands is the
// SharedStreamState, which is lock-free but for the recent bytes' per-run mutex (held for a
// memcpy of each commit while a reader is open).
#pragma once

#include <boost/system/result.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/process/unique_fd.hpp"
#include "daemon/stream/redactor.hpp"
#include "daemon/stream/stream_shared.hpp"
#include "protocol/events.hpp"
#include "protocol/line_cut.hpp"
#include "protocol/run_failure.hpp"

namespace mh::daemon {

enum class Durability { write, fsync_each };

class CloseSyncer;

struct EventLogOptions {
  Durability durability = Durability::write;
  // A sparse index entry every `index_interval` lines: O(N / interval) memory, and a reader
  // starting at an arbitrary seq scans at most interval - 1 lines to find it.
  std::uint32_t index_interval = 256;
  // The bound of every line this log writes (runs.max_event_line_bytes): content that would cross
  // it is cut, and the line says what was cut (protocol/line_cut.hpp). Within
  // [kMinEventLineBytes, kMaxEventLineBytes], the range every reader accepts.
  std::size_t max_line_bytes = protocol::kDefaultMaxEventLineBytes;
  // How many of the bytes committed last are kept in memory for caught-up readers while any
  // reader is open (0: none; every read goes to the file).
  std::size_t recent_bytes = SharedStreamState::kDefaultRecentBytes;
  // Secret values (NAME, value) no line may carry (issue 25; redactor.hpp): each is written as
  // `[redacted:NAME]`, JSON-escaped forms included, before the line is written, so nothing that
  // reads the file (readers, exports, the viewer, fleet replicas, digests of the stream) ever
  // sees one. The line is cut to its bound after redaction, so a cut's SHA-256 is of the
  // redacted content too.
  std::vector<std::pair<std::string, std::string>> redactions;
  // Where close() makes stream.closed durable. Null: on the caller's thread, inside close(),
  // which returns once readers can see the line. Else on the syncer's threads
  // (close_syncer.hpp): close() returns once the line is written and `before_readers_see` has
  // been called, and readers see the line once it is durable, as before; a failed fdatasync is
  // then said in the daemon's log rather than in close()'s result.
  std::shared_ptr<CloseSyncer> close_syncer;
};

struct RecoveryReport {
  std::uint64_t lines = 0;           // complete lines kept (== last seq)
  std::uint64_t torn_bytes_cut = 0;  // bytes of a trailing line without '\n' that were cut
  bool already_closed = false;       // the last complete line is stream.closed
  // The first complete line that is not a well-formed event of this run in sequence, if any.
  // Such lines are kept (a complete line is never dropped); the caller should say so.
  std::optional<std::uint64_t> first_bad_line;
  std::string first_bad_reason;

  // One line for a `warning` event: "recovered events.jsonl after a restart: 41 lines kept, a
  // torn line of 17 bytes cut".
  std::string describe() const;
};

struct RecoveredLog;

class EventLog {
 public:
  // A new events.jsonl at `path` (which must not exist yet): O_APPEND | O_CLOEXEC, mode 0640.
  static boost::system::result<EventLog, std::string> create(const std::filesystem::path& path, std::string run_id,
                                                             EventLogOptions options = {});

  // Reopens an existing events.jsonl after the daemon was killed: cuts a torn trailing line
  // (bytes after the last '\n') by truncation, validates every complete line with
  // protocol::read_event_line (seq == line number, this run), rebuilds the sparse index, and
  // returns a log positioned to append the next seq, closed already if the file ends with
  // stream.closed. No complete line is ever removed. Reads the file once, in bounded memory.
  static boost::system::result<RecoveredLog, std::string> recover(const std::filesystem::path& path, std::string run_id,
                                                                  EventLogOptions options = {});

  EventLog(EventLog&&) noexcept = default;
  EventLog& operator=(EventLog&&) noexcept;
  // If stream.closed was never written, readers learn that the writer is gone.
  ~EventLog();

  // Appends one event and returns its seq. Refused (as a value) after close(), for a
  // stream.closed payload (that is close()'s job), or when the write fails; a failed write is
  // cut back so the file still ends with a complete line, and the seq is not consumed.
  // `cut`: what the producer already cut from the payload's content (an oversized vendor record
  // read as a skeleton); the writer keeps those records and cuts further only if it must.
  boost::system::result<std::uint64_t, std::string> append(protocol::EventPayload payload,
                                                           std::optional<std::string> at = std::nullopt,
                                                           std::vector<protocol::CutField> cut = {});

  // Batching: between hold() and release(), appends take their seq and are serialized into one
  // buffer; release() writes them with one write(2), then publishes them to readers and wakes
  // them once. Nobody sees an event before it is on disk, as without a hold. A run holds while it
  // handles one input (a chunk of vendor output, a command), so a chatty vendor costs one write
  // and one wake-up per chunk, not per event, and a decision's events are one write. If the
  // write fails, every held event is cut back (none was published), their seqs are not consumed,
  // and release() says why.
  void hold() { holding_ = true; }
  bool holding() const { return holding_; }
  boost::system::result<void, std::string> release();

  // Appends stream.closed (events = seq - 1, run_id = this run) as the last line, fdatasyncs,
  // calls `before_readers_see(seq)` (if given), publishes it, and returns its seq (after writing
  // what a hold kept, if any). With a close_syncer (EventLogOptions), `before_readers_see` is
  // called once the line is written, and the fdatasync and the publication happen on the
  // syncer, after close() has returned. A second close is refused. `resources`: what the run's cgroup
  // counted (absent from the line when nullopt: the run had none).
  boost::system::result<std::uint64_t, std::string> close(
      protocol::CloseReason reason, protocol::ProcessTermination process,
      std::function<void(std::uint64_t seq)> before_readers_see = {},
      std::optional<protocol::ev::RunResources> resources = std::nullopt);

  const std::string& run_id() const { return shared_->run_id(); }
  const std::filesystem::path& path() const { return shared_->path(); }
  std::uint64_t last_seq() const { return last_seq_; }
  std::uint64_t committed_bytes() const { return committed_bytes_; }
  bool closed() const { return closed_; }

  // What readers attach to (StreamReader::open). May be handed to other strands.
  std::shared_ptr<SharedStreamState> shared() const { return shared_; }

  // Memory the log holds besides the shared state: its serialisation scratch buffer, bounded
  // by the largest recent event, and independent of how many readers exist or how far behind.
  std::size_t scratch_capacity() const { return scratch_.capacity(); }

 private:
  EventLog(UniqueFd fd, std::shared_ptr<SharedStreamState> shared, EventLogOptions options);
  boost::system::result<std::uint64_t, std::string> write_event(protocol::EventPayload payload,
                                                                std::optional<std::string> at,
                                                                std::vector<protocol::CutField> cut = {});
  // Writes scratch_ (the events past committed_seq_) and publishes them; on failure cuts the file
  // back to committed_bytes_ and forgets them.
  boost::system::result<void, std::string> commit_pending(bool closing);
  void abandon();
  void redact_into_scratch(protocol::Event& event, std::size_t start);

  UniqueFd fd_;
  std::shared_ptr<SharedStreamState> shared_;
  EventLogOptions options_;
  std::uint64_t last_seq_ = 0;       // the last seq handed out
  std::uint64_t committed_seq_ = 0;  // the last seq written and published
  std::uint64_t committed_bytes_ = 0;
  bool closed_ = false;
  bool holding_ = false;
  // Set only for the duration of close(): what runs between the final line's sync and its publication.
  std::function<void(std::uint64_t)> before_final_publish_;
  int final_sync_error_ = 0;
  std::string scratch_;                       // serialized events not written yet (one, or a hold's worth)
  std::vector<std::uint64_t> pending_index_;  // index entries (file offsets) for them
  Redactor redactor_;                         // from options_.redactions
  // Sees every event written, so close() can say why a run that did not complete failed
  // (stream.closed's `failure`), whoever closes it: the run, a recovery, its supervisor alone.
  protocol::FailureWitness witness_;
};

struct RecoveredLog {
  EventLog log;
  RecoveryReport report;
};

}  // namespace mh::daemon
