#include "daemon/fleet/fleet_link.hpp"

#include <algorithm>
#include <fstream>
#include <thread>
#include <vector>

namespace mh::fleet {

namespace {

constexpr std::int64_t kNanosPerMilli = 1'000'000;

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

// A stream made if missing; one that exists is kept as it is (another host made it first).
NatsResult<void> ensure_stream(jsCtx* js, jsStreamConfig& cfg) {
  jsStreamInfo* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&raw, js, cfg.Name, nullptr, &code);
  StreamInfoHandle info(raw);
  if (s == NATS_OK) return {};
  if (s != NATS_NOT_FOUND) return nats_error(std::string("stream ") + cfg.Name, s, code);
  raw = nullptr;
  s = js_AddStream(&raw, js, &cfg, nullptr, &code);
  info.reset(raw);
  if (s == NATS_OK || already_exists(code)) return {};
  return nats_error(std::string("creating stream ") + cfg.Name, s, code);
}

NatsResult<KvHandle> ensure_bucket(jsCtx* js, kvConfig& cfg) {
  kvStore* raw = nullptr;
  if (js_KeyValue(&raw, js, cfg.Bucket) == NATS_OK) return KvHandle(raw);
  natsStatus s = js_CreateKeyValue(&raw, js, &cfg);
  if (s == NATS_OK) return KvHandle(raw);
  // Another host made it between the two calls.
  if (js_KeyValue(&raw, js, cfg.Bucket) == NATS_OK) return KvHandle(raw);
  return nats_error(std::string("bucket ") + cfg.Bucket, s);
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
  // The buckets again, bound to the short-wait context (js_KeyValue reads the bucket's stream once).
  for (auto [bucket, handle] : {std::pair{link->names_.runs_bucket(), &link->sweep_runs_},
                                std::pair{link->names_.hosts_bucket(), &link->sweep_hosts_}}) {
    kvStore* kv = nullptr;
    if (s = js_KeyValue(&kv, link->sweep_js_.get(), bucket.c_str()); s != NATS_OK)
      return nats_error("bucket " + bucket, s);
    handle->reset(kv);
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
    return ensure_stream(js_.get(), sc);
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
    if (s == NATS_NOT_FOUND) {
      raw = nullptr;
      s = js_AddConsumer(&raw, js_.get(), submit.c_str(), &cc, nullptr, &code);
      info.reset(raw);
      if (s != NATS_OK && !already_exists(code)) return nats_error("creating consumer " + durable, s, code);
    } else if (s != NATS_OK) {
      return nats_error("consumer " + durable, s, code);
    }
  }
  const std::string runs_bucket = names_.runs_bucket(), hosts_bucket = names_.hosts_bucket();
  {
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = runs_bucket.c_str();
    kc.History = 1;
    kc.Replicas = config_.replicas;
    kc.MaxValueSize = 16 * 1024;
    auto kv = ensure_bucket(js_.get(), kc);
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
    auto kv = ensure_bucket(js_.get(), kc);
    if (!kv) return kv.error();
    hosts_ = std::move(*kv);
  }
  return {};
}

}  // namespace mh::fleet
