#include "daemon/fleet/fleet_link.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "daemon/log.hpp"

namespace mh::fleet {

namespace {

constexpr std::int64_t kNanosPerMilli = 1'000'000;

// What libnats meets off any call of ours — an ordered consumer it could not make again, a
// subscription whose messages it dropped (slow consumer), heartbeats missed — it says only to
// the connection's error handler: without one, nothing is said at all. Logged as a warning, at
// most one line every 5 s for the whole process (an outage repeats the same error every couple
// of seconds per follower), with how many were left unsaid since the last.
void log_async_error(natsConnection*, natsSubscription* sub, natsStatus status, void*) {
  using Clock = std::chrono::steady_clock;
  static std::atomic<Clock::rep> next_allowed{0};
  static std::atomic<std::uint64_t> unsaid{0};
  const Clock::rep now = Clock::now().time_since_epoch().count();
  Clock::rep allowed = next_allowed.load();
  const Clock::rep next = now + std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(5)).count();
  if (now < allowed || !next_allowed.compare_exchange_strong(allowed, next)) {
    ++unsaid;
    return;
  }
  std::string message = "fleet: NATS: " + std::string(natsStatus_GetText(status));
  if (sub) {
    if (const char* subject = natsSubscription_GetSubject(sub))
      message += " (subscription on " + std::string(subject) + ")";
  }
  if (const char* detail = nats_GetLastError(nullptr); detail && *detail) message += ": " + std::string(detail);
  if (const std::uint64_t before = unsaid.exchange(0))
    message += " [" + std::to_string(before) + " more unsaid in the last 5 s]";
  mh::daemon::log(mh::daemon::LogPriority::warning, message);
}

// A value of the config refused before anything is asked of a server, blaming `key`.
NatsError config_error(std::string key, std::string why) {
  NatsError e;
  e.status = NATS_INVALID_ARG;
  e.key = std::move(key);
  e.text = std::move(why);
  return e;
}

// How the credentials file authenticates (docs/fleet.md, Configuration): a .creds file holds a
// JWT and a seed; a seed alone on the first line needs its public key (fleet.nkey), since libnats
// signs with the seed but sends the key it is given; anything else is `user:password` on the
// first line (the password is the rest of the line). A file that fits none is refused here, not
// by the server.
NatsResult<void> apply_credentials(natsOptions* opts, const FleetConfig& config) {
  if (config.credentials.empty()) return {};
  const std::string file = config.credentials.string();
  std::ifstream in(config.credentials);
  if (!in) return config_error("fleet.credentials", "cannot read " + file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string line = text.substr(0, text.find('\n'));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  natsStatus s;
  if (text.find("-----BEGIN NATS USER JWT-----") != std::string::npos) {
    if (!config.nkey.empty())
      return config_error("fleet.nkey", file + " is a .creds file, whose JWT names the key: leave fleet.nkey out");
    s = natsOptions_SetUserCredentialsFromFiles(opts, file.c_str(), nullptr);
  } else if (is_nkey(line, NkeyKind::user_seed)) {  // alone on its line: never a user:password line
    if (config.nkey.empty())
      return config_error("fleet.nkey", file + " holds an NKey seed: fleet.nkey must name its public key (U...)");
    s = natsOptions_SetNKeyFromSeed(opts, config.nkey.c_str(), file.c_str());
  } else if (!config.nkey.empty()) {
    return config_error("fleet.credentials", file + " holds no NKey seed (SU... on its first line) for fleet.nkey");
  } else {
    auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0)
      return config_error("fleet.credentials",
                          file + " holds neither user:password on its first line, a .creds file, nor an NKey seed");
    s = natsOptions_SetUserInfo(opts, line.substr(0, colon).c_str(), line.substr(colon + 1).c_str());
  }
  if (s != NATS_OK) {
    NatsError e = nats_error(file, s);
    e.key = "fleet.credentials";
    return e;
  }
  return {};
}

// The server said no to who we are (the credentials, or none when it asks for some).
bool authorization_refused(natsStatus s) {
  return s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED;
}

bool already_exists(jsErrCode code) {
  return code == JSStreamNameExistErr || code == JSConsumerNameExistErr || code == JSConsumerExistingActiveErr;
}

// A part of the layout JetStream holds but cannot use yet: a stream or consumer whose replicas
// have no leader (just made, or electing after its nodes came back). Nothing listens on a
// leaderless stream's subjects, so a publish there gets "no responders": the layout is not made
// until every part has a leader. Given JetStream's own code for "temporarily unavailable" (what it
// answers itself when its meta group has no leader), so connect() waits for it.
NatsError not_ready(std::string what, std::string why) {
  NatsError e;
  e.status = NATS_ERR;
  e.js = JSClusterNotAvailErr;
  e.text = std::move(what) + ": " + std::move(why) + " (JetStream temporarily unavailable for it)";
  return e;
}

// A lone server (no cluster) names itself the leader of everything; a replicated stream or
// consumer names its group's leader, or none while that group elects one.
bool has_leader(const jsClusterInfo* cluster) {
  return cluster == nullptr || (cluster->Leader != nullptr && *cluster->Leader != '\0');
}

// How long "not found" must hold, after a create that went unanswered, before it is sent again.
// A create sent while JetStream's meta leader had lost its quorum is not answered, but it sits in
// that leader's log and in its followers' (sent them before they stopped answering), and the next
// meta leader applies it once it commits an entry of its own term. Until then that new leader
// answers "not found", and a second create then makes a second assignment of the same stream:
// nats-server 2.9.10 warns "detected duplicate assignment" and keeps a stream whose info names a
// leader but which takes no message ("no responders" to every publish, for minutes; seen in
// tests/fleet, FleetLibrary.AHostStartingWhileJetStreamIsUnavailable...). A new leader commits
// within a few of its heartbeats (1 s each); the wait is a few of them.
constexpr std::chrono::seconds kUnansweredCreateSettle{5};

// Whether the create of `name` may be sent now: yes unless an earlier one went unanswered and
// "not found" has not yet held for kUnansweredCreateSettle since (this call is such an answer).
NatsResult<void> may_create(FleetLink::Creates& creates, const std::string& name, const std::string& what) {
  auto it = creates.find(name);
  if (it == creates.end()) return {};
  const auto now = std::chrono::steady_clock::now();
  if (!it->second.missing_since) it->second.missing_since = now;
  if (now - *it->second.missing_since >= kUnansweredCreateSettle) return {};
  return not_ready(what, "not found, but its create went unanswered and may yet be applied: asked again first");
}

// After a create of `name` came back with `s` and `code`: one JetStream did not answer (a timeout,
// or a disconnect that failed the request) is remembered (see may_create).
void created(FleetLink::Creates& creates, const std::string& name, natsStatus s, jsErrCode code) {
  if (s != NATS_OK && code == 0)
    creates[name] = {};
  else
    creates.erase(name);
}

// Any answer but "not found" ends a streak of them (see may_create). Even one that finds it: a
// stream found without a leader has been seen to be answered "not found" again a moment later
// (its assignment dropped by the new meta leader), so only one with a leader ends the care.
void not_missing(FleetLink::Creates& creates, const std::string& name, natsStatus s) {
  if (s == NATS_NOT_FOUND) return;
  if (auto it = creates.find(name); it != creates.end()) it->second.missing_since.reset();
}

// A stream made if missing; one that exists is kept as it is (another host made it first). Done
// only once the stream has a leader: a create that timed out may have been made all the same and
// still be electing, and a stream's info is answered by its members before they have a leader.
NatsResult<void> ensure_stream(jsCtx* js, jsStreamConfig& cfg, FleetLink::Creates& creates) {
  const std::string name = cfg.Name;
  jsStreamInfo* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&raw, js, cfg.Name, nullptr, &code);
  StreamInfoHandle info(raw);
  not_missing(creates, name, s);
  if (s == NATS_NOT_FOUND) {
    if (auto may = may_create(creates, name, "stream " + name); !may) return may.error();
    raw = nullptr;
    code = static_cast<jsErrCode>(0);
    s = js_AddStream(&raw, js, &cfg, nullptr, &code);
    info.reset(raw);
    created(creates, name, s, code);
    if (s != NATS_OK && !already_exists(code)) return nats_error("creating stream " + name, s, code);
    if (s != NATS_OK) {  // another host made it between the two calls: its info, for its leader
      raw = nullptr;
      code = static_cast<jsErrCode>(0);
      s = js_GetStreamInfo(&raw, js, cfg.Name, nullptr, &code);
      info.reset(raw);
    }
  }
  if (s != NATS_OK) return nats_error("stream " + name, s, code);
  if (!has_leader(info->Cluster)) return not_ready("stream " + name, "its replicas have no leader yet");
  creates.erase(name);
  return {};
}

