#include "daemon/server/config.hpp"

#include <arpa/inet.h>
#include <grp.h>
#include <pwd.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "adapters/registry.hpp"
#include "protocol/line_cut.hpp"
#include "protocol/types.hpp"

template <>
struct mh::protocol::EnumNames<mh::daemon::Role> {  // Role's values are 0..3, in this order
  static constexpr std::array names = {std::string_view("none"), std::string_view("observe"),
                                       std::string_view("control"), std::string_view("admin")};
};

namespace mh::daemon {

std::string_view to_string(Role role) {
  return protocol::to_string(role);
}

namespace {

// The name and primary group of uid's user in the host's user database; nullopt without one.
struct UserEntry {
  std::string name;
  std::uint32_t gid = 0;
};
std::optional<UserEntry> user_entry(std::uint32_t uid) {
  long hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<std::size_t>(hint) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  int rc;
  while ((rc = ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found)) == ERANGE)
    buffer.resize(buffer.size() * 2);
  if (rc != 0 || !found) return std::nullopt;
  return UserEntry{entry.pw_name, entry.pw_gid};
}

}  // namespace

std::set<std::uint32_t> groups_of_user(std::uint32_t uid) {
  auto user = user_entry(uid);
  return user ? groups_of(uid, user->gid) : std::set<std::uint32_t>{};
}

std::set<std::uint32_t> groups_of(std::uint32_t uid, std::uint32_t gid) {
  std::set<std::uint32_t> out{gid};
  auto user = user_entry(uid);
  if (!user) return out;
  std::vector<gid_t> list(64);
  for (;;) {
    int n = static_cast<int>(list.size());
    if (::getgrouplist(user->name.c_str(), gid, list.data(), &n) >= 0) {
      out.insert(list.begin(), list.begin() + n);
      return out;
    }
    // n now holds how many there are.
    list.resize(std::max<std::size_t>(static_cast<std::size_t>(n), list.size() * 2));
  }
}

Role DaemonConfig::role_of(std::uint32_t uid, std::uint32_t gid) const {
  // The group database is asked only when a group grant could change the answer.
  bool any_group_grant = !observe.gids.empty() || !control.gids.empty() || !admin.gids.empty();
  return role_of(uid, any_group_grant ? groups_of(uid, gid) : std::set<std::uint32_t>{gid});
}

Role DaemonConfig::role_of(std::uint32_t uid, const std::set<std::uint32_t>& groups) const {
  auto granted = [&](const Grants& g) {
    if (g.uids.count(uid)) return true;
    for (auto gid : groups)
      if (g.gids.count(gid)) return true;
    return false;
  };
  // Root administers a system daemon whoever it runs as, as an operator expects; the daemon's own
  // user administers it too. Either can be switched off.
  if ((root_is_admin && uid == 0) || (owner_is_admin && uid == ::geteuid()) || granted(admin)) return Role::admin;
  if (granted(control)) return Role::control;
  if (granted(observe)) return Role::observe;
  return Role::none;
}

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// systemd may hand several directories (colon-separated); the first is ours.
std::filesystem::path first_of(const char* list) {
  std::string s(list);
  return std::filesystem::path(s.substr(0, s.find(':')));
}

// The host's name up to its first dot: the fleet's default host id.
std::string default_host_id() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  std::string host(name);
  return host.substr(0, host.find('.'));
}

}  // namespace

DaemonConfig default_config() {
  DaemonConfig c;
  c.vendor = adapters::host_config_from_environment();
  if (const char* runtime = env("RUNTIME_DIRECTORY"); runtime && env("STATE_DIRECTORY")) {
    c.socket = first_of(runtime) / "metaharness.sock";
    c.state_dir = first_of(env("STATE_DIRECTORY"));
    c.defaults_from = "systemd (RUNTIME_DIRECTORY, STATE_DIRECTORY)";
  } else if (const char* xdg_runtime = env("XDG_RUNTIME_DIR")) {
    c.socket = std::filesystem::path(xdg_runtime) / "metaharness" / "metaharness.sock";
    if (const char* xdg_state = env("XDG_STATE_HOME"))
      c.state_dir = std::filesystem::path(xdg_state) / "metaharness";
    else if (const char* home = env("HOME"))
      c.state_dir = std::filesystem::path(home) / ".local/state/metaharness";
    else
      c.state_dir = std::filesystem::absolute("metaharness-state");
    c.defaults_from = "the user's XDG directories";
  } else {
    c.socket = std::filesystem::absolute("metaharness-state/metaharness.sock");
    c.state_dir = std::filesystem::absolute("metaharness-state");
    c.defaults_from = "a local folder (./metaharness-state)";
  }
  return c;
}

