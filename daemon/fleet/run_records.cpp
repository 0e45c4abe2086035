#include "daemon/fleet/run_records.hpp"

#include <boost/json/serialize.hpp>

#include "protocol/json.hpp"

namespace mh::fleet {

namespace {

constexpr std::size_t kMaxRecordBytes = 4096;

bool fits(const std::string& s) {
  return s.empty() || host_id_problem(s).empty();
}

std::string_view value_of(kvEntry* e) {
  return std::string_view(static_cast<const char*>(kvEntry_Value(e)), static_cast<std::size_t>(kvEntry_ValueLen(e)));
}

}  // namespace

std::string RunRecord::to_json() const {
  protocol::json::object o;
  o["host"] = host;
  o["state"] = state;
  if (!closed_by.empty()) o["closed_by"] = closed_by;
  if (launched) o["launched"] = true;
  return boost::json::serialize(o);
}

std::optional<RunRecord> RunRecord::from_json(std::string run_id, std::string_view text, std::uint64_t revision) {
  if (text.size() > kMaxRecordBytes) return std::nullopt;
  auto value = protocol::parse_json(text);
  if (!value || !value->is_object()) return std::nullopt;
  const auto& o = value->as_object();
  RunRecord r;
  r.run_id = std::move(run_id);
  r.revision = revision;
  r.host = protocol::string_at(o, "host").value_or("");
  r.state = protocol::string_at(o, "state").value_or("");
  r.closed_by = protocol::string_at(o, "closed_by").value_or("");
  const protocol::json::value* launched = o.if_contains("launched");
  r.launched = launched && launched->is_bool() && launched->as_bool();
  if (r.host.empty() || !fits(r.host) || !fits(r.closed_by)) return std::nullopt;
  if (r.state != "open" && r.state != "closing" && r.state != "closed") return std::nullopt;
  return r;
}

NatsResult<Claim> claim_placement(FleetLink& link, const std::string& run_id, const std::string& host, bool launched) {
  if (auto problem = run_id_problem(run_id); !problem.empty())
    return nats_error("run id " + run_id + ": " + problem, NATS_INVALID_ARG);
  RunRecord record{run_id, host, "open", "", launched, 0};
  const std::string body = record.to_json();
  uint64_t rev = 0;
  natsStatus s = kvStore_Create(&rev, link.runs(), run_id.c_str(), body.data(), static_cast<int>(body.size()));
  if (s == NATS_OK) return Claim::won;
  // Refused or lost on the way: whoever the record names owns the run.
  auto existing = read_run_record(link, run_id);
  if (!existing) return existing.error();
  if (!*existing) return nats_error("claiming " + run_id, s);
  return (*existing)->host == host ? Claim::won : Claim::lost;
}

NatsResult<bool> release_placement(FleetLink& link, const std::string& run_id, const std::string& host) {
  auto record = read_run_record(link, run_id);
  if (!record) return record.error();
  if (!*record) return true;
  const RunRecord& claimed = **record;
  if (claimed.host != host || claimed.launched || claimed.state != "open") return false;
  // The delete marker kvStore_Delete writes (a KV-Operation header on the key's subject), published
  // only over the revision read: kvStore_Delete has no compare-and-set, and a plain delete could
  // erase a survivor's close or a mark made meanwhile.
  const std::string subject = "$KV." + link.names().runs_bucket() + "." + run_id;
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, subject.c_str(), nullptr, nullptr, 0);
  MsgHandle msg(raw);
  if (s == NATS_OK) s = natsMsgHeader_Set(msg.get(), "KV-Operation", "DEL");
  if (s != NATS_OK) return nats_error("releasing " + run_id, s);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.ExpectLastSubjectSeq = claimed.revision;
  po.MaxWait = link.config().request_timeout.count();
  jsPubAck* ack_raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  s = js_PublishMsg(&ack_raw, link.js(), msg.get(), &po, &code);
  PubAckHandle ack(ack_raw);
  if (s == NATS_OK) return true;
  // Refused (the record moved) or the reply lost: what is there now says which.
  auto now = read_run_record(link, run_id);
  if (!now) return now.error();
  if (!*now) return true;
  if ((*now)->revision == claimed.revision) return nats_error("releasing " + run_id, s, code);
  return false;
}

NatsResult<std::optional<RunRecord>> read_run_record(FleetLink& link, const std::string& run_id, Wait wait) {
  if (!run_id_problem(run_id).empty()) return std::optional<RunRecord>();
  // The key's last message asked of the bucket's stream leader, not kvStore_Get: libnats 3.4
  // reads a bucket that allows direct gets from any replica, and a follower may not have the
  // record another host made a moment ago (read after write, across hosts, is what we need).
  const std::string bucket = link.names().runs_bucket();
  const std::string stream = "KV_" + bucket, subject = "$KV." + bucket + "." + run_id;
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&raw, wait == Wait::sweep ? link.sweep_js() : link.js(), stream.c_str(), subject.c_str(),
                               nullptr, &code);
  MsgHandle msg(raw);
  if (s == NATS_NOT_FOUND) return std::optional<RunRecord>();
  if (s != NATS_OK) return nats_error("record of " + run_id, s, code);
  // A deleted or purged key leaves a marker as its last message.
  const char* op = nullptr;
  if (natsMsgHeader_Get(msg.get(), "KV-Operation", &op) == NATS_OK && op != nullptr) return std::optional<RunRecord>();
  return RunRecord::from_json(
      run_id, std::string_view(natsMsg_GetData(msg.get()), static_cast<std::size_t>(natsMsg_GetDataLength(msg.get()))),
      natsMsg_GetSequence(msg.get()));
}

