// The wire between the daemon and a run's supervisor (docs/supervisor.md): one JSON object per
// line over the supervisor's Unix socket, each with its kind in "t". The one exception is an `out`
// carrying the vendor's new bytes ("carried": K): its line is followed by those K bytes raw, the
// transcript's last K, sent only when the daemon's attach asked (carry_out_bytes) and the hello
// agreed, at most kMaxCarriedOutBytes (the daemon's hot path: one receive, no read of the file).
// Types, parse and serialize, the daemon's reader of the stream (lines and payloads) and its check
// of where carried bytes begin; no I/O, no clock.
//
// Versioning, the rule both sides keep:
//   - Unknown "t" and unknown keys are ignored by both sides, so an additive change (a new
//     message, a new field) keeps the version.
//   - The version is bumped only for an incompatible change (a field that changes meaning, a
//     message that becomes required).
//   - A daemon keeps speaking every version it ever shipped (kOldestProtocol..kProtocol), so a
//     newer daemon adopts the runs of an older supervisor after an upgrade.
//   - `attach` carries the daemon's highest version; the supervisor answers `hello` with the
//     version it will speak: min(the daemon's, its own), refusing when that is below the oldest
//     it speaks. The daemon then speaks that version, refusing a hello outside its own range.
//
// Parsing never throws: a line is a message, an ignored line (nullopt: an unknown "t"), or a
// refusal naming what is wrong. Lines are bounded (kMaxToSupervisorLineBytes one way,
// kMaxFromSupervisorLineBytes the other); a longer one is refused by name. Carried bytes keep the
// version: a daemon that does not ask is sent none, a supervisor that does not agree sends none.
#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/line_framer.hpp"
#include "protocol/types.hpp"