std::filesystem::path client_socket_choice(const std::filesystem::path& own_default,
                                           const std::filesystem::path& system_socket) {
  std::error_code ec;
  if (std::filesystem::exists(own_default, ec)) return own_default;
  // The directory is world-visible even where the socket is not (0750): a peer outside the group
  // is then told it cannot reach the system socket, which is the truth, rather than about a
  // local folder it never meant.
  if (std::filesystem::is_directory(system_socket.parent_path(), ec)) return system_socket;
  return own_default;
}

std::filesystem::path default_socket_path() {
  if (const char* explicit_path = env("METAHARNESS_SOCKET")) return explicit_path;
  return client_socket_choice(default_config().socket, kSystemSocket);
}

namespace {

std::optional<std::uint32_t> gid_of(const std::string& name, std::string& problem) {
  long hint = ::sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<std::size_t>(hint) : 16384);
  group entry{};
  group* found = nullptr;
  int rc;
  while ((rc = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found)) == ERANGE)
    buffer.resize(buffer.size() * 2);
  if (rc != 0) {
    problem = "cannot look up the group \"" + name + "\": " + std::strerror(rc);
    return std::nullopt;
  }
  if (!found) {
    problem = "no group named \"" + name + "\" on this host";
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(entry.gr_gid);
}