NatsResult<void> mark_launched(FleetLink& link, const std::string& run_id) {
  auto record = read_run_record(link, run_id);
  if (!record) return record.error();
  if (!*record) return nats_error("marking " + run_id + " launched: it has no record", NATS_NOT_FOUND);
  if ((*record)->launched) return {};
  RunRecord next = **record;
  next.launched = true;
  auto updated = update_run_record(link, next);
  if (!updated) return updated.error();
  if (*updated == Claim::lost) return nats_error("marking " + run_id + " launched: its record moved", NATS_ERR);
  return {};
}

NatsResult<Claim> update_run_record(FleetLink& link, const RunRecord& next, Wait wait) {
  const std::string body = next.to_json();
  uint64_t rev = 0;
  natsStatus s = kvStore_Update(&rev, wait == Wait::sweep ? link.sweep_runs() : link.runs(), next.run_id.c_str(),
                                body.data(), static_cast<int>(body.size()), next.revision);
  if (s == NATS_OK) return Claim::won;
  // A refused compare-and-set and a lost reply look alike here: read what is there.
  auto now = read_run_record(link, next.run_id, wait);
  if (!now) return now.error();
  if (*now && (*now)->host == next.host && (*now)->state == next.state && (*now)->closed_by == next.closed_by)
    return Claim::won;
  return Claim::lost;
}

NatsResult<std::optional<RunRecord>> await_run_record(FleetLink& link, const std::string& run_id,
                                                      std::chrono::milliseconds timeout) {
  if (!run_id_problem(run_id).empty()) return std::optional<RunRecord>();
  kvWatcher* raw = nullptr;
  natsStatus s = kvStore_Watch(&raw, link.runs(), run_id.c_str(), nullptr);
  if (s != NATS_OK) return nats_error("watching " + run_id, s);
  RunRecordWatch::WatcherHandle watcher(raw);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<RunRecord>();
    kvEntry* e = nullptr;
    s = kvWatcher_Next(&e, watcher.get(), left.count());
    KvEntryHandle entry(e);
    if (s == NATS_TIMEOUT) return std::optional<RunRecord>();
    if (s != NATS_OK) return nats_error("watching " + run_id, s);
    if (!entry || kvEntry_Operation(entry.get()) != kvOp_Put) continue;  // the end of the initial values, a delete
    auto record = RunRecord::from_json(run_id, value_of(entry.get()), kvEntry_Revision(entry.get()));
    if (record && (record->launched || record->state == "closed")) return record;
  }
}

NatsResult<std::vector<RunRecord>> list_run_records(FleetLink& link) {
  std::vector<RunRecord> out;
  KeysList keys;
  natsStatus s = kvStore_Keys(keys.get(), link.runs(), nullptr);
  if (s == NATS_NOT_FOUND) return out;
  if (s != NATS_OK) return nats_error("listing runs", s);
  for (int i = 0; i < keys.size(); ++i) {
    auto record = read_run_record(link, keys.at(i));
    if (!record) return record.error();
    if (*record) out.push_back(std::move(**record));
  }
  return out;
}

NatsResult<RunRecordWatch> RunRecordWatch::open(FleetLink& link) {
  kvWatcher* raw = nullptr;
  if (natsStatus s = kvStore_WatchAll(&raw, link.runs(), nullptr); s != NATS_OK)
    return nats_error("watching the run records", s);
  return RunRecordWatch(WatcherHandle(raw));
}

NatsResult<void> RunRecordWatch::drain() {
  for (;;) {
    kvEntry* e = nullptr;
    natsStatus s = kvWatcher_Next(&e, watcher_.get(), 1);  // what is queued comes at once
    KvEntryHandle entry(e);
    if (s == NATS_TIMEOUT) return {};
    if (s != NATS_OK) return nats_error("watching the run records", s);
    if (!entry) continue;  // the end of the initial values
    std::string key = kvEntry_Key(entry.get());
    if (kvEntry_Operation(entry.get()) != kvOp_Put) {
      records_.erase(key);
      continue;
    }
    if (run_id_problem(key).empty()) {
      auto record = RunRecord::from_json(key, value_of(entry.get()), kvEntry_Revision(entry.get()));
      // A closed record is never open again (a record is made only where none is): not kept, so
      // the watch holds the runs still open, not every run the fleet ever had.
      if (record && record->state == "closed")
        records_.erase(key);
      else if (record)
        records_[key] = std::move(*record);
    }
  }
}

}  // namespace mh::fleet
