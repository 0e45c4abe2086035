// [upstreams.NAME]: where a run's model gateway forwards, and the key it adds (docs/gateway.md);
// [vendor.upstream]: the upstream each adapter's runs use when the spec names none.
#include <arpa/inet.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "adapters/vendor_descriptor.hpp"
#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"
#include "protocol/types.hpp"

namespace mh::daemon::config_tables {

namespace {

bool upstream_name_ok(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') return false;
  return true;
}

// A host a plain-http upstream may have: the key then never leaves the machine in clear.
bool loopback_host(std::string host) {
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned char a[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, host.c_str(), a) == 1) return a[0] == 127;
  if (::inet_pton(AF_INET6, host.c_str(), a) == 1) return host == "::1" || std::memcmp(a, &in6addr_loopback, 16) == 0;
  return false;
}

// "" when `url` is one an upstream may have, else why not.
std::string upstream_url_problem(const std::string& url) {
  if (url.size() > 2048) return "is longer than 2048 characters";
  for (char ch : url)
    if (static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f) return "holds a space or a control character";
  std::string_view rest;
  bool https = false;
  if (url.rfind("https://", 0) == 0) {
    https = true;
    rest = std::string_view(url).substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = std::string_view(url).substr(7);
  } else {
    return "must be an https:// URL (or http:// on a loopback host)";
  }
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.find('@') != std::string_view::npos)
    return "must not carry a user or password (the key goes in credential)";
  std::string_view host = authority;
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    if (close == std::string_view::npos) return "has an unclosed [ in its host";
    std::string_view after = host.substr(close + 1);
    if (!after.empty() && after.front() != ':') return "has something after its IPv6 host that is not a port";
    if (!after.empty()) {
      std::string_view port = after.substr(1);
      if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
          std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535)
        return "has no port between 1 and 65535";
    }
    host = host.substr(0, close + 1);
  } else if (auto colon = host.rfind(':'); colon != std::string_view::npos) {
    std::string_view port = host.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535)
      return "has no port between 1 and 65535";
    host = host.substr(0, colon);
  }
  if (host.empty() || host == "[]") return "names no host";
  if (!https && !loopback_host(std::string(host)))
    return "is http:// to " + std::string(host) +
           ", which is not a loopback host: the key would cross the network in clear (use https://)";
  return "";
}

// "" when `path` names a regular file this process can read and that holds something.
std::string readable_nonempty_file_problem(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot be read (" + path.string() + ": " + std::strerror(errno) + ")";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "is not a regular file (" + path.string() + ")";
  char ch;
  bool any = false;
  while (in.get(ch))
    if (!std::isspace(static_cast<unsigned char>(ch))) {
      any = true;
      break;
    }
  if (!any) return "is empty (" + path.string() + ")";
  return "";
}

// The keys of one [upstreams.NAME], each on its own rule; the credential's two keys are left in
// `credential` and `credential_name` for upstream_credential.
struct UpstreamKeys {
  std::string credential, credential_name, ca_file;
};
void read_upstream_keys(TableReader& r, UpstreamConfig& u, UpstreamKeys& k) {
  static const std::set<std::string> kWires = {"anthropic", "openai-responses", "gemini"};
  r.read<std::string>("wire", u.wire, [](const std::string& v) -> std::string {
    return kWires.count(v) ? "" : "must be \"anthropic\", \"openai-responses\" or \"gemini\"";
  });
  r.read<std::string>("url", u.url, upstream_url_problem);
  r.read<std::string>("credential", k.credential, [](const std::string& v) -> std::string {
    return !v.empty() && v.front() == '/' ? "" : "must be an absolute path";
  });
  r.read<std::string>("credential_name", k.credential_name, [](const std::string& v) -> std::string {
    if (v.empty() || v.size() > 255 || v == "." || v == ".." || v.find('/') != std::string::npos ||
        v.find('\0') != std::string::npos)
      return "must be the name of a credential (no /), as LoadCredential= gives it";
    return "";
  });
  r.read<std::string>("ca_file", k.ca_file, [](const std::string& v) -> std::string {
    if (v.empty() || v.front() != '/') return "must be an absolute path";
    return readable_nonempty_file_problem(v);
  });
  r.read<std::string>("header", u.header, [](const std::string& v) -> std::string {
    if (v.empty() || v.size() > 64) return "must be 1 to 64 characters";
    for (char ch : v)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_')
        return "must be a header name (A-Z, a-z, 0-9, - and _)";
    return "";
  });
}

