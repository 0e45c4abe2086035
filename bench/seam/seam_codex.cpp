// The Codex row of the call seam bench (seam/seam.hpp): the real `codex app-server` (the
// pinned native binary) driven directly over JSON-RPC stdio, one turn of N sequential
// exec_command calls (`touch f<i>`), three variants:
//
//   never_ask        thread/start with approvalPolicy "never": Codex asks nobody. The floor.
//   bare_driver      the same, approvalPolicy "untrusted" (what metaharness uses): Codex sends an
//                    item/commandExecution/requestApproval for every call and the bench answers
//                    {"decision":"accept"} at once. The approval round trip inside Codex itself.
//   metaharness_ask  `metaharness run codex --decisions ask` (shared: seam_bench.cpp). On top of
//                    the bare driver: metaharness's PreToolUse hook (mh-codex-hook, one process
//                    per call) and metaharness's own path.
//
// The direct variants get the same CODEX_HOME/config.toml shape the codex adapter writes (model
// provider = the scripted endpoint, wire_api responses, env_key token, web search off, no TTY
// sessions, the project pinned untrusted) without its hooks section, and the same JSON-RPC
// messages (initialize with the same opt-outs, thread/start with cwd, sandbox workspace-write and
// bypass_hook_trust, turn/start with the prompt); only the approval policy differs between them.
//
// No goal is judged: the report gives the added time per call (unpaired and paired by round,
// with 95% bootstrap intervals), metaharness's in-process share from the raw samples of its
// --latency-report files, and its hook's from Codex's hook/completed.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "adapters/codex/codex_adapter.hpp"
#include "bench/seam/seam.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "metaharness/build_info.hpp"

