// SupervisorSpec <-> JSON. Strict on the way in: the supervisor acts on every field (it spawns a
// program as a user into a cgroup), so a field that is missing or mistyped is refused by name,
// never defaulted. Unknown keys are ignored (a newer daemon may say more).
#include "daemon/supervisor/supervisor_spec.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cctype>
#include <fstream>
#include <iterator>

#include "protocol/json.hpp"

namespace mh::supervisor {

namespace json = boost::json;
using protocol::FieldReader;

namespace {

constexpr std::size_t kMaxSpecBytes = 16u << 20;
constexpr std::size_t kMaxSocketPathBytes = 107;

json::value path_or_null(const std::optional<fs::path>& path) {
  return path ? json::value(path->string()) : json::value(nullptr);
}

// An absolute path field (every path the supervisor opens is the daemon's, never relative to
// wherever the supervisor happens to run).
fs::path read_path(FieldReader& f, std::string_view key) {
  std::string text = f.req_string(key);
  if (f.ok() && (text.empty() || text.front() != '/'))
    f.fail("field \"" + std::string(key) + "\" is \"" + protocol::excerpt(text, 80) + "\", expected an absolute path");
  return text;
}

std::uint32_t read_u32(FieldReader& f, const json::object& o, std::string_view key) {
  FieldReader inner(o, std::string());
  std::uint32_t v = inner.req_u32(key);
  if (!inner.ok()) f.fail(inner.error());
  return v;
}

// An absolute path field that may be null (or absent).
std::optional<fs::path> read_opt_path(FieldReader& f, std::string_view key) {
  if (!f.ok() || !f.opt_string(key)) return std::nullopt;
  return read_path(f, key);
}

json::value listen_to_json(const SpecListen& listen) {
  return json::object{{"path", path_or_null(listen.path)},
                      {"tcp_port", listen.tcp_port ? json::value(*listen.tcp_port) : json::value(nullptr)}};
}

// Exactly one of a socket path and a port on the host's loopback.
SpecListen read_listen(FieldReader& outer, const std::string& context) {
  SpecListen listen;
  const json::object* object = outer.req_object("listen");
  if (!object) return listen;
  FieldReader f(*object, context + ": listen");
  listen.path = read_opt_path(f, "path");
  if (f.ok()) {
    if (auto port = f.opt_u64("tcp_port")) {
      if (*port == 0 || *port > 65535)
        f.fail("field \"tcp_port\" is " + std::to_string(*port) + ", expected a port (1..65535)");
      else
        listen.tcp_port = static_cast<std::uint16_t>(*port);
    }
  }
  if (f.ok() && bool(listen.path) == bool(listen.tcp_port)) f.fail("expected exactly one of \"path\" and \"tcp_port\"");
  if (!f.ok()) outer.fail(f.error());
  return listen;
}

constexpr std::size_t kMaxEgressEntries = 4096;
constexpr std::size_t kMaxEgressEntryBytes = 300;  // a DNS name is at most 253, then ":port"

// "host:port": a non-empty host (an IPv6 literal in brackets) and a port 1..65535.
bool egress_entry_ok(std::string_view entry) {
  if (entry.size() > kMaxEgressEntryBytes) return false;
  std::size_t colon = entry.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == entry.size() || colon + 6 < entry.size())
    return false;
  std::string_view host = entry.substr(0, colon), port = entry.substr(colon + 1);
  if (host.front() == '[' ? host.back() != ']' || host.size() < 3 : host.find(':') != std::string_view::npos)
    return false;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value >= 1 && value <= 65535;
}

json::value gateway_to_json(const SpecGateway& g) {
  return json::object{{"upstream_name", g.upstream_name},
                      {"wire", g.wire},
                      {"url", g.url},
                      {"credential", path_or_null(g.credential)},
                      {"ca_file", path_or_null(g.ca_file)},
                      {"header", g.header},
                      {"scenario", path_or_null(g.scenario)},
                      {"scenario_log", path_or_null(g.scenario_log)},
                      {"token", g.token},
                      {"reserve", g.reserve},
                      {"listen", listen_to_json(g.listen)}};
}

SpecGateway read_gateway(FieldReader& outer, const json::object& object) {
  FieldReader f(object, "spec: gateway");
  SpecGateway g;
  g.upstream_name = f.req_string("upstream_name");
  g.wire = f.req_string("wire");
  if (f.ok() && g.wire != "anthropic" && g.wire != "openai-responses" && g.wire != "gemini")
    f.fail("field \"wire\" is \"" + protocol::excerpt(g.wire, 80) +
           "\", expected anthropic, openai-responses or gemini");
  g.url = f.req_string("url");
  g.credential = read_opt_path(f, "credential");
  g.ca_file = read_opt_path(f, "ca_file");
  g.header = f.req_string("header");
  g.scenario = read_opt_path(f, "scenario");
  g.scenario_log = read_opt_path(f, "scenario_log");
  g.token = f.req_string("token");
  g.reserve = f.req_bool("reserve");
  if (f.ok()) g.listen = read_listen(f, "spec: gateway");
  // The upstream is either the supervisor's own scripted endpoint (a scenario, recorded in its
  // log) or a URL: never both, never neither. A URL without a credential is the gateway's to
  // refuse when it is built (the run's spawn error, by name), not a spec that cannot be read.
  if (f.ok() && g.token.empty()) f.fail("field \"token\" is empty");
  if (f.ok() && g.scenario && !g.url.empty()) f.fail("fields \"scenario\" and \"url\" are both set");
  if (f.ok() && g.scenario && !g.scenario_log) f.fail("field \"scenario\" is set without \"scenario_log\"");
  if (f.ok() && !g.scenario && g.url.empty()) f.fail("neither \"url\" nor \"scenario\" is set");
  if (!f.ok()) outer.fail(f.error());
  return g;
}

SpecEgress read_egress(FieldReader& outer, const json::object& object) {
  FieldReader f(object, "spec: egress");
  SpecEgress e;
  if (const json::array* allowed = f.req_array("allowed")) {
    if (allowed->size() > kMaxEgressEntries)
      f.fail("field \"allowed\" holds " + std::to_string(allowed->size()) + " entries, over the bound of " +
             std::to_string(kMaxEgressEntries));
    for (const json::value& entry : *allowed) {
      if (!f.ok()) break;
      if (!entry.is_string() || !egress_entry_ok(entry.get_string()))
        f.fail("an entry of \"allowed\" is " + protocol::describe_json(entry) + ", expected \"host:port\"");
      else
        e.allowed.emplace_back(entry.get_string());
    }
  }
  if (f.ok()) e.listen = read_listen(f, "spec: egress");
  if (!f.ok()) outer.fail(f.error());
  return e;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> record_secrets(
    const std::optional<SpecGateway>& gateway, const std::vector<std::pair<std::string, std::string>>& vendor_env,
    const std::set<std::string>& secret_names) {
  std::vector<std::pair<std::string, std::string>> out;
  if (gateway) {
    if (gateway->credential) {
      std::ifstream in(*gateway->credential, std::ios::binary);
      std::string key((std::istreambuf_iterator<char>(in)), {});
      while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back())))
        key.pop_back();
      if (!key.empty())
        out.emplace_back(
            gateway->upstream_name.empty() ? std::string("model_endpoint.token") : "upstream." + gateway->upstream_name,
            std::move(key));
    }
    if (!gateway->token.empty()) out.emplace_back("gateway.token", gateway->token);
  }
  for (const auto& [name, value] : vendor_env)
    if (secret_names.count(name) && !value.empty()) out.emplace_back(name, value);
  return out;
}

