// [fleet]: hosts joined through NATS JetStream (docs/fleet.md). Read only when the file has the
// table: without it, one host, and no NATS code path runs at all.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"
#include "protocol/types.hpp"

namespace mh::daemon::config_tables {

namespace {

// The host's name up to its first dot: the fleet's default host id.
std::string default_host_id() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  std::string host(name);
  return host.substr(0, host.find('.'));
}

// Each key on its own rule.
void read_fleet_keys(TableReader& r, fleet::FleetConfig& f) {
  r.read_strings("nats_urls", f.nats_urls, [](const std::string& url) -> std::string {
    return url.rfind("nats://", 0) == 0 || url.rfind("tls://", 0) == 0
               ? ""
               : "must hold nats:// or tls:// URLs; found " + url;
  });
  r.read<std::string>("host_id", f.host_id, [](const std::string& v) { return fleet::host_id_problem(v); });
  std::string credentials;
  r.read<std::string>("credentials", credentials, [](const std::string& v) -> std::string {
    if (v.empty() || v.front() != '/') return "must be an absolute path";
    std::error_code ec;
    return std::filesystem::is_regular_file(v, ec) ? "" : "names no readable file (" + v + ")";
  });
  f.credentials = credentials;
  // An NKey user's public key: "U" and 55 more base32 characters (nkeys' encoding).
  r.read<std::string>("nkey", f.nkey, [](const std::string& v) -> std::string {
    return fleet::is_nkey(v, fleet::NkeyKind::user_public_key)
               ? ""
               : "must be an NKey user's public key (U and 55 base32 characters)";
  });
  r.read<bool>("insecure_no_credentials", f.insecure_no_credentials);
  r.read<bool>("serial_publish", f.serial_publish);
  std::int64_t batch = f.publish_batch_lines;
  r.read<std::int64_t>("publish_batch_lines", batch,
                       [](const std::int64_t& v) { return v >= 1 && v <= 1000 ? "" : "must be between 1 and 1000"; });
  f.publish_batch_lines = static_cast<int>(batch);
  std::int64_t replicas = f.replicas;
  r.read<std::int64_t>("replicas", replicas,
                       [](const std::int64_t& v) { return v >= 1 && v <= 5 ? "" : "must be between 1 and 5"; });
  f.replicas = static_cast<int>(replicas);
  std::int64_t ttl = f.lease_ttl.count();
  r.read<std::int64_t>("lease_ttl_ms", ttl, [](const std::int64_t& v) {
    return v >= 1000 && v <= 600000 ? "" : "must be between 1000 and 600000";
  });
  f.lease_ttl = std::chrono::milliseconds(ttl);
  std::int64_t timeout = f.request_timeout.count();
  r.read<std::int64_t>("request_timeout_ms", timeout, [](const std::int64_t& v) {
    return v >= 100 && v <= 600000 ? "" : "must be between 100 and 600000";
  });
  f.request_timeout = std::chrono::milliseconds(timeout);
  r.read<std::string>("prefix", f.prefix, [](const std::string& v) -> std::string {
    if (v.empty() || v.size() > 16) return "must be 1 to 16 characters";
    for (char ch : v)
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) return "must hold only a-z and 0-9";
    return "";
  });
}

// What the keys mean together: "" when the fleet may start, else the first reason it may not.
std::string fleet_problem(const fleet::FleetConfig& f, bool host_given) {
  if (f.nats_urls.empty()) return "fleet.nats_urls: must name at least one NATS server";
  if (!f.nkey.empty() && f.credentials.empty())
    return "fleet.nkey: is the public key of the seed in fleet.credentials, which is not set";
  // NATS that asks nobody who connects lets anything reaching it act as a host: a run's own
  // tool calls can (runs share the host's network) submit a spec for any uid, read every run's
  // events, forge decisions and halts. Refused unless said in as many words, for loopback tests.
  if (f.credentials.empty() && !f.insecure_no_credentials)
    return "fleet.credentials: not set; a fleet without NATS credentials lets anything that reaches its NATS "
           "servers (a run's own tool calls among them) submit runs as any uid, read every run's events and forge "
           "commands and halts. Set fleet.credentials (docs/fleet.md, Trust), or fleet.insecure_no_credentials = "
           "true for a test cluster on loopback only";
  if (f.insecure_no_credentials && !f.credentials.empty())
    return "fleet.insecure_no_credentials: true, but fleet.credentials is set too; drop one of the two";
  if (f.insecure_no_credentials)
    for (const auto& url : f.nats_urls)
      if (!fleet::url_is_loopback(url))
        return "fleet.insecure_no_credentials: only for NATS servers on loopback (127.0.0.0/8, [::1], localhost), "
               "for tests; " +
               url + " is not: set fleet.credentials";
  if (!host_given && !fleet::host_id_problem(f.host_id).empty())
    return "fleet.host_id: the hostname \"" + protocol::excerpt(f.host_id, 64) + "\" cannot be a host id (" +
           fleet::host_id_problem(f.host_id) + "); set fleet.host_id";
  return "";
}

}  // namespace

std::string read_fleet_table(const toml::table& fleet, DaemonConfig& c) {
  std::string error;
  TableReader r(fleet, "fleet.", error);
  fleet::FleetConfig f;
  f.host_id = default_host_id();
  const bool host_given = fleet.contains("host_id");
  read_fleet_keys(r, f);
  r.finish();
  if (error.empty()) error = fleet_problem(f, host_given);
  if (error.empty()) c.fleet = std::move(f);
  return error;
}

}  // namespace mh::daemon::config_tables
