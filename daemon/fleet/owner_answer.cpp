#include "daemon/fleet/owner_answer.hpp"

#include "daemon/server/session.hpp"
#include "daemon/server/socket_api.hpp"
#include "protocol/json.hpp"
#include "protocol/types.hpp"

namespace mh::daemon {

namespace {

using Result = boost::system::result<OwnerAnswer, std::string>;

Result refuse(std::string_view owner, std::string why) {
  return Result(boost::system::in_place_error, "host " + std::string(owner) + " answered " + std::move(why));
}

// A refusal code as this project writes them: upper-case words joined by '_'.
bool code_like(std::string_view code) {
  if (code.empty() || code.size() > 64) return false;
  for (char c : code)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// A string field: absent, not a string, or over `bound` bytes is nullopt.
std::optional<std::string> bounded_string(const json::object& o, std::string_view key, std::size_t bound) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_string() || v->get_string().size() > bound) return std::nullopt;
  return std::string(v->get_string());
}

Result read_pending(const json::value& list, std::string_view owner) {
  if (!list.is_array()) return refuse(owner, "a \"pending\" that is not an array");
  OwnerAnswer out;
  out.kind = OwnerAnswer::Kind::pending;
  std::size_t at = 0;
  for (const json::value& entry : list.get_array()) {
    const std::string where = "pending call " + std::to_string(at++);
    if (!entry.is_object()) return refuse(owner, "a " + where + " that is not an object");
    const json::object& o = entry.get_object();
    OwnerPendingCall call;
    auto call_id = bounded_string(o, "call_id", kMaxOwnerCallIdBytes);
    if (!call_id || call_id->empty())
      return refuse(owner, "a " + where + " whose call_id is not a string of 1 to " +
                               std::to_string(kMaxOwnerCallIdBytes) + " bytes");
    call.call_id = std::move(*call_id);
    const json::value* seq = o.if_contains("requested_seq");
    const json::value* remaining = o.if_contains("remaining_ms");
    auto unsigned_of = [](const json::value* v) -> std::optional<std::uint64_t> {
      if (v && v->is_uint64()) return v->get_uint64();
      if (v && v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
      return std::nullopt;
    };
    auto s = unsigned_of(seq);
    auto r = unsigned_of(remaining);
    if (!s || *s == 0) return refuse(owner, "a " + where + " whose requested_seq is not a positive integer");
    if (!r) return refuse(owner, "a " + where + " whose remaining_ms is not a non-negative integer");
    call.requested_seq = *s;
    call.remaining_ms = *r;
    out.pending.push_back(std::move(call));
  }
  return out;
}

}  // namespace

Result read_owner_answer(std::string_view answer, std::string_view owner, const std::optional<std::string>& refusal_id,
                         const std::optional<std::string>& result_id, bool pending_asked) {
  if (answer.find('\n') != std::string_view::npos) return refuse(owner, "more than one line");
  auto parsed = protocol::parse_json(answer);
  if (!parsed || !parsed->is_object()) return refuse(owner, "with something that is not one JSON object");
  const json::object& o = parsed->get_object();
  if (pending_asked) {
    if (const json::value* list = o.if_contains("pending")) return read_pending(*list, owner);
  }
  const json::value* format = o.if_contains("format");
  const json::value* reply = o.if_contains("reply");
  if (!format || !format->is_string() || format->get_string() != kSocketFormat || !reply || !reply->is_string())
    return refuse(owner, std::string("a line that is neither ") + (pending_asked ? "a pending list, " : "") +
                             "a result nor a refusal of " + std::string(kSocketFormat));
  OwnerAnswer out;
  if (reply->get_string() == "refused") {
    auto code = bounded_string(o, "code", 64);
    auto reason = bounded_string(o, "reason", kMaxOwnerReasonBytes);
    if (!code || !code_like(*code)) return refuse(owner, "a refusal whose code is not an upper-case word");
    if (!reason)
      return refuse(owner, "a refusal whose reason is not a string of at most " + std::to_string(kMaxOwnerReasonBytes) +
                               " bytes");
    out.kind = OwnerAnswer::Kind::refused;
    out.line = refusal_line(*code, std::move(*reason), refusal_id);
    return out;
  }
  if (reply->get_string() == "result") {
    // A command id is the client's own (bounded by its line); the owner's copy is bounded by the relay.
    auto command_id = bounded_string(o, "command_id", answer.size());
    const json::value* outcome = o.if_contains("outcome");
    const json::value* recorded = o.if_contains("recorded");
    if (!command_id) return refuse(owner, "a result without a command_id string");
    if (!recorded || !recorded->is_bool()) return refuse(owner, "a result without a boolean \"recorded\"");
    if (!outcome || !outcome->is_object()) return refuse(owner, "a result without an outcome object");
    std::string error;
    auto read = protocol::read_outcome(outcome->get_object(), error);
    if (!read) return refuse(owner, "a result whose outcome does not read: " + error);
    if (read->refusal && read->refusal->reason.size() > kMaxOwnerReasonBytes)
      return refuse(owner, "a result whose refusal reason is over " + std::to_string(kMaxOwnerReasonBytes) + " bytes");
    out.kind = OwnerAnswer::Kind::result;
    out.recorded = recorded->get_bool();
    out.line =
        result_line(result_id, protocol::ev::CommandResult{std::move(*command_id), std::move(*read)}, out.recorded);
    return out;
  }
  return refuse(owner, "a \"" + protocol::excerpt(reply->get_string(), 40) + "\" line, neither a result nor a refusal");
}

}  // namespace mh::daemon
