// The Agent Client Protocol (ACP, protocol version 1: JSON-RPC 2.0 over stdio, one message a
// line) from the client's side, as values: the requests a client sends with their typed ids, the
// answers it gives to the agent's requests, and the first reading of every agent line (an answer
// to one of our requests, a notification, or a request of the agent's). No I/O, no clock, no
// throw: agent lines are untrusted, and whatever does not have the shape is named, never guessed.
// What the ACP vendors send and accept, as observed: docs/reference/ (one page per vendor).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mh::adapters::acp {

namespace json = boost::json;

inline constexpr std::uint64_t kProtocolVersion = 1;
// Ids, session ids and tool call ids longer than this are refused: nothing legitimate needs more,
// and each is kept in memory for the call's life.
inline constexpr std::size_t kMaxIdBytes = 256;

// The id of a request we sent: ours are numbers we assign, so an answer carrying anything else
// (a string, a fraction, a negative) cannot be ours.
struct OurId {
  std::uint64_t value = 0;
  friend bool operator==(const OurId&, const OurId&) = default;
  friend auto operator<=>(const OurId&, const OurId&) = default;
};

// The id of a request the agent sent, verbatim (a JSON-RPC id is a string or an integer: the
// answer must carry the same one back). Its own id space: the agent's 0 is not our 0.
struct AgentId {
  json::value value;
  std::string key() const;  // canonical text, for maps and reply tokens
};

// What a client declares in initialize. metaharness declares none of the optional client
// capabilities (no fs, no terminal): the agent runs its own tools, and the calls are gated.
struct ClientInfo {
  std::string name = "metaharness";
  std::string version;
};

// --- what we send --------------------------------------------------------------------------------

std::string initialize_request(OurId id, const ClientInfo& info);
std::string session_new_request(OurId id, std::string_view cwd);
// One user message made of these texts, in order (one text content block each).
std::string session_prompt_request(OurId id, std::string_view session_id, const std::vector<std::string>& texts);
// A notification (no id, no answer): the agent ends the running prompt with stopReason "cancelled".
std::string session_cancel_notification(std::string_view session_id);

// Our answers to the agent's requests.
std::string permission_selected(const AgentId& id, std::string_view option_id);
// The answer the spec requires for a permission request still open when the prompt is cancelled.
std::string permission_cancelled(const AgentId& id);
std::string error_answer(const AgentId& id, int code, std::string_view message);

inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;

// --- what the agent sends ------------------------------------------------------------------------

// An answer to one of our requests: `result` or `error` (message and code as the agent said).
struct Answer {
  OurId id;
  std::optional<json::value> result;  // nullopt: an error answer
  std::string error_message;
  std::optional<std::int64_t> error_code;
  // The model endpoint's HTTP status the error passes on, when it says one: the error's code when
  // that is one (Gemini CLI 0.61.0; Qwen Code 0.24.4 for a 429), else the status that opens its
  // data.details (Qwen Code 0.24.4's "Internal error" for a 401: "401 {...}").
  std::optional<int> http_status;
};
struct Notification {
  std::string method;
  json::object params;
};
struct AgentRequest {
  AgentId id;
  std::string method;
  json::object params;
};
// The line had a JSON-RPC envelope we refuse (why, by name), or none at all.
struct Unreadable {
  std::string why;
  std::optional<std::string> method;  // when the line named one
};

using AgentMessage = std::variant<Answer, Notification, AgentRequest, Unreadable>;

// The first reading of one agent message (a JSON object already parsed from one line).
AgentMessage classify(const json::object& message);

// --- session/request_permission -----------------------------------------------------------------

// One option the agent offers (kind: allow_once, allow_always, reject_once, reject_always).
struct PermissionOption {
  std::string option_id;
  std::string kind;
};
struct PermissionRequest {
  std::string session_id;
  std::string tool_call_id;
  std::optional<std::string> title;
  std::optional<std::string> kind;
  json::value raw_input;  // null when the agent sent none
  std::vector<PermissionOption> options;
  // The option a once-only answer selects, if offered. "Always" options are never selected: an
  // always-allow is a broad rule inside the agent (it let later, different calls through unasked).
  std::optional<std::string> option_of_kind(std::string_view kind) const;
};
// The params of a session/request_permission, or why they are refused.
std::variant<PermissionRequest, std::string> read_permission_request(const json::object& params);

}  // namespace mh::adapters::acp