// A bucket is a stream (KV_<bucket>) that js_KeyValue binds to. Made here with js_AddStream, the
// way libnats' js_CreateKeyValue makes it (libnats 3.4.1, kv.c: the same settings), because
// js_CreateKeyValue keeps JetStream's error code to itself: "temporarily unavailable" or
// "insufficient resources" would come back as a bare NATS_ERR, neither waited for nor named.
NatsResult<KvHandle> ensure_bucket(jsCtx* js, const kvConfig& kc, FleetLink::Creates& creates) {
  const std::string bucket = kc.Bucket;
  const std::string stream = "KV_" + bucket, subject = "$KV." + bucket + ".>";
  const char* subjects[] = {subject.c_str()};
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = stream.c_str();
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.MaxMsgsPerSubject = kc.History > 0 ? kc.History : 1;
  sc.MaxBytes = kc.MaxBytes == 0 ? -1 : kc.MaxBytes;
  sc.MaxAge = kc.TTL;
  sc.MaxMsgSize = kc.MaxValueSize == 0 ? -1 : kc.MaxValueSize;
  sc.Storage = kc.StorageType;
  sc.Replicas = kc.Replicas > 0 ? kc.Replicas : 1;
  sc.AllowRollup = true;
  sc.DenyDelete = true;
  sc.AllowDirect = true;
  sc.Discard = js_DiscardNew;  // what js_CreateKeyValue asks of a 2.7.2+ server (the fleet needs 2.9)
  if (auto made = ensure_stream(js, sc, creates); !made) {
    NatsError e = made.error();
    e.text = "bucket " + bucket + ": " + e.text;
    return e;
  }
  kvStore* raw = nullptr;
  natsStatus s = js_KeyValue(&raw, js, kc.Bucket);
  if (s == NATS_OK) return KvHandle(raw);
  NatsError e = nats_error("bucket " + bucket, s);
  // The stream was there, with a leader, a moment ago: a bind that fails now (its one stream info
  // request met a re-election, and libnats keeps JetStream's code to itself) is asked again. Only
  // a stream that is no bucket (NATS_INVALID_ARG) will not change.
  if (s != NATS_INVALID_ARG) return not_ready(e.text, "binding to it failed just after it was found");
  return e;
}

