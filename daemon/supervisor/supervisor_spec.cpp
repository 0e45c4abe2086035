// SupervisorSpec <-> JSON. Strict on the way in: the supervisor acts on every field (it spawns a
// program as a user into a cgroup), so a field that is missing or mistyped is refused by name,
// never defaulted. Unknown keys are ignored (a newer daemon may say more).
#include "daemon/supervisor/supervisor_spec.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json.hpp>

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

}  // namespace

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
  json::value hook = nullptr;
  if (spec.hook_channel)
    hook = json::object{{"address", spec.hook_channel->address},
                        {"uid", spec.hook_channel->uid},
                        {"marker", spec.hook_channel->marker}};
  return json::object{{"protocol", spec.protocol},
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
                      {"hook_channel", std::move(hook)},
                      {"adopt_within_ms", spec.adopt_within_ms}};
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
  if (const json::array* args = f.req_array("args")) {
    for (const json::value& arg : *args) {
      if (!arg.is_string()) {
        f.fail("an entry of \"args\" is " + protocol::describe_json(arg) + ", expected a string");
        break;
      }
      spec.args.emplace_back(arg.get_string());
    }
  }
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
  if (const json::object* hook = f.opt_object("hook_channel")) {
    FieldReader h(*hook, "spec: hook_channel");
    SpecHookChannel channel{h.req_string("address"), h.req_u32("uid"), h.req_string("marker")};
    if (h.ok() && (channel.address.size() < 2 || channel.address.front() != '@'))
      h.fail("field \"address\" is \"" + protocol::excerpt(channel.address, 80) + "\", expected @<abstract name>");
    if (h.ok() && (channel.marker.find('=') == std::string::npos || channel.marker.front() == '='))
      h.fail("field \"marker\" is \"" + protocol::excerpt(channel.marker, 80) + "\", expected NAME=VALUE");
    if (!h.ok()) f.fail(h.error());
    spec.hook_channel = std::move(channel);
  }
  spec.adopt_within_ms = f.req_u64("adopt_within_ms");
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
