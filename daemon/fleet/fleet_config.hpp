// The [fleet] section (docs/fleet.md): the NATS servers, this host's name in the fleet, its
// credentials, the replication of the fleet's streams, and the lease. No libnats here: the
// daemon's config reads it, the fleet library uses it.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mh::fleet {

struct FleetConfig {
  std::vector<std::string> nats_urls;  // nats://host:port, at least one
  std::string host_id;                 // [A-Za-z0-9_-]{1,64}: it goes into subjects and keys
  // A file: `user:password` on its first line, a .creds file (a JWT and an NKey seed), or an NKey
  // seed (then `nkey` names its public key). Empty: no credentials, which the daemon's config
  // refuses unless insecure_no_credentials says so (docs/fleet.md, Trust).
  std::filesystem::path credentials;
  std::string nkey;
  // No credentials on purpose: anything that reaches the NATS servers (a run's own tool calls
  // among them) may then submit runs, read every run's events and forge commands. Loopback URLs
  // only, for tests; warned at every start.
  bool insecure_no_credentials = false;
  int replicas = 3;                                 // of every stream and bucket, 1..5 (at most the nodes)
  std::chrono::milliseconds lease_ttl{6000};        // a host whose lease is this old is lost
  std::string prefix = "mh";                        // subjects <prefix>.events.<run>, ...
  std::chrono::milliseconds request_timeout{5000};  // a NATS API call, a routed command
  // The publisher before issue 26: every run's lines on one strand, one blocking publish (a
  // JetStream round trip) at a time. Kept to measure against (bench/fleet_daemon_bench.cpp);
  // false (the default): every run publishes asynchronously, all at once (publish_pipe.hpp).
  bool serial_publish = false;
  // At most this many of a run's lines in one fleet message (issue 26 section 5): a run has one
  // message in flight (its fence is the previous message's ack), and the lines written meanwhile
  // go together in the next, so a chatty run is not held to one line per round trip. 1: one line
  // per message, as before (a fleet with hosts older than this reader of batches needs it).
  int publish_batch_lines = 64;
  // How long a fleet submit's request id is claimed (the requests bucket's max age): not a
  // [fleet] key but the daemon's runs.request_id_retention_s, set by FleetHost::start. The host
  // that makes the bucket sets it; a host that finds the bucket uses it as it is.
  std::chrono::seconds request_id_retention{std::chrono::hours(24 * 7)};
};

// "" when the name may go into a subject ([A-Za-z0-9_-], 1..64 characters), else why not.
std::string host_id_problem(std::string_view host_id);
// A run id is checked the same way before it goes into a subject (a peer's message may name one).
inline std::string run_id_problem(std::string_view run_id) {
  return host_id_problem(run_id);
}

// Whether a NATS URL (nats:// or tls://, user info allowed) names a loopback host: 127.0.0.0/8,
// [::1] or localhost. insecure_no_credentials is taken only for such URLs.
bool url_is_loopback(std::string_view url);

// Whether `text` is an NKey of `kind` in nkeys' text form: its prefix ("U" a user's public key,
// "SU" a user's seed), then base32 only (A-Z, 2-7). A public key is 56 characters in all; a seed's
// length is libnats' to judge.
enum class NkeyKind { user_public_key, user_seed };
bool is_nkey(std::string_view text, NkeyKind kind);

// The names every host agrees on, from the prefix.
struct FleetNames {
  explicit FleetNames(std::string prefix) : prefix(std::move(prefix)) {}
  std::string prefix;

  std::string events_stream() const { return upper() + "_EVENTS"; }
  std::string submit_stream() const { return upper() + "_SUBMIT"; }
  std::string events_subject(std::string_view run) const { return prefix + ".events." + std::string(run); }
  std::string events_wildcard() const { return prefix + ".events.>"; }
  std::string submit_subject() const { return prefix + ".submit"; }
  std::string command_subject(std::string_view host) const { return prefix + ".cmd." + std::string(host); }
  std::string runs_bucket() const { return prefix + "_runs"; }
  std::string hosts_bucket() const { return prefix + "_hosts"; }
  std::string requests_bucket() const { return prefix + "_requests"; }
  std::string placement_consumer() const { return prefix + "_placement"; }

 private:
  std::string upper() const {
    std::string u = prefix;
    for (auto& ch : u)
      if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
    return u;
  }
};

}  // namespace mh::fleet