namespace mh::seam {
namespace {

using namespace std::chrono_literals;

// What the codex adapter asks Codex not to send (adapters/codex/codex_adapter.cpp, kOptOut): the
// direct variants ask the same, so Codex does the same notification work in every variant.
constexpr std::array<std::string_view, 9> kOptOut = {
    "item/agentMessage/delta",  "item/reasoning/summaryTextDelta",   "item/reasoning/summaryPartAdded",
    "item/reasoning/textDelta", "item/commandExecution/outputDelta", "item/fileChange/outputDelta",
    "item/plan/delta",          "item/mcpToolCall/progress",         "thread/status/changed"};

// The environment variable holding the endpoint's token: the adapter's name for it.
constexpr std::string_view kTokenEnv = "METAHARNESS_MODEL_TOKEN";

const json::object* object_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

// The config.toml the codex adapter writes (adapters/codex/codex_adapter.cpp, plan()), minus
// its [[hooks.PreToolUse]] section: the direct variants run no hook.
std::string config_toml(const RunContext& c, const std::string& base_url, const fs::path& work) {
  std::ostringstream toml;
  toml << "# Written by mh_codex_seam_bench: the codex adapter's config.toml without its hooks.\n"
       << "model = \"" << c.o.model << "\"\n"
       << "model_provider = \"metaharness\"\n"
       << "web_search = \"disabled\"\n\n"
       << "[features]\n"
       << "unified_exec_tty = false\n\n"
       << "[model_providers.metaharness]\n"
       << "name = \"metaharness model endpoint\"\n"
       << "base_url = \"" << base_url << "/v1\"\n"
       << "wire_api = \"responses\"\n"
       << "env_key = \"" << kTokenEnv << "\"\n\n"
       << "[projects." << json::serialize(json::value(work.string())) << "]\n"
       << "trust_level = \"untrusted\"\n";
  return toml.str();
}

// LANG, LC_ALL and TZ pass through to codex in the adapter's plan; the same here and for
// metaharness, so every variant's codex sees the same locale.
void pass_locale(std::vector<std::string>& env) {
  for (const char* name : {"LANG", "LC_ALL", "TZ"})
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
}

void run_codex_directly(const RunContext& c, RunRecord& r) {
  const fs::path home = r.dir / "home", codex_home = r.dir / "codex-home", tmp = r.dir / "tmp", work = r.dir / "work";
  for (const auto& d : {home, codex_home, tmp, work})
    fs::create_directories(d);

  auto endpoint = c.start_endpoint(r);
  if (!endpoint) return;
  std::ofstream(codex_home / "config.toml") << config_toml(c, endpoint->base_url(), work);
  fs::permissions(codex_home / "config.toml", fs::perms::owner_read | fs::perms::owner_write);

  std::vector<std::string> env;
  pass_locale(env);
  env.insert(env.end(),
             {"HOME=" + home.string(), "CODEX_HOME=" + codex_home.string(), "PATH=/usr/local/bin:/usr/bin:/bin",
              "TMPDIR=" + tmp.string(), std::string(kTokenEnv) + "=" + endpoint->token()});

  // The adapter's messages, in its order: initialize; on its answer initialized and
  // thread/start; on that answer turn/start with the prompt.
  json::array opt_out;
  for (auto m : kOptOut)
    opt_out.emplace_back(m);
  const std::string initialize = json::serialize(json::object{
      {"id", 1},
      {"method", "initialize"},
      {"params",
       json::object{{"capabilities", json::object{{"experimentalApi", true}, {"optOutNotificationMethods", opt_out}}},
                    {"clientInfo", json::object{{"name", "mh_codex_seam_bench"},
                                                {"title", "mh_codex_seam_bench"},
                                                {"version", std::string(mh::build_info::version)}}}}}});
  const bool never = r.variant == Variant::floor;
  const std::string thread_start =
      json::serialize(json::object{{"id", 2},
                                   {"method", "thread/start"},
                                   {"params", json::object{{"approvalPolicy", never ? "never" : "untrusted"},
                                                           {"config", json::object{{"bypass_hook_trust", true}}},
                                                           {"cwd", work.string()},
                                                           {"sandbox", "workspace-write"}}}});

  DirectChild d(c);
  if (!d.spawn({.program = c.o.vendor_bin, .args = std::vector<std::string>{"app-server"}, .env = env, .cwd = work},
               r)) {
    endpoint->stop();
    return;
  }
  d.child.write_line(initialize);

  d.read_rpc("turn/completed", r, [&](const json::object& m, const json::value* id, const auto& method) {
    static const json::object kEmpty;
    const json::object* params_ptr = object_at(m, "params");
    const json::object& params = params_ptr ? *params_ptr : kEmpty;
    if (!method && id) {  // an answer to one of ours
      if (const json::object* error = object_at(m, "error")) {
        r.failure = "codex refused request " + json::serialize(*id) + ": " + json::serialize(*error).substr(0, 300);
        return;
      }
      const json::object* result = object_at(m, "result");
      if (*id == 1) {
        d.child.write_line(R"({"method":"initialized"})");
        d.child.write_line(thread_start);
      } else if (*id == 2) {
        const json::object* thread = result ? object_at(*result, "thread") : nullptr;
        auto thread_id = thread ? string_at(*thread, "id") : std::nullopt;
        if (!thread_id) {
          r.failure = "thread/start answered without a thread id";
          return;
        }
        if (auto policy = result ? string_at(*result, "approvalPolicy") : std::nullopt;
            policy != std::string(never ? "never" : "untrusted"))
          d.problem = "thread/start answered approvalPolicy " + policy.value_or("(none)");
        json::object turn{
            {"id", 3},
            {"method", "turn/start"},
            {"params", json::object{{"input", json::array{json::object{{"text", c.o.prompt}, {"type", "text"}}}},
                                    {"threadId", *thread_id}}}};
        d.child.write_line(json::serialize(turn));
      }
    } else if (method && id) {  // a request of Codex's
      if (*method == "item/commandExecution/requestApproval" && !never) {
        // Never acceptForSession: like metaharness, every call is decided on its own.
        std::string answer = R"({"id":)" + json::serialize(*id) + R"(,"result":{"decision":"accept"}})";
        d.child.write_line(answer);
        r.driver_reaction_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - d.read_at).count());
        ++r.calls_answered;
      } else {
        // Nothing else is expected (an approval under never would mean the floor is not one):
        // answer so Codex does not wait, and do not count the run.
        d.child.write_line(R"({"id":)" + json::serialize(*id) +
                           R"(,"error":{"code":-32000,"message":"mh_codex_seam_bench does not serve this"}})");
        if (d.problem.empty()) d.problem = "codex sent an unexpected " + *method;
      }
    } else if (method) {  // a notification
      if (*method == "item/started" || *method == "item/completed") {
        const json::object* item = object_at(params, "item");
        if (!item || string_at(*item, "type") != "commandExecution") return;
        std::string call = string_at(*item, "id").value_or("");
        if (*method == "item/started") {
          r.call_seen_ms.push_back(ms_between(d.started, d.read_at));
          r.seen_by_id.emplace(call, ms_between(d.started, d.read_at));
        } else {
          r.done_by_id[call] = ms_between(d.started, d.read_at);
          if (auto s = string_at(*item, "status"); s != "completed" && d.problem.empty())
            d.problem = "call " + call + " ended " + s.value_or("(no status)");
        }
      } else if (*method == "turn/completed") {
        d.turn_done_at = d.read_at;
        const json::object* turn = object_at(params, "turn");
        if (auto s = turn ? string_at(*turn, "status") : std::nullopt; s != "completed" && d.problem.empty())
          d.problem = "the turn ended " + s.value_or("(no status)") + ": " + d.line.substr(0, 300);
      }
    }
  });
  finish_direct_run(d, *endpoint,
                    {.vendor = "codex", .answers_expected = !never, .answered_what = "approvals", .work = work}, r);
}

