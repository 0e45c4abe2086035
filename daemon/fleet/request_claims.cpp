#include "daemon/fleet/request_claims.hpp"

#include "protocol/digest.hpp"
#include "protocol/json.hpp"

namespace mh::fleet {

namespace {

std::string claim_json(std::uint32_t uid, const std::string& request_id, const RequestClaim& claim) {
  protocol::json::object o;
  o["uid"] = uid;
  o["request_id"] = request_id;
  o["run_id"] = claim.run_id;
  o["spec_sha256"] = claim.spec_sha256;
  return protocol::canonical_json(o);
}

// A peer wrote it: parsed as a value, and refused unless it names this very (uid, request_id)
// (a key is a digest; the value says what it stands for).
std::optional<RequestClaim> claim_from_json(std::uint32_t uid, const std::string& request_id, std::string_view text) {
  auto v = protocol::parse_json(text);
  if (!v || !v->is_object()) return std::nullopt;
  const auto& o = v->as_object();
  const protocol::json::value* u = o.if_contains("uid");
  const bool same_uid = u && ((u->is_int64() && u->get_int64() == static_cast<std::int64_t>(uid)) ||
                              (u->is_uint64() && u->get_uint64() == uid));
  if (!same_uid) return std::nullopt;
  if (protocol::string_at(o, "request_id").value_or("") != request_id) return std::nullopt;
  RequestClaim c{protocol::string_at(o, "run_id").value_or(""), protocol::string_at(o, "spec_sha256").value_or("")};
  if (!run_id_problem(c.run_id).empty() || c.spec_sha256.empty()) return std::nullopt;
  return c;
}

}  // namespace

std::string request_claim_key(std::uint32_t uid, const std::string& request_id) {
  return protocol::sha256_hex(std::to_string(uid) + ":" + request_id);
}

NatsResult<std::optional<RequestClaim>> read_request_claim(FleetLink& link, std::uint32_t uid,
                                                           const std::string& request_id) {
  // Asked of the bucket's stream leader, not kvStore_Get (a follower may not have the claim
  // another host made a moment ago: run_records.cpp, read_run_record).
  const std::string key = request_claim_key(uid, request_id);
  const std::string bucket = link.names().requests_bucket();
  const std::string stream = "KV_" + bucket, subject = "$KV." + bucket + "." + key;
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&raw, link.js(), stream.c_str(), subject.c_str(), nullptr, &code);
  MsgHandle msg(raw);
  if (s == NATS_NOT_FOUND) return std::optional<RequestClaim>();
  if (s != NATS_OK) return nats_error("the claim of request id " + request_id, s, code);
  const char* op = nullptr;  // a deleted or purged key leaves a marker as its last message
  if (natsMsgHeader_Get(msg.get(), "KV-Operation", &op) == NATS_OK && op != nullptr)
    return std::optional<RequestClaim>();
  auto claim = claim_from_json(
      uid, request_id,
      std::string_view(natsMsg_GetData(msg.get()), static_cast<std::size_t>(natsMsg_GetDataLength(msg.get()))));
  if (!claim) return nats_error("the claim of request id " + request_id + " is unreadable", NATS_ERR);
  return claim;
}

NatsResult<std::optional<RequestClaim>> claim_request(FleetLink& link, std::uint32_t uid, const std::string& request_id,
                                                      const RequestClaim& mine) {
  const std::string key = request_claim_key(uid, request_id);
  const std::string body = claim_json(uid, request_id, mine);
  uint64_t rev = 0;
  natsStatus s = kvStore_Create(&rev, link.requests(), key.c_str(), body.data(), static_cast<int>(body.size()));
  if (s == NATS_OK) return std::optional<RequestClaim>();
  // Refused (the key is there) or lost on the way: whichever claim the bucket holds decides.
  auto held = read_request_claim(link, uid, request_id);
  if (!held) return held.error();
  if (!*held) return nats_error("claiming request id " + request_id, s);
  if ((*held)->run_id == mine.run_id) return std::optional<RequestClaim>();  // ours, its ack lost
  return held;
}

}  // namespace mh::fleet