// Applies one TOML table's keys through typed setters; anything else is an unknown key.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string prefix, std::string& error)
      : table_(table), prefix_(std::move(prefix)), error_(error) {}

  template <class T>
  void read(const char* key, T& target, std::function<std::string(const T&)> check = {}) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node || !error_.empty()) return;
    std::optional<T> value;
    if constexpr (std::is_same_v<T, bool>)
      value = node->value<bool>();
    else if constexpr (std::is_same_v<T, std::string>)
      value = node->value<std::string>();
    else if constexpr (std::is_integral_v<T>) {
      auto v = node->value<std::int64_t>();
      if (v && *v < 0) {
        fail(key, "must not be negative");
        return;
      }
      if (v) value = static_cast<T>(*v);
    }
    if (!value) {
      fail(key, std::string("must be ") + type_name<T>() + ", not " + describe(*node));
      return;
    }
    if (check) {
      std::string problem = check(*value);
      if (!problem.empty()) {
        fail(key, problem);
        return;
      }
    }
    target = *value;
  }

  // A key read elsewhere (a nested table): known, so finish() does not refuse it.
  void known_elsewhere(const char* key) { seen_.insert(key); }

  void read_ms(const char* key, std::chrono::milliseconds& target) {
    std::int64_t ms = target.count();
    read<std::int64_t>(key, ms);
    target = std::chrono::milliseconds(ms);
  }

  // Absolute paths, normalised.
  void read_paths(const char* key, std::vector<std::filesystem::path>& target) {
    read_array(key, "absolute paths", [&](const toml::node& element) -> std::string {
      auto path = element.value_exact<std::string>();
      if (!path || path->empty() || path->front() != '/')
        return "must hold absolute paths only; found " + describe(element);
      target.push_back(std::filesystem::path(*path).lexically_normal());
      return "";
    });
  }

  void read_ids(const char* key, std::set<std::uint32_t>& target) {
    read_array(key, "numeric ids", [&](const toml::node& element) -> std::string {
      auto id = element.value<std::int64_t>();
      if (!id || *id < 0 || *id > UINT32_MAX) return "must hold numeric uids/gids only; found " + describe(element);
      target.insert(static_cast<std::uint32_t>(*id));
      return "";
    });
  }

  // Group names, resolved now (getgrnam): an unknown name is refused here, at start, by name.
  void read_group_names(const char* key, std::set<std::uint32_t>& gids) {
    read_array(key, "group names", [&](const toml::node& element) -> std::string {
      auto name = element.value_exact<std::string>();
      if (!name || name->empty())
        return "must hold group names only (numeric gids go in the _gids keys); found " + describe(element);
      std::string problem;
      if (auto gid = gid_of(*name, problem)) gids.insert(*gid);
      return problem;
    });
  }

  // An array of non-empty strings (`each` may refuse one, saying why).
  void read_strings(const char* key, std::vector<std::string>& target,
                    const std::function<std::string(const std::string&)>& each) {
    read_array(key, "strings", [&](const toml::node& element) -> std::string {
      auto text = element.value_exact<std::string>();
      if (!text || text->empty()) return "must hold non-empty strings only; found " + describe(element);
      std::string problem = each(*text);
      if (problem.empty()) target.push_back(*text);
      return problem;
    });
  }

  void finish() {
    if (!error_.empty()) return;
    for (const auto& [key, node] : table_) {
      std::string k(key.str());
      if (!seen_.count(k)) {
        error_ = "unknown key " + prefix_ + k + " (known keys of [" + prefix_.substr(0, prefix_.size() - 1) +
                 "]: " + known() + ")";
        return;
      }
    }
  }

 private:
  void fail(const char* key, const std::string& why) {
    if (error_.empty()) error_ = prefix_ + key + ": " + why;
  }
  std::string known() const {
    std::string out;
    for (const auto& k : seen_)
      out += (out.empty() ? "" : ", ") + k;
    return out;
  }
  template <class T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, bool>)
      return "true or false";
    else if constexpr (std::is_same_v<T, std::string>)
      return "a string";
    else
      return "an integer";
  }
  // An array, each element of which `each` takes: "" when it took it, else why it is refused, which
  // refuses the key (the elements before it stay taken, but the load fails).
  using ReadElement = std::function<std::string(const toml::node&)>;
  void read_array(const char* key, const char* array_of, const ReadElement& each) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (!node || !error_.empty()) return;
    const toml::array* array = node->as_array();
    if (!array) {
      fail(key, std::string("must be an array of ") + array_of + ", not " + describe(*node));
      return;
    }
    for (const auto& element : *array) {
      if (std::string problem = each(element); !problem.empty()) {
        fail(key, problem);
        return;
      }
    }
  }

  static std::string describe(const toml::node& node) {
    std::ostringstream ss;
    ss << node.type();
    return ss.str();
  }

  const toml::table& table_;
  std::string prefix_;
  std::string& error_;
  std::set<std::string> seen_;
};

std::string positive_ms(const std::int64_t& v) {
  return v > 0 ? "" : "must be positive";
}

std::string describe_node(const toml::node& node) {
  std::ostringstream ss;
  ss << node.type();
  return ss.str();
}

// One budget table: the keys of adapters::Budgets, integers (usd a number), by the same rules as
// `--budget KEY=VALUE`. `daily` names the table that may nest.
std::string read_budget_table(const toml::table& t, const std::string& prefix, adapters::Budgets& out,
                              bool allow_daily) {
  for (const auto& [key, node] : t) {
    std::string k(key.str());
    if (allow_daily && k == "daily") continue;
    std::string text;
    if (auto i = node.value_exact<std::int64_t>())
      text = std::to_string(*i);
    else if (auto d = node.value_exact<double>(); d && k == "usd")
      text = std::to_string(*d);
    else
      return prefix + k + ": must be " + (k == "usd" ? "a number" : "an integer") + ", not " + describe_node(node);
    std::string problem;
    if (!adapters::set_budget(out, k, text, problem)) return prefix + k + ": " + problem;
  }
  return "";
}