// JetStream's answer when the layout asks for more replicas than it has nodes to put them on:
// refused naming fleet.replicas (replicas = 3 is the default; a lone server takes 1).
NatsError replicas_refusal(NatsError e, int replicas) {
  if (replicas <= 1) return e;
  if (e.js == JSStreamReplicasNotSupportedErr) {
    e.key = "fleet.replicas";
    e.text = std::to_string(replicas) + " replicas, but the NATS server is a lone node, not a cluster: it takes " +
             "replicas = 1 only (set fleet.replicas = 1, or join a cluster of " + std::to_string(replicas) +
             " nodes) [" + e.text + "]";
  } else if (e.js == JSInsufficientResourcesErr || e.js == JSClusterNoPeersErr) {
    e.key = "fleet.replicas";
    e.text = std::to_string(replicas) + " replicas, more than the NATS cluster has JetStream nodes to hold them " +
             "(or those nodes have no room left): set fleet.replicas to at most the cluster's size [" + e.text + "]";
  }
  return e;
}

}  // namespace

bool worth_waiting_for(const NatsError& e) {
  return e.js == JSClusterNotAvailErr || e.status == NATS_TIMEOUT;
}

NatsResult<std::unique_ptr<FleetLink>> FleetLink::connect(const FleetConfig& config, const LayoutWait& waiting,
                                                          std::chrono::milliseconds patience) {
  std::unique_ptr<FleetLink> link(new FleetLink(config));
  natsOptions* raw_opts = nullptr;
  if (natsStatus s = natsOptions_Create(&raw_opts); s != NATS_OK) return nats_error("NATS options", s);
  OptionsHandle opts(raw_opts);
  std::vector<const char*> urls;
  for (const auto& u : config.nats_urls)
    urls.push_back(u.c_str());
  const std::string name = "metaharness " + config.host_id;
  natsStatus s = natsOptions_SetServers(opts.get(), urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetName(opts.get(), name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts.get(), config.request_timeout.count());
  // A fleet link outlives any one server: reconnect forever, to any of them, and fail pending
  // requests at once on a disconnect (a caller retries; nothing waits on a dead route).
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts.get(), -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts.get(), 250);
  if (s == NATS_OK) s = natsOptions_SetFailRequestsOnDisconnect(opts.get(), true);
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts.get(), log_async_error, nullptr);
  if (s != NATS_OK) return nats_error("NATS options", s);
  if (auto creds = apply_credentials(opts.get(), config); !creds) return creds.error();

  natsConnection* raw_nc = nullptr;
  s = natsConnection_Connect(&raw_nc, opts.get());
  if (s != NATS_OK) {
    NatsError e = nats_error("connecting to " + config.nats_urls.front(), s);
    e.key = authorization_refused(s) ? "fleet.credentials" : "fleet.nats_urls";
    return e;
  }
  link->nc_.reset(raw_nc);

  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = config.request_timeout.count();
  jsCtx* raw_js = nullptr;
  s = natsConnection_JetStream(&raw_js, link->nc_.get(), &jo);
  if (s != NATS_OK) return nats_error("JetStream context", s);
  link->js_.reset(raw_js);
  jo.Wait = link->sweep_timeout().count();
  raw_js = nullptr;
  s = natsConnection_JetStream(&raw_js, link->nc_.get(), &jo);
  if (s != NATS_OK) return nats_error("JetStream context", s);
  link->sweep_js_.reset(raw_js);
  auto pipe = PublishPipe::open(link->nc_.get(), config.request_timeout);
  if (!pipe) return pipe.error();
  link->pipe_ = std::move(*pipe);
  const auto give_up = std::chrono::steady_clock::now() + patience;
  for (std::chrono::milliseconds pause(250);; pause = std::min(pause * 2, std::chrono::milliseconds(2000))) {
    auto made = link->make_layout();
    if (made) break;
    NatsError why = made.error();
    if (!worth_waiting_for(why)) return replicas_refusal(std::move(why), config.replicas);
    if (std::chrono::steady_clock::now() + pause >= give_up) {
      why.text += " (still so after " + std::to_string((patience.count() + 999) / 1000) + " s)";
      return why;
    }
    if (waiting) waiting(why);
    std::this_thread::sleep_for(pause);  // the daemon's start, before any io thread: nothing else to do
  }
  return link;
}