// Where the upstream's key is: exactly one of credential (a file) and credential_name (systemd's
// $CREDENTIALS_DIRECTORY/<name>), read once at start (the daemon is root): a key that is not there
// fails the start, by name, rather than every run of the upstream later.
std::string upstream_credential(const toml::table& t, const std::string& prefix, const UpstreamKeys& k,
                                UpstreamConfig& u) {
  const bool by_file = t.contains("credential"), by_name = t.contains("credential_name");
  if (by_file == by_name)
    return prefix +
           "credential: give exactly one of credential (a file) and credential_name (systemd's "
           "LoadCredential=)";
  if (by_file) {
    u.credential = k.credential;
    u.credential_path = k.credential;
  } else {
    const char* dir = env("CREDENTIALS_DIRECTORY");
    if (!dir)
      return prefix + "credential_name: \"" + k.credential_name +
             "\" needs $CREDENTIALS_DIRECTORY, which is not set (the daemon is not a systemd unit with "
             "LoadCredential=" +
             k.credential_name + ":…)";
    u.credential_name = k.credential_name;
    u.credential_path = std::filesystem::path(dir) / k.credential_name;
  }
  if (auto problem = readable_nonempty_file_problem(u.credential_path); !problem.empty())
    return prefix + (by_file ? "credential" : "credential_name") + ": the key " + problem;
  return "";
}

// One [upstreams.NAME] into `out`; "" or the refusal.
std::string read_upstream(const std::string& name, const toml::node& node, std::map<std::string, UpstreamConfig>& out) {
  const std::string prefix = "upstreams." + name + ".";
  if (!upstream_name_ok(name))
    return "upstreams." + protocol::excerpt(name, 64) +
           ": an upstream's name must be 1 to 64 characters of A-Z, a-z, 0-9, - and _";
  const toml::table* t = node.as_table();
  if (!t) return "upstreams." + name + ": must be a table ([upstreams." + name + "])";
  std::string error;
  TableReader r(*t, prefix, error);
  UpstreamConfig u;
  u.name = name;
  UpstreamKeys keys;
  read_upstream_keys(r, u, keys);
  r.finish();
  if (!error.empty()) return error;
  if (!t->contains("wire")) return prefix + "wire: is required (\"anthropic\", \"openai-responses\" or \"gemini\")";
  if (!t->contains("url")) return prefix + "url: is required";
  if (auto problem = upstream_credential(*t, prefix, keys, u); !problem.empty()) return problem;
  if (!keys.ca_file.empty()) u.ca_file = keys.ca_file;
  out.emplace(name, std::move(u));
  return "";
}

}  // namespace

std::string read_upstreams_table(const toml::table& upstreams, DaemonConfig& c) {
  for (const auto& [key, node] : upstreams)
    if (auto problem = read_upstream(std::string(key.str()), node, c.upstreams); !problem.empty()) return problem;
  return "";
}

// [vendor.upstream]: adapter = "NAME", each NAME an [upstreams.NAME].
std::string read_vendor_upstream_table(const toml::table& vendor, DaemonConfig& c) {
  const toml::node* node = vendor.get("upstream");
  if (!node) return "";
  const toml::table* t = node->as_table();
  if (!t) return "vendor.upstream: must be a table ([vendor.upstream], adapter = \"UPSTREAM\")";
  for (const auto& [key, value] : *t) {
    std::string adapter(key.str());
    if (!adapters::find_vendor(adapter)) {
      std::string known;
      for (const auto* vendor : adapters::vendor_descriptors())
        known += (known.empty() ? "" : ", ") + std::string(vendor->id);
      return "unknown key vendor.upstream." + protocol::excerpt(adapter, 40) + " (known: " + known + ")";
    }
    auto name = value.value_exact<std::string>();
    if (!name) return "vendor.upstream." + adapter + ": must be a string, the name of an [upstreams.NAME]";
    if (!c.upstreams.count(*name))
      return "vendor.upstream." + adapter + ": no [upstreams." + protocol::excerpt(*name, 64) + "] is configured";
    c.default_upstream[adapter] = *name;
  }
  return "";
}

}  // namespace mh::daemon::config_tables
