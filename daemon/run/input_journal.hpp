// The run's input journal (core-inputs.jsonl): every input the shell handed its RunCore, in the
// order it handed them, each with the `now` it was handed with. The core reads no clock and
// draws no random number, so the same inputs in the same order give the same events, the same
// answers to the vendor and the same timers: a daemon that takes over a run its predecessor
// left (adoption) rebuilds the core by replaying this file, then goes on live.
//
// Vendor output is not copied here: the transcript (vendor-stdout.jsonl, written by the run's
// supervisor) holds it byte for byte, and an `out` entry says how far into it the core was fed
// (and when the chunk was read, for the lines' received_at). Everything else is kept whole: a
// command as its wire line, a hook request as its JSON.
//
// Written with one write(2) per input, before the core is handed the input (an input recorded
// here and not yet acted on is acted on at adoption; one torn by a crash mid-write was never
// handed in, and is dropped). Not fsynced: the journal must survive the daemon, not the host
// (a reboot ends every run anyway). Steady-clock instants (CLOCK_MONOTONIC) mean the same thing
// in every process of one boot, so deadlines keep their place across the daemon's restart.
//
// Format: the first line names it ({"journal":"metaharness.core-inputs/1"}); each next line is
// {"k":<kind>,"now":<steady ns>, ...}. A newer daemon reads every version an older one wrote.
#pragma once

#include <boost/system/result.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "daemon/process/unique_fd.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace journal {

inline constexpr std::string_view kFormat = "metaharness.core-inputs/1";

struct Start {  // the vendor was spawned (RunCore::start)
  // The run has a model gateway: its figures are what the budgets count (RunCore::meter_by_gateway).
  // Journaled ("gateway": true) so a replay meters as the live run did, whatever the adopting
  // daemon's options say. Absent in older journals: false.
  bool gateway = false;
};
struct VendorOut {
  std::uint64_t to = 0;               // transcript bytes [previous to, to) were fed
  std::int64_t received_unix_ms = 0;  // when the chunk was read (the lines' received_at)
};
struct VendorEnd {};  // the vendor's stdout ended (the framer's finish, then on_vendor_end)
struct HookRequest {
  std::uint64_t connection = 0;
  std::string line;  // the request's JSON as read
};
struct HookGone {
  std::uint64_t connection = 0;
};
struct CommandLine {
  std::string line;  // protocol::serialize(command)
  std::optional<protocol::PeerIdentity> peer;
};
struct Unreadable {
  protocol::LineRefusal refusal;
};
struct SourceClosed {};
struct BudgetExhausted {
  std::string message;
};
struct Shutdown {};
struct Deadline {
  std::string call_id;
};
struct IdleTimeout {};
struct WallBudget {};
struct StallTimeout {};  // the stall timer ran out (RunCore::on_stall_timeout; issue 27 §2)
struct ParkTimeout {     // the park timer ran out for this call (RunCore::on_park_timeout; issue 27 §5)
  std::string call_id;
};
struct Resumed {};  // a parked run's vendor was started again (RunCore::on_resumed; issue 27 §5)
// A warning the shell itself states (the run's containment, an adoption, a lost supervisor): in
// the journal so that a replay states it again at the same place in the stream.
struct ShellWarning {
  std::string code;
  std::string message;
};

// What the run's gateway and egress proxy reported (issue 25; supervisor_protocol.hpp's
// GatewayUsage, GatewayRefused, Egress), whole: they are not kept anywhere else the replay could
// read them from.
struct GatewayUsage {  // one forwarded request's answer ended
  std::uint64_t request = 0;
  std::int32_t status = 0;
  std::string model;
  std::optional<std::uint64_t> input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens;
  bool complete = false;
};
struct GatewayRefused {  // a route outside the wire's model routes was refused 403
  std::string method;
  std::string path;
};
struct Egress {  // a connection attempt through the egress proxy
  std::string destination;
  bool allowed = false;
  std::string why;
};

using Input = std::variant<Start, VendorOut, VendorEnd, HookRequest, HookGone, CommandLine, Unreadable, SourceClosed,
                           BudgetExhausted, Shutdown, Deadline, IdleTimeout, WallBudget, ShellWarning, GatewayUsage,
                           GatewayRefused, Egress, StallTimeout, ParkTimeout, Resumed>;

struct Entry {
  std::chrono::steady_clock::time_point now;
  Input input;
};

std::string serialize(const Entry& entry);  // one line, with its '\n'
// One line (without '\n'); a refusal names what is wrong with it.
boost::system::result<Entry, std::string> parse(std::string_view line);

}  // namespace journal

// Appends entries; a write that fails is reported once (the run is then not adoptable, which
// adoption says by name) and the journal stops.
class InputJournal {
 public:
  static boost::system::result<InputJournal, std::string> create(const std::filesystem::path& path);
  // The journal a previous daemon wrote, appended to after its `complete_bytes` (what follows, a
  // line torn by its crash, is cut).
  static boost::system::result<InputJournal, std::string> open_append(const std::filesystem::path& path,
                                                                      std::uint64_t complete_bytes);
  void append(const journal::Entry& entry);
  bool failed() const { return failed_; }

 private:
  UniqueFd fd_;
  bool failed_ = false;
};

// The whole journal as the previous daemon left it: the complete entries, in order. A torn last
// line is dropped (it was never handed in); any other bad line refuses the journal.
struct JournalRead {
  std::vector<journal::Entry> entries;
  bool torn_tail = false;
  std::uint64_t complete_bytes = 0;  // the file's length up to its last complete line
};
boost::system::result<JournalRead, std::string> read_journal(const std::filesystem::path& path);

}  // namespace mh::daemon