std::vector<std::pair<std::string, std::string>> record_secrets(const SupervisorSpec& spec) {
  // A sandboxed run's vendor environment is handed over apart from the hops' fixed one.
  return record_secrets(spec.gateway, spec.vendor_env ? *spec.vendor_env : spec.env, spec.secret_env);
}

json::value spec_to_json(const SupervisorSpec& spec) {
  json::array args;
  for (const auto& arg : spec.args)
    args.emplace_back(arg);
  auto pairs = [](const std::vector<std::pair<std::string, std::string>>& entries) {
    json::array out;
    for (const auto& [name, value] : entries)
      out.emplace_back(json::array{json::value(name), json::value(value)});
    return out;
  };
  json::array env = pairs(spec.env);
  json::value vendor_env = nullptr;
  if (spec.vendor_env) vendor_env = pairs(*spec.vendor_env);
  json::value identity = nullptr;
  if (spec.identity) identity = json::object{{"uid", spec.identity->uid}, {"gid", spec.identity->gid}};
  json::value run_user = nullptr;
  if (spec.run_user) run_user = json::object{{"uid", spec.run_user->uid}, {"gid", spec.run_user->gid}};
  json::value hook = nullptr;
  if (spec.hook_channel)
    hook = json::object{{"address", spec.hook_channel->address},
                        {"uid", spec.hook_channel->uid},
                        {"marker", spec.hook_channel->marker}};
  json::value gateway = nullptr;
  if (spec.gateway) gateway = gateway_to_json(*spec.gateway);
  json::value egress = nullptr;
  if (spec.egress) {
    json::array allowed;
    for (const auto& entry : spec.egress->allowed)
      allowed.emplace_back(entry);
    egress = json::object{{"allowed", std::move(allowed)}, {"listen", listen_to_json(spec.egress->listen)}};
  }
  return json::object{
      {"protocol", spec.protocol},
      {"run_id", spec.run_id},
      {"socket", spec.socket.string()},
      {"program", spec.program.string()},
      {"args", std::move(args)},
      {"env", std::move(env)},
      {"vendor_env", std::move(vendor_env)},
      {"cwd", spec.cwd.string()},
      {"transcript", spec.transcript.string()},
      {"stderr", spec.stderr_log.string()},
      {"stdin_log", spec.stdin_log.string()},
      {"cgroup", path_or_null(spec.cgroup)},
      {"identity", std::move(identity)},
      {"run_user", std::move(run_user)},
      {"hook_channel", std::move(hook)},
      {"gateway", std::move(gateway)},
      {"egress", std::move(egress)},
      {"secret_env", json::array(spec.secret_env.begin(), spec.secret_env.end())},
      {"adopt_within_ms", spec.adopt_within_ms},
      {"ungoverned_halt_after_ms",
       spec.ungoverned_halt_after_ms ? json::value(*spec.ungoverned_halt_after_ms) : json::value(nullptr)}};
}