std::string read_budgets(const toml::table& budgets, adapters::Budgets& defaults, adapters::Budgets& daily) {
  if (auto problem = read_budget_table(budgets, "budgets.", defaults, true); !problem.empty()) return problem;
  if (const toml::node* d = budgets.get("daily")) {
    const toml::table* t = d->as_table();
    if (!t) return "budgets.daily: must be a table ([budgets.daily])";
    if (auto problem = read_budget_table(*t, "budgets.daily.", daily, false); !problem.empty()) return problem;
    if (daily.turns || daily.tool_calls || daily.wall_ms)
      return "budgets.daily: only input_tokens, output_tokens and usd are metered per day";
  }
  return "";
}

// [prices."<model>"] tables: USD per million tokens, each kind optional (a kind with no price
// makes a usage of it unpriced, never free).
std::string read_prices(const toml::table& prices, PriceTable& out) {
  static const std::set<std::string> kKinds = {"input_per_mtok", "output_per_mtok", "cache_read_per_mtok",
                                               "cache_creation_per_mtok"};
  for (const auto& [model, node] : prices) {
    std::string m(model.str());
    const toml::table* t = node.as_table();
    if (!t) return "prices." + m + ": must be a table ([prices.\"" + m + "\"])";
    ModelPrice price;
    for (const auto& [key, value] : *t) {
      std::string k(key.str());
      if (!kKinds.count(k))
        return "unknown key prices." + m + "." + k +
               " (known: input_per_mtok, output_per_mtok, cache_read_per_mtok, cache_creation_per_mtok)";
      auto number = value.value<double>();
      if (!number || *number < 0)
        return "prices." + m + "." + k + ": must be a non-negative number, not " + describe_node(value);
      (k == "input_per_mtok"        ? price.input_per_mtok
       : k == "output_per_mtok"     ? price.output_per_mtok
       : k == "cache_read_per_mtok" ? price.cache_read_per_mtok
                                    : price.cache_creation_per_mtok) = *number;
    }
    out.set(m, price);
  }
  return "";
}

// --- [upstreams.NAME] and [vendor.upstream] ---------------------------------------------------

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