namespace mh::supervisor {

// The versions this build speaks.
inline constexpr std::uint32_t kProtocol = 1;
inline constexpr std::uint32_t kOldestProtocol = 1;

// A daemon's line (an `in` line carries a vendor input line, bounded by the run's own limits).
inline constexpr std::size_t kMaxToSupervisorLineBytes = 8u << 20;
// A supervisor's line: a hook request is at most 1 MiB, but a hello lists every open one.
inline constexpr std::size_t kMaxFromSupervisorLineBytes = 64u << 20;
// A hook request line read from the hook channel.
inline constexpr std::size_t kMaxHookLineBytes = 1u << 20;
// The vendor's new bytes an `out` carries at most (more since the last `out`: none are carried,
// the daemon reads them from the transcript). The daemon asks for up to this many.
inline constexpr std::size_t kMaxCarriedOutBytes = 64u << 10;

// ---- daemon -> supervisor ---------------------------------------------------------------------

struct Attach {                        // must be the first message; answered by Hello
  std::uint32_t protocol = kProtocol;  // the daemon's highest
  // The most vendor bytes this daemon takes inside one `out` (0, or absent from an older daemon:
  // none; it reads every byte from the transcript).
  std::uint64_t carry_out_bytes = 0;
};
struct In {  // a line for the vendor's stdin, without its '\n'
  std::string line;
};
struct CloseStdin {};  // after everything queued before it
struct HookReply {     // the answer to a hook connection, without its '\n'
  std::uint64_t connection = 0;
  std::string line;
};
struct Release {};  // the daemon recorded the run's end: the supervisor exits
// The answer to a gateway's `reserve` (docs/gateway.md): forward the request, or answer it with
// `reason` in the upstream's own wire and never forward it.
struct Reserved {
  std::uint64_t request = 0;
  bool allowed = false;
  std::string reason;
};

// Parking (issue 27 §5; docs/supervisor.md): the vendor has exited (the run parked it) and the
// run wants it back: spawn it again as the spec says, with `extra_args` after the spec's own (the
// session's resume arguments), on the same transcript, stdin log, hook channel and gateway.
// Answered by Respawned. Sent only to a supervisor whose hello said `respawn`.
struct Respawn {
  std::vector<std::string> extra_args;
};

using ToSupervisor = std::variant<Attach, In, CloseStdin, HookReply, Release, Reserved, Respawn>;

// ---- supervisor -> daemon ---------------------------------------------------------------------

struct Hook {  // a hook program's request, held open until the daemon's hook_reply
  std::uint64_t connection = 0;
  std::string line;  // as read, without its '\n'
};

struct Hello {
  std::uint32_t protocol = kProtocol;  // the version the supervisor speaks on this connection
  std::string version;                 // the supervisor's build
  std::int32_t supervisor_pid = 0;
  std::optional<std::int32_t> vendor_pid;  // null: the spawn failed
  std::optional<std::string> spawn_error;
  std::uint64_t stdout_bytes = 0;  // the transcript's size now
  bool stdout_ended = false;
  bool stderr_ended = false;
  std::uint64_t stdin_bytes = 0;  // the stdin log's size now (every line accepted for the vendor)
  bool stdin_closed = false;
  std::optional<protocol::ProcessTermination> exited;  // null: still running (or never ran)
  std::vector<Hook> hooks_open;                        // not replied to, peer still there
  std::vector<std::uint64_t> hooks_gone;               // every connection whose peer hung up unanswered
  // The most vendor bytes an `out` carries on this connection: min(the attach's, the
  // supervisor's own bound); 0 (or absent, from an older supervisor): none are carried.
  std::uint64_t carry_out_bytes = 0;
  // How long no daemon had been attached when this hello was written, in ms: since the last
  // daemon's connection dropped (or since the supervisor started, if none ever attached). Absent
  // from an older supervisor.
  std::optional<std::uint64_t> ungoverned_ms;
  // This supervisor spawns its vendor again on a `respawn` (parking). Absent from an older
  // supervisor: false, and the daemon does not ask.
  bool can_respawn = false;
};
struct Out {  // the transcript grew to `bytes`
  std::uint64_t bytes = 0;
  // The transcript's last bytes, [bytes - data.size(), bytes), sent raw after the line: what the
  // vendor wrote since the previous `out`, when the connection carries bytes and they fit its
  // bound. Empty: none carried (the daemon reads the transcript).
  std::string data;
  // How many bytes follow the line, as it says ("carried"); the reader reads that many into
  // `data`. serialize() writes data.size() instead.
  std::uint64_t carried = 0;
};
struct OutEnd {  // the vendor's stdout ended; the transcript's final size
  std::uint64_t bytes = 0;
};
struct ErrEnd {};
struct Exited {
  protocol::ProcessTermination termination;
};
struct HookGone {
  std::uint64_t connection = 0;
};
struct Refused {  // the answer to a daemon line that could not be used
  std::string why;
};
// The run's gateway (docs/gateway.md). These are kept, in order and bounded, while no daemon is
// attached, and sent after the next hello; a `reserve` not yet answered is sent again after every
// hello until it is (its request waits for the answer).
struct Reserve {  // a model request asks to spend at most this before it is forwarded
  std::uint64_t request = 0;
  std::string model;
  std::uint64_t max_tokens = 0;
  std::uint64_t input_bytes = 0;
};
struct GatewayUsage {  // what one forwarded request spent, read from its answer; settles its reserve
  std::uint64_t request = 0;
  std::int32_t status = 0;
  std::string model;
  std::optional<std::uint64_t> input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens;
  bool complete = false;
  std::string failure;  // no answer came (status 0): why the gateway could not reach its upstream
};
struct GatewayRefused {  // a method and path outside the wire's model routes, refused 403 (once each)
  std::string method;
  std::string path;
};
struct Egress {             // a connection attempt through the run's egress proxy
  std::string destination;  // "host:port"
  bool allowed = false;
  std::string why;  // when refused
};

// The answer to a `respawn`: the new vendor's pid, or why it was not spawned (a vendor still
// running, a spawn that failed). After a pid, the new vendor's out, out_end, err_end and exited
// follow as the first one's did (the transcript's offsets go on from where they were).
struct Respawned {
  std::optional<std::int32_t> vendor_pid;
  std::optional<std::string> spawn_error;
};

using FromSupervisor = std::variant<Hello, Out, OutEnd, ErrEnd, Exited, Hook, HookGone, Refused, Reserve, GatewayUsage,
                                    GatewayRefused, Egress, Respawned>;

// ---- codec ------------------------------------------------------------------------------------

// One line each, '\n' included (an `out` with data: its line, then the data).
std::string serialize(const ToSupervisor& message);
std::string serialize(const FromSupervisor& message);

// A line without its '\n'. nullopt: a message of an unknown kind, to be ignored.
using ParsedToSupervisor = boost::system::result<std::optional<ToSupervisor>, std::string>;
using ParsedFromSupervisor = boost::system::result<std::optional<FromSupervisor>, std::string>;
ParsedToSupervisor parse_to_supervisor(std::string_view line);
ParsedFromSupervisor parse_from_supervisor(std::string_view line);

// The supervisor's stream as the daemon reads it: a line is a message (parse_from_supervisor),
// and an `out` whose line says "carried": N is followed by N raw bytes, read into its data. The
// bytes are held only up to `max_carried` (the bound the daemon's attach announced); a longer
// payload, or one the hello did not agree to, is passed over as it arrives and the `out` is handed
// on without data (the daemon reads the transcript instead), with a warning. A line that cannot be
// read once the hello agreed to carry bytes loses the framing (the raw bytes after it could be
// taken for messages): lost() then says so and nothing more is read.
class FromSupervisorReader {
 public:
  // A message, nullopt for a message to be ignored, or a warning about what was skipped.
  using Sink = std::function<void(ParsedFromSupervisor)>;
  explicit FromSupervisorReader(std::size_t max_carried);

  // Feeds a chunk: the sink is called for each message, in order.
  void feed(std::string_view chunk, const Sink& sink);
  // The stream ended: a last line without its '\n' is still read; a payload cut short is not
  // handed on.
  void finish(const Sink& sink);
  const std::optional<std::string>& lost() const { return lost_; }

 private:
  void on_line(const protocol::FramedLine& line, const Sink& sink);

  protocol::LineFramer framer_;
  std::size_t max_carried_;
  bool carrying_ = false;          // the hello agreed to carry bytes
  std::optional<Out> payload_of_;  // the `out` whose payload is arriving
  std::uint64_t payload_left_ = 0;
  bool payload_kept_ = false;  // false: passed over as it arrives
  std::optional<std::string> lost_;
};

// The part of `out`'s carried bytes that continues a transcript read up to `fed`: the data when it
// begins at `fed`, its tail when it began before. nullopt when the data does not reach back to
// `fed` or claims bytes past the transcript's start (the transcript is read instead).
std::optional<std::string_view> carried_from(const Out& out, std::uint64_t fed);

// The refusal of a line over the bound ("a line of at least N bytes, over the 8 MiB bound").
std::string refuse_oversized(std::uint64_t length, std::size_t bound);

// The version the supervisor speaks to a daemon whose highest is `daemon_highest`, or why not.
boost::system::result<std::uint32_t, std::string> supervisor_speaks(std::uint32_t daemon_highest);
// The daemon's check of a hello's version: it is the session's version, or why not
// ("supervisor speaks protocol 7, this daemon 1..1").
boost::system::result<std::uint32_t, std::string> daemon_accepts(std::uint32_t hello_protocol);

}  // namespace mh::supervisor