boost::system::result<SupervisorSpec, std::string> spec_from_json(const json::value& value) {
  if (!value.is_object()) return "the spec is " + protocol::describe_json(value) + ", expected an object";
  FieldReader f(value.get_object(), "spec");
  SupervisorSpec spec;
  spec.protocol = f.req_u32("protocol");
  if (f.ok() && spec.protocol != 1)
    f.fail("field \"protocol\" is " + std::to_string(spec.protocol) + ", this supervisor reads spec 1");
  spec.run_id = f.req_string("run_id");
  if (f.ok() && spec.run_id.empty()) f.fail("field \"run_id\" is empty");
  spec.socket = read_path(f, "socket");
  spec.program = read_path(f, "program");
  if (f.req_array("args")) spec.args = f.strings_or_empty("args");
  auto read_pairs = [&](const json::array& entries, std::string_view key,
                        std::vector<std::pair<std::string, std::string>>& out) {
    for (const json::value& entry : entries) {
      const json::array* pair = entry.if_array();
      if (!pair || pair->size() != 2 || !(*pair)[0].is_string() || !(*pair)[1].is_string()) {
        f.fail("an entry of \"" + std::string(key) + "\" is " + protocol::describe_json(entry) +
               ", expected [name, value]");
        break;
      }
      out.emplace_back(std::string((*pair)[0].get_string()), std::string((*pair)[1].get_string()));
    }
  };
  if (const json::array* env = f.req_array("env")) read_pairs(*env, "env", spec.env);
  // Absent or null: the plan hands nothing over (it is not sandboxed).
  if (const json::value* vendor_env = value.get_object().if_contains("vendor_env");
      f.ok() && vendor_env && !vendor_env->is_null()) {
    if (!vendor_env->is_array())
      f.fail("field \"vendor_env\" is " + protocol::describe_json(*vendor_env) + ", expected an array or null");
    else
      read_pairs(vendor_env->get_array(), "vendor_env", spec.vendor_env.emplace());
  }
  spec.cwd = read_path(f, "cwd");
  spec.transcript = read_path(f, "transcript");
  spec.stderr_log = read_path(f, "stderr");
  spec.stdin_log = read_path(f, "stdin_log");
  if (f.ok() && f.opt_string("cgroup")) spec.cgroup = read_path(f, "cgroup");
  if (const json::object* identity = f.opt_object("identity"))
    spec.identity = SpecIdentity{read_u32(f, *identity, "uid"), read_u32(f, *identity, "gid")};
  // Absent (an older daemon) or null: the run is `identity`, or the supervisor's user.
  if (f.ok())
    if (const json::object* run_user = f.opt_object("run_user"))
      spec.run_user = SpecIdentity{read_u32(f, *run_user, "uid"), read_u32(f, *run_user, "gid")};
  if (const json::object* hook = f.opt_object("hook_channel")) {
    FieldReader h(*hook, "spec: hook_channel");
    SpecHookChannel channel{h.req_string("address"), h.req_u32("uid"), h.req_string("marker")};
    // An abstract name, or a path socket (a run with a network namespace of its own: abstract
    // sockets are per namespace).
    if (h.ok() && (channel.address.size() < 2 || (channel.address.front() != '@' && channel.address.front() != '/')))
      h.fail("field \"address\" is \"" + protocol::excerpt(channel.address, 80) +
             "\", expected @<abstract name> or an absolute path");
    if (h.ok() && (channel.marker.find('=') == std::string::npos || channel.marker.front() == '='))
      h.fail("field \"marker\" is \"" + protocol::excerpt(channel.marker, 80) + "\", expected NAME=VALUE");
    if (!h.ok()) f.fail(h.error());
    spec.hook_channel = std::move(channel);
  }
  // Absent or null: the run has no gateway (no egress proxy).
  if (f.ok())
    if (const json::object* gateway = f.opt_object("gateway")) spec.gateway = read_gateway(f, *gateway);
  if (f.ok())
    if (const json::object* egress = f.opt_object("egress")) spec.egress = read_egress(f, *egress);
  // Absent: an older daemon's spec (nothing of the vendor environment is marked secret).
  if (const json::value* names = value.get_object().if_contains("secret_env"); f.ok() && names) {
    const json::array* list = names->if_array();
    if (!list) f.fail("field \"secret_env\" is " + protocol::describe_json(*names) + ", expected an array");
    for (std::size_t i = 0; list && i < list->size() && f.ok(); ++i) {
      if (!(*list)[i].is_string())
        f.fail("an entry of \"secret_env\" is " + protocol::describe_json((*list)[i]) + ", expected a string");
      else
        spec.secret_env.emplace((*list)[i].get_string());
    }
  }
  spec.adopt_within_ms = f.req_u64("adopt_within_ms");
  if (const json::value* halt = value.get_object().if_contains("ungoverned_halt_after_ms");
      f.ok() && halt && !halt->is_null()) {
    bool positive = (halt->is_uint64() && halt->get_uint64() > 0) || (halt->is_int64() && halt->get_int64() > 0);
    if (!positive)
      f.fail("field \"ungoverned_halt_after_ms\" is " + protocol::describe_json(*halt) +
             ", expected a positive integer");
    else
      spec.ungoverned_halt_after_ms = halt->to_number<std::uint64_t>();
  }
  if (!f.ok()) return f.error();
  return spec;
}

boost::system::result<SupervisorSpec, std::string> parse_spec(std::string_view text) {
  if (text.size() > kMaxSpecBytes) return "the spec is over " + std::to_string(kMaxSpecBytes >> 20) + " MiB";
  std::string error;
  auto value = protocol::parse_json(text, &error);
  if (!value) return "the spec is not JSON: " + error;
  return spec_from_json(*value);
}

std::string reachable_socket_path(const fs::path& socket, int& dir_fd) {
  dir_fd = -1;
  if (socket.native().size() <= kMaxSocketPathBytes) return socket.string();
  dir_fd = ::open(socket.parent_path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return {};
  std::string via = "/proc/self/fd/" + std::to_string(dir_fd) + "/" + socket.filename().string();
  if (via.size() > kMaxSocketPathBytes) {
    ::close(dir_fd);
    dir_fd = -1;
    return {};
  }
  return via;
}

}  // namespace mh::supervisor