void read_hook_durations(const fs::path& run_dir, RunRecord& r) {
  const fs::path transcript = run_dir / "vendor-stdout.jsonl";
  std::ifstream in(transcript);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"hook/completed\"") == std::string::npos) continue;
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) continue;
    const json::object* params = object_at(v.get_object(), "params");
    const json::object* run = params ? object_at(*params, "run") : nullptr;
    if (!run || string_at(*run, "eventName") != "preToolUse") continue;
    if (const json::value* d = run->if_contains("durationMs"); d && d->is_number())
      r.hook_ms.push_back(d->to_number<double>());
  }
}

}  // namespace

const VendorDriver kCodex = {
    .name = "codex",
    .program = "mh_codex_seam_bench",
    .variant_names = {"never_ask", "bare_driver", "", "metaharness_ask"},
    .default_timeout_s = 120,
    .bin_under_vendor = mh::adapters::codex::kBinaryUnderVendor,
    .json_name = "codex-seam-bench.json",
    .metaharness_helper = "mh-codex-hook",
    .metaharness = {.pass_locale = true,
                    .model_flag = true,
                    .seen_at_first_announcement = true,
                    .close_at_turn_end = true,
                    .check_stop_reason = true,
                    .strict_requests = true},
    .run_directly = &run_codex_directly,
    .after_metaharness_run = &read_hook_durations,
    .approval = ApprovalReport{.seam_title = "Codex approval seam",
                               .call_kind = "exec_command",
                               .line_prefix = "codex_seam",
                               // Under "never" Codex announces a command (item/started) only once it has run, under
                               // "untrusted" before it asks for the approval: the two latencies time different things.
                               .latency_against_floor = false,
                               .helper_title =
                                   "PreToolUse hook run (mh-codex-hook) as Codex timed it (hook/completed durationMs)"},
};

// This row, registered from its own file (seam.hpp).
[[maybe_unused]] const bool kCodexRegistered = register_driver(&kCodex);

}  // namespace mh::seam