FleetLink::~FleetLink() {
  // Buckets and the context before the connection they ride on.
  runs_.reset();
  hosts_.reset();
  sweep_runs_.reset();
  sweep_hosts_.reset();
  js_.reset();
  sweep_js_.reset();
  if (nc_) natsConnection_Close(nc_.get());
  pipe_.reset();  // no ack can arrive on a closed connection
}

std::chrono::milliseconds FleetLink::sweep_timeout() const {
  return std::min(std::max(config_.lease_ttl / 3, std::chrono::milliseconds(200)), config_.request_timeout);
}

std::int64_t FleetLink::max_payload() const {
  return natsConnection_GetMaxPayload(nc_.get());
}

NatsResult<void> FleetLink::make_layout() {
  const std::string events = names_.events_stream(), submit = names_.submit_stream();
  const std::string events_subject = names_.events_wildcard(), submit_subject = names_.submit_subject();
  // Both streams: file storage, this host's replicas, a dedup window of 10 minutes (a retry
  // after a reconnect, or a submitter's retry of one run id, is still one message).
  auto make = [this](const std::string& name, const std::string& subject, jsRetentionPolicy retention) {
    const char* subjects[] = {subject.c_str()};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = name.c_str();
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Retention = retention;
    sc.Storage = js_FileStorage;
    sc.Replicas = config_.replicas;
    sc.Duplicates = 10 * 60 * 1000 * kNanosPerMilli;
    sc.AllowDirect = retention == js_LimitsPolicy;  // a stream's last line read without a consumer
    return ensure_stream(js_.get(), sc, unanswered_creates_);
  };
  if (auto r = make(events, events_subject, js_LimitsPolicy); !r) return r.error();
  // The work queue: a message is gone once a host acked it.
  if (auto r = make(submit, submit_subject, js_WorkQueuePolicy); !r) return r.error();
  {
    // One durable pull consumer every host fetches from: a message goes to one fetcher at a time,
    // and comes back (AckWait) if that host dies before it acked.
    const std::string durable = names_.placement_consumer();
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable.c_str();
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = 30 * 1000 * kNanosPerMilli;
    cc.MaxAckPending = 10000;
    cc.Replicas = config_.replicas;
    jsConsumerInfo* raw = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = js_GetConsumerInfo(&raw, js_.get(), submit.c_str(), durable.c_str(), nullptr, &code);
    ConsumerInfoHandle info(raw);
    // The same care as a stream's after an unanswered create (may_create): a consumer is
    // assigned by the meta leader the same way.
    const std::string key = submit + " > " + durable;
    not_missing(unanswered_creates_, key, s);
    if (s == NATS_NOT_FOUND) {
      if (auto may = may_create(unanswered_creates_, key, "consumer " + durable); !may) return may.error();
      raw = nullptr;
      code = static_cast<jsErrCode>(0);
      s = js_AddConsumer(&raw, js_.get(), submit.c_str(), &cc, nullptr, &code);
      info.reset(raw);
      created(unanswered_creates_, key, s, code);
      if (s != NATS_OK && !already_exists(code)) return nats_error("creating consumer " + durable, s, code);
      if (s != NATS_OK) {  // another host made it between the two calls: its info, for its leader
        raw = nullptr;
        code = static_cast<jsErrCode>(0);
        s = js_GetConsumerInfo(&raw, js_.get(), submit.c_str(), durable.c_str(), nullptr, &code);
        info.reset(raw);
      }
    }
    if (s != NATS_OK) return nats_error("consumer " + durable, s, code);
    // A consumer without a leader hands out nothing: a fetch would wait out its whole timeout.
    if (!has_leader(info->Cluster)) return not_ready("consumer " + durable, "its replicas have no leader yet");
    unanswered_creates_.erase(key);
  }
  const std::string runs_bucket = names_.runs_bucket(), hosts_bucket = names_.hosts_bucket();
  {
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = runs_bucket.c_str();
    kc.History = 1;
    kc.Replicas = config_.replicas;
    kc.MaxValueSize = 16 * 1024;
    auto kv = ensure_bucket(js_.get(), kc, unanswered_creates_);
    if (!kv) return kv.error();
    runs_ = std::move(*kv);
  }
  {
    // nats-server 2.9 has no per-key TTL: the whole bucket ages (MaxAge), which is what a lease
    // bucket wants. A host renews its key at ttl/3; a key not renewed within ttl is gone.
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = hosts_bucket.c_str();
    kc.History = 1;
    kc.Replicas = config_.replicas;
    kc.TTL = config_.lease_ttl.count() * kNanosPerMilli;
    kc.MaxValueSize = 4 * 1024;
    auto kv = ensure_bucket(js_.get(), kc, unanswered_creates_);
    if (!kv) return kv.error();
    hosts_ = std::move(*kv);
  }
  {
    // A fleet submit's request id, claimed create-only (request_claims.hpp); the bucket ages its
    // claims out after runs.request_id_retention_s (no per-key TTL on nats-server 2.9).
    const std::string requests_bucket = names_.requests_bucket();
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = requests_bucket.c_str();
    kc.History = 1;
    kc.Replicas = config_.replicas;
    kc.TTL = static_cast<int64_t>(config_.request_id_retention.count()) * 1000 * kNanosPerMilli;
    kc.MaxValueSize = 4 * 1024;
    auto kv = ensure_bucket(js_.get(), kc, unanswered_creates_);
    if (!kv) return kv.error();
    requests_ = std::move(*kv);
  }
  // The buckets again, bound to the short-wait context (js_KeyValue reads the bucket's stream
  // once). Here, inside the waited-for layout, since a bind can meet JetStream's blip as well.
  for (auto [bucket, handle] : {std::pair{&runs_bucket, &sweep_runs_}, std::pair{&hosts_bucket, &sweep_hosts_}}) {
    kvStore* kv = nullptr;
    if (natsStatus s = js_KeyValue(&kv, sweep_js_.get(), bucket->c_str()); s != NATS_OK) {
      NatsError e = nats_error("bucket " + *bucket, s);
      if (s != NATS_INVALID_ARG) return not_ready(e.text, "binding to it failed just after it was made");
      return e;
    }
    handle->reset(kv);
  }
  return {};
}

}  // namespace mh::fleet
