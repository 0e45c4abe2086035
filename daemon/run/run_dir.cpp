#include "daemon/run/run_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json/value_from.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

std::string new_run_id() {
  std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[20];
  std::snprintf(suffix, sizeof suffix, "%012llx", static_cast<unsigned long long>(rng() & 0xFFFFFFFFFFFFull));
  return std::string(stamp) + "-" + suffix;
}

std::optional<std::string> write_file(const std::filesystem::path& path, std::string_view contents, unsigned mode) {
  UniqueFd fd(open_with_mode(path, O_WRONLY | O_TRUNC, mode));  // exactly `mode`, whatever the umask
  if (!fd || !write_all(fd.get(), contents)) return "cannot write " + path.string() + ": " + std::strerror(errno);
  return std::nullopt;
}

namespace {

json::value read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::ostringstream ss;
  ss << in.rdbuf();
  return protocol::parse_json(ss.str()).value_or(nullptr);
}

}  // namespace

RunDir RunDir::in_state_dir(const std::filesystem::path& state_dir, const std::string& id) {
  return RunDir(runs_of(state_dir) / id);
}

std::filesystem::path RunDir::runs_of(const std::filesystem::path& state_dir) {
  return state_dir / "runs";
}

std::optional<std::string> RunDir::write_spec(const adapters::RunSpec& spec) const {
  return write_file(spec_json(), protocol::pretty_json(adapters::spec_to_json(spec), false), 0640);
}

std::optional<std::string> RunDir::write_plan(const adapters::LaunchPlan& plan, const adapters::RunSpec& spec) const {
  return write_file(plan_json(), protocol::pretty_json(adapters::plan_to_json(plan, spec), false), 0640);
}

std::optional<std::string> RunDir::write_scenario(const json::value& scenario) const {
  return write_file(scenario_json(), protocol::pretty_json(scenario), 0640);
}

std::optional<std::string> RunDir::write_meta(const RunMeta& meta) const {
  json::object o;
  o["owner_uid"] = meta.owner_uid;
  o["owner_pid"] = meta.owner_pid;
  o["adapter"] = meta.adapter;
  o["labels"] = boost::json::value_from(meta.labels);
  o["created_unix"] = meta.created_unix;
  return write_file(run_json(), protocol::pretty_json(o, false), 0640);
}

json::value RunDir::read_spec() const {
  return read_json(spec_json());
}

json::value RunDir::read_plan() const {
  return read_json(plan_json());
}

std::optional<RunMeta> RunDir::read_meta() const {
  json::value v = read_json(run_json());
  if (!v.is_object()) return std::nullopt;
  const auto& o = v.get_object();
  RunMeta meta;
  if (auto* a = o.if_contains("adapter"); a && a->is_string()) meta.adapter = a->get_string();
  if (auto* u = o.if_contains("owner_uid"); u && u->is_int64())
    meta.owner_uid = static_cast<std::uint32_t>(u->get_int64());
  if (auto* p = o.if_contains("owner_pid"); p && p->is_int64())
    meta.owner_pid = static_cast<std::int32_t>(p->get_int64());
  if (auto* c = o.if_contains("created_unix"); c && c->is_int64()) meta.created_unix = c->get_int64();
  if (auto* l = o.if_contains("labels"); l && l->is_object())
    for (const auto& kv : l->get_object())
      if (kv.value().is_string()) meta.labels[std::string(kv.key())] = std::string(kv.value().get_string());
  return meta;
}

}  // namespace mh::daemon