std::string read_upstreams(const toml::table& upstreams, std::map<std::string, UpstreamConfig>& out) {
  static const std::set<std::string> kWires = {"anthropic", "openai-responses"};
  for (const auto& [key, node] : upstreams) {
    std::string name(key.str());
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
    std::string credential, credential_name, ca_file;
    r.read<std::string>("wire", u.wire, [](const std::string& v) -> std::string {
      return kWires.count(v) ? "" : "must be \"anthropic\" or \"openai-responses\"";
    });
    r.read<std::string>("url", u.url, upstream_url_problem);
    r.read<std::string>("credential", credential, [](const std::string& v) -> std::string {
      return !v.empty() && v.front() == '/' ? "" : "must be an absolute path";
    });
    r.read<std::string>("credential_name", credential_name, [](const std::string& v) -> std::string {
      if (v.empty() || v.size() > 255 || v == "." || v == ".." || v.find('/') != std::string::npos ||
          v.find('\0') != std::string::npos)
        return "must be the name of a credential (no /), as LoadCredential= gives it";
      return "";
    });
    r.read<std::string>("ca_file", ca_file, [](const std::string& v) -> std::string {
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
    r.finish();
    if (!error.empty()) return error;
    if (!t->contains("wire")) return prefix + "wire: is required (\"anthropic\" or \"openai-responses\")";
    if (!t->contains("url")) return prefix + "url: is required";
    const bool by_file = t->contains("credential"), by_name = t->contains("credential_name");
    if (by_file == by_name)
      return prefix +
             "credential: give exactly one of credential (a file) and credential_name (systemd's "
             "LoadCredential=)";
    if (by_file) {
      u.credential = credential;
      u.credential_path = credential;
    } else {
      const char* dir = env("CREDENTIALS_DIRECTORY");
      if (!dir)
        return prefix + "credential_name: \"" + credential_name +
               "\" needs $CREDENTIALS_DIRECTORY, which is not set (the daemon is not a systemd unit with "
               "LoadCredential=" +
               credential_name + ":…)";
      u.credential_name = credential_name;
      u.credential_path = std::filesystem::path(dir) / credential_name;
    }
    // Read once at start (the daemon is root): a key that is not there fails the start, by name,
    // rather than every run of the upstream later.
    if (auto problem = readable_nonempty_file_problem(u.credential_path); !problem.empty())
      return prefix + (by_file ? "credential" : "credential_name") + ": the key " + problem;
    if (!ca_file.empty()) u.ca_file = ca_file;
    out.emplace(name, std::move(u));
  }
  return "";
}

// [vendor.upstream]: adapter = "NAME", each NAME an [upstreams.NAME].
std::string read_default_upstreams(const toml::table& vendor, const std::map<std::string, UpstreamConfig>& upstreams,
                                   std::map<std::string, std::string>& out) {
  static const std::set<std::string> kAdapters = {"claude", "codex", "opencode"};
  const toml::node* node = vendor.get("upstream");
  if (!node) return "";
  const toml::table* t = node->as_table();
  if (!t) return "vendor.upstream: must be a table ([vendor.upstream], adapter = \"UPSTREAM\")";
  for (const auto& [key, value] : *t) {
    std::string adapter(key.str());
    if (!kAdapters.count(adapter))
      return "unknown key vendor.upstream." + protocol::excerpt(adapter, 40) + " (known: claude, codex, opencode)";
    auto name = value.value_exact<std::string>();
    if (!name) return "vendor.upstream." + adapter + ": must be a string, the name of an [upstreams.NAME]";
    if (!upstreams.count(*name))
      return "vendor.upstream." + adapter + ": no [upstreams." + protocol::excerpt(*name, 64) + "] is configured";
    out[adapter] = *name;
  }
  return "";
}

}  // namespace

boost::system::result<DaemonConfig::HttpListen, std::string> parse_http_listen(std::string_view text) {
  using Result = boost::system::result<DaemonConfig::HttpListen, std::string>;
  auto refuse = [&](const std::string& why) {
    return Result(boost::system::in_place_error, "\"" + std::string(text) + "\" " + why +
                                                     " (give ADDRESS:PORT, e.g. \"127.0.0.1:9464\" or \"[::1]:9464\")");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return refuse("has no port");
  std::string_view host = text.substr(0, colon), port_text = text.substr(colon + 1);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  if (host.empty()) return refuse("names no address (nothing is listened on by default; say which)");
  const std::string address(host);
  unsigned char scratch[sizeof(in6_addr)];
  const bool v4 = !bracketed && ::inet_pton(AF_INET, address.c_str(), scratch) == 1;
  const bool v6 = bracketed && ::inet_pton(AF_INET6, address.c_str(), scratch) == 1;
  if (!v4 && !v6) {
    if (!bracketed && address.find(':') != std::string::npos)
      return refuse("is not ADDRESS:PORT (an IPv6 address goes in brackets)");
    return refuse("does not name an IP address (" + address + "; a host name is not resolved)");
  }
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(std::string(port_text)) > 65535)
    return refuse("has no port between 0 and 65535");
  return DaemonConfig::HttpListen{address, static_cast<std::uint16_t>(std::stoul(std::string(port_text)))};
}

boost::system::result<DaemonConfig, std::string> load_config(const std::optional<std::filesystem::path>& file) {
  using Result = boost::system::result<DaemonConfig, std::string>;
  DaemonConfig c = default_config();
  if (!file) return c;
  c.config_file = std::filesystem::absolute(*file);
  toml::table root;
  try {
    root = toml::parse_file(file->string());
  } catch (const toml::parse_error& e) {
    std::ostringstream ss;
    ss << "cannot read the config " << file->string() << " at line " << e.source().begin.line << ", column "
       << e.source().begin.column << ": " << e.description();
    return Result(boost::system::in_place_error, ss.str());
  }
  std::string error;
  static const std::set<std::string> kTables = {"paths",   "vendor", "runs", "server", "access",   "log",
                                                "budgets", "prices", "http", "fleet",  "upstreams"};
  for (const auto& [key, node] : root) {
    std::string k(key.str());
    if (!kTables.count(k))
      return Result(boost::system::in_place_error,
                    "unknown key " + k +
                        " (the config has the tables paths, vendor, runs, server, access, log, budgets, prices, http, "
                        "fleet, upstreams)");
    if (!node.is_table()) return Result(boost::system::in_place_error, k + ": must be a table ([" + k + "])");
  }
  auto table = [&](const char* name) -> const toml::table& {
    static const toml::table empty;
    const toml::table* t = root[name].as_table();
    return t ? *t : empty;
  };

  {
    TableReader r(table("paths"), "paths.", error);
    std::string socket = c.socket.string(), state = c.state_dir.string(), mode = "0660";
    r.read<std::string>("socket", socket, [](const std::string& s) { return s.empty() ? "must not be empty" : ""; });
    r.read<std::string>("state_dir", state, [](const std::string& s) { return s.empty() ? "must not be empty" : ""; });
    r.read<std::string>("socket_mode", mode, [](const std::string& s) {
      return s.size() >= 3 && s.size() <= 4 && s.find_first_not_of("01234567") == std::string::npos
                 ? ""
                 : "must be an octal mode such as \"0660\"";
    });
    r.finish();
    c.socket = socket;
    c.state_dir = state;
    if (error.empty()) c.socket_mode = static_cast<unsigned>(std::stoul(mode, nullptr, 8));
  }
  {
    TableReader r(table("vendor"), "vendor.", error);
    std::string dir = c.vendor.vendor_dir.string(), claude, codex, opencode, codex_hook;
    auto not_empty = [](const std::string& v) { return v.empty() ? "must not be empty" : ""; };
    r.read<std::string>("dir", dir, not_empty);
    r.read<std::string>("claude", claude);
    r.read<std::string>("codex", codex);
    r.read<std::string>("opencode", opencode);
    r.read<std::string>("codex_hook", codex_hook);
    r.known_elsewhere("upstream");  // [vendor.upstream], read with [upstreams] below
    r.finish();
    // A relative path in [vendor] is relative to the config file's directory, resolved here, at
    // start: the runs are spawned from other directories (bwrap binds what it is given, the
    // supervisor starts in the run's cwd), where a relative path named nothing (issue 24).
    const std::filesystem::path base = c.config_file->parent_path();
    auto from_config = [&](const std::string& value) {
      std::filesystem::path p(value);
      return p.is_absolute() ? p : (base / p).lexically_normal();
    };
    if (table("vendor").contains("dir")) c.vendor.vendor_dir = from_config(dir);
    if (!claude.empty()) c.vendor.binaries["claude"] = from_config(claude);
    if (!codex.empty()) c.vendor.binaries["codex"] = from_config(codex);
    if (!opencode.empty()) c.vendor.binaries["opencode"] = from_config(opencode);
    if (!codex_hook.empty()) c.vendor.binaries["codex-hook"] = from_config(codex_hook);
  }
  {
    TableReader r(table("runs"), "runs.", error);
    r.read<std::size_t>("max_active", c.max_active_runs,
                        [](const std::size_t& v) { return v > 0 ? "" : "must be at least 1"; });
    std::int64_t halt = c.halt_grace.count(), exit_grace = c.exit_grace.count(), shutdown = c.shutdown_grace.count(),
                 idle = c.idle_timeout.count();
    r.read<std::int64_t>("halt_grace_ms", halt, positive_ms);
    r.read<std::int64_t>("exit_grace_ms", exit_grace, positive_ms);
    r.read<std::int64_t>("shutdown_grace_ms", shutdown, positive_ms);
    r.read<std::int64_t>("idle_timeout_ms", idle);
    r.read<std::uint64_t>("decision_deadline_ms", c.decision_deadline_ms,
                          [](const std::uint64_t& v) { return v > 0 ? "" : "must be positive"; });
    r.read<bool>("fsync_each_event", c.fsync_each_event);
    r.read<std::size_t>("max_vendor_line_bytes", c.max_vendor_line_bytes,
                        [](const std::size_t& v) { return v >= 4096 ? "" : "must be at least 4096"; });
    r.read<std::size_t>("max_event_line_bytes", c.max_event_line_bytes, [](const std::size_t& v) -> std::string {
      if (v >= protocol::kMinEventLineBytes && v <= protocol::kMaxEventLineBytes) return "";
      return "must be between " + std::to_string(protocol::kMinEventLineBytes) + " and " +
             std::to_string(protocol::kMaxEventLineBytes) + " (the longest line every reader accepts)";
    });
    r.read<std::string>("cgroup_root", c.cgroup_root, [](const std::string& v) -> std::string {
      return v.empty() || v == "none" || v.front() == '/' ? "" : "must be \"none\" or an absolute path";
    });
    r.read<std::string>("sandbox", c.sandbox, [](const std::string& v) -> std::string {
      return v == "auto" || v == "bwrap" || v == "none" ? "" : "must be \"auto\", \"bwrap\" or \"none\"";
    });
    r.read<std::string>("user", c.run_user);
    r.read_paths("workspace_roots", c.workspace_roots);
    r.read_paths("sandbox_read_only", c.sandbox_read_only);
    std::uint64_t memory_max = 0, pids_max = 0, cpu_max = 0;
    // The bounds a run spec's own limits have (adapters::limit_bounds): one rule for both.
    auto a_limit = [](std::string_view key) {
      return [bounds = *adapters::limit_bounds(key)](const std::uint64_t& v) {
        return bounds.holds(v) ? std::string() : "must be " + bounds.text();
      };
    };
    r.read<std::uint64_t>("memory_max_bytes", memory_max, a_limit("memory_max_bytes"));
    r.read<std::uint64_t>("pids_max", pids_max, a_limit("pids_max"));
    r.read<std::uint64_t>("cpu_max_percent", cpu_max, a_limit("cpu_max_percent"));
    r.read<bool>("supervise", c.supervise);
    std::string supervisor_binary = c.supervisor.string();
    r.read<std::string>("supervisor", supervisor_binary, [](const std::string& v) -> std::string {
      return v.empty() || v.front() == '/' ? "" : "must be an absolute path";
    });
    c.supervisor = supervisor_binary;
    std::int64_t adopt_within = c.adopt_within.count();
    r.read<std::int64_t>("adopt_within_ms", adopt_within, positive_ms);
    c.adopt_within = std::chrono::milliseconds(adopt_within);
    r.read<std::string>("on_stop", c.on_stop, [](const std::string& v) -> std::string {
      return v == "halt" || v == "detach" ? "" : "must be \"halt\" or \"detach\"";
    });
    r.read<std::string>("network", c.network, [](const std::string& v) -> std::string {
      return v == "gateway" || v == "host" ? "" : "must be \"gateway\" or \"host\"";
    });
    if (memory_max) c.memory_max_bytes = memory_max;
    if (pids_max) c.pids_max = pids_max;
    if (cpu_max) c.cpu_max_percent = static_cast<std::uint32_t>(cpu_max);
    if (error.empty() && c.on_stop == "detach" && !c.supervise)
      error = "runs.on_stop = \"detach\" needs runs.supervise = true: a run that is the daemon's child dies with it";
    r.finish();
    c.halt_grace = std::chrono::milliseconds(halt);
    c.exit_grace = std::chrono::milliseconds(exit_grace);
    c.shutdown_grace = std::chrono::milliseconds(shutdown);
    c.idle_timeout = std::chrono::milliseconds(idle);
  }
  {
    TableReader r(table("server"), "server.", error);
    r.read<unsigned>("threads", c.threads, [](const unsigned& v) { return v <= 256 ? "" : "must be at most 256"; });
    r.read<std::size_t>("max_line_bytes", c.max_line_bytes,
                        [](const std::size_t& v) { return v >= 1024 ? "" : "must be at least 1024"; });
    r.read<std::size_t>("max_connections", c.max_connections,
                        [](const std::size_t& v) { return v > 0 ? "" : "must be at least 1"; });
    r.finish();
  }
  {
    TableReader r(table("access"), "access.", error);
    r.read_ids("observe_uids", c.observe.uids);
    r.read_ids("observe_gids", c.observe.gids);
    r.read_ids("control_uids", c.control.uids);
    r.read_ids("control_gids", c.control.gids);
    r.read_ids("admin_uids", c.admin.uids);
    r.read_ids("admin_gids", c.admin.gids);
    r.read_group_names("observe_groups", c.observe.gids);
    r.read_group_names("control_groups", c.control.gids);
    r.read_group_names("admin_groups", c.admin.gids);
    r.read<bool>("owner_is_admin", c.owner_is_admin);
    r.read<bool>("root_is_admin", c.root_is_admin);
    r.finish();
  }
  {
    TableReader r(table("log"), "log.", error);
    std::string level = "info";
    static const std::map<std::string, int> kLevels = {{"error", 3}, {"warning", 4}, {"info", 6}, {"debug", 7}};
    r.read<std::string>("level", level, [](const std::string& v) {
      return kLevels.count(v) ? "" : "must be one of error, warning, info, debug";
    });
    r.finish();
    if (error.empty()) c.log_level = kLevels.at(level);
  }
  {
    TableReader r(table("http"), "http.", error);
    std::optional<std::string> listen;
    std::string text;
    r.read<std::string>("listen", text, [&listen](const std::string& v) -> std::string {
      auto parsed = parse_http_listen(v);
      if (!parsed) return parsed.error();
      listen = v;
      return "";
    });
    r.finish();
    if (error.empty() && listen) c.http_listen = *parse_http_listen(*listen);
  }
  if (error.empty() && root["fleet"].as_table()) {
    TableReader r(table("fleet"), "fleet.", error);
    fleet::FleetConfig f;
    f.host_id = default_host_id();
    r.read_strings("nats_urls", f.nats_urls, [](const std::string& url) -> std::string {
      return url.rfind("nats://", 0) == 0 || url.rfind("tls://", 0) == 0
                 ? ""
                 : "must hold nats:// or tls:// URLs; found " + url;
    });
    bool host_given = table("fleet").contains("host_id");
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
    r.finish();
    if (error.empty() && f.nats_urls.empty()) error = "fleet.nats_urls: must name at least one NATS server";
    if (error.empty() && !f.nkey.empty() && f.credentials.empty())
      error = "fleet.nkey: is the public key of the seed in fleet.credentials, which is not set";
    // NATS that asks nobody who connects lets anything reaching it act as a host: a run's own
    // tool calls can (runs share the host's network) submit a spec for any uid, read every run's
    // events, forge decisions and halts. Refused unless said in as many words, for loopback tests.
    if (error.empty() && f.credentials.empty() && !f.insecure_no_credentials)
      error =
          "fleet.credentials: not set; a fleet without NATS credentials lets anything that reaches its NATS servers "
          "(a run's own tool calls among them) submit runs as any uid, read every run's events and forge commands "
          "and halts. Set fleet.credentials (docs/fleet.md, Trust), or fleet.insecure_no_credentials = true for "
          "a test cluster on loopback only";
    if (error.empty() && f.insecure_no_credentials && !f.credentials.empty())
      error = "fleet.insecure_no_credentials: true, but fleet.credentials is set too; drop one of the two";
    if (error.empty() && f.insecure_no_credentials)
      for (const auto& url : f.nats_urls)
        if (!fleet::url_is_loopback(url)) {
          error =
              "fleet.insecure_no_credentials: only for NATS servers on loopback (127.0.0.0/8, [::1], localhost), "
              "for tests; " +
              url + " is not: set fleet.credentials";
          break;
        }
    if (error.empty() && !host_given && !fleet::host_id_problem(f.host_id).empty())
      error = "fleet.host_id: the hostname \"" + protocol::excerpt(f.host_id, 64) + "\" cannot be a host id (" +
              fleet::host_id_problem(f.host_id) + "); set fleet.host_id";
    if (error.empty()) c.fleet = std::move(f);
  }
  if (error.empty()) error = read_upstreams(table("upstreams"), c.upstreams);
  if (error.empty()) error = read_default_upstreams(table("vendor"), c.upstreams, c.default_upstream);
  if (error.empty()) error = read_budgets(table("budgets"), c.default_budget, c.daily_budget);
  if (error.empty()) error = read_prices(table("prices"), c.prices);
  if (!error.empty()) return Result(boost::system::in_place_error, error);
  return c;
}

}  // namespace mh::daemon
