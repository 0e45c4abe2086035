#include "bench/seam/seam_acp.hpp"

#include <fstream>

#include "daemon/model/scripted_endpoint.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/json.hpp"

namespace mh::seam {

namespace {

std::string request(int id, std::string_view method, json::object params) {
  return protocol::canonical_json(
      json::object{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
}

// The allow_once option of a permission request's options, if it offers one.
std::optional<std::string> allow_once_option(const json::object& m) {
  const json::value* params = m.if_contains("params");
  const json::value* options = params && params->is_object() ? params->get_object().if_contains("options") : nullptr;
  if (!options || !options->is_array()) return std::nullopt;
  for (const auto& o : options->get_array())
    if (o.is_object() && string_at(o.get_object(), "kind") == "allow_once")
      return string_at(o.get_object(), "optionId");
  return std::nullopt;
}

}  // namespace

void run_acp_plan_directly(const RunContext& c, RunRecord& r, model::ScriptedEndpoint& endpoint,
                           const adapters::LaunchPlan& plan, const AcpDirect& how) {
  for (const auto& d : plan.directories)
    fs::create_directories(d);
  for (const auto& f : plan.files) {
    fs::create_directories(f.path.parent_path());
    std::ofstream(f.path) << f.contents;
  }
  for (const auto& l : plan.links)
    fs::create_symlink(l.target, l.path);
  std::vector<std::string> env;
  for (const auto& [name, value] : plan.env)
    env.push_back(name + "=" + value);

  DirectChild d(c);
  if (!d.spawn({.program = plan.program, .args = plan.args, .env = env, .cwd = plan.cwd}, r)) {
    endpoint.stop();
    return;
  }
  const std::string vendor(how.vendor);
  d.child.write_line(request(
      1, "initialize",
      json::object{
          {"protocolVersion", 1},
          {"clientCapabilities",
           json::object{{"fs", json::object{{"readTextFile", false}, {"writeTextFile", false}}}, {"terminal", false}}},
          {"clientInfo", json::object{{"name", "mh_seam_bench"}, {"version", mh::build_info::version}}}}));

  d.read_rpc("the prompt's answer", r, [&](const json::object& m, const json::value* id, const auto& method) {
    if (!method && id) {  // an answer to one of ours
      if (m.contains("error")) {
        r.failure = vendor + " refused request " + protocol::canonical_json(*id) + ": " + d.line.substr(0, 300);
        return;
      }
      const json::value* result = m.if_contains("result");
      if (*id == 1) {
        d.child.write_line(
            request(2, "session/new", json::object{{"cwd", plan.cwd.string()}, {"mcpServers", json::array{}}}));
      } else if (*id == 2) {
        auto session = result && result->is_object() ? string_at(result->get_object(), "sessionId") : std::nullopt;
        if (!session) {
          r.failure = "session/new answered without a sessionId";
          return;
        }
        d.child.write_line(
            request(3, "session/prompt",
                    json::object{{"sessionId", *session},
                                 {"prompt", json::array{json::object{{"type", "text"}, {"text", c.o.prompt}}}}}));
      } else if (*id == 3) {
        d.turn_done_at = d.read_at;
        auto stop = result && result->is_object() ? string_at(result->get_object(), "stopReason") : std::nullopt;
        if (stop != "end_turn" && d.problem.empty()) d.problem = "the prompt ended " + stop.value_or("(no stopReason)");
      }
    } else if (method && id) {  // a request of the vendor's
      auto option = *method == "session/request_permission" ? allow_once_option(m) : std::nullopt;
      if (option && how.ask) {
        // The request may be the first sight of its call (Gemini CLI 0.61.0 sends no tool_call
        // notice before it asks).
        const json::value* params = m.if_contains("params");
        const json::value* tool =
            params && params->is_object() ? params->get_object().if_contains("toolCall") : nullptr;
        if (auto call = tool && tool->is_object() ? string_at(tool->get_object(), "toolCallId") : std::nullopt;
            call && !r.seen_by_id.contains(*call)) {
          r.call_seen_ms.push_back(ms_between(d.started, d.read_at));
          r.seen_by_id.emplace(*call, ms_between(d.started, d.read_at));
        }
        d.child.write_line(R"({"jsonrpc":"2.0","id":)" + protocol::canonical_json(*id) +
                           R"(,"result":{"outcome":{"outcome":"selected","optionId":)" +
                           protocol::canonical_json(json::value(*option)) + "}}}");
        r.driver_reaction_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - d.read_at).count());
        ++r.calls_answered;
      } else {
        // Anything else is answered method-not-found, as metaharness's ACP client answers it
        // (Qwen Code 0.24.4's craft/drainMidTurnQueue, asked every step, goes on without it). A
        // permission request the floor was sent means it was not the floor: the run does not count.
        d.child.write_line(R"({"jsonrpc":"2.0","id":)" + protocol::canonical_json(*id) +
                           R"(,"error":{"code":-32601,"message":"mh_seam_bench does not serve this"}})");
        if (*method == "session/request_permission" && d.problem.empty())
          d.problem = vendor + " sent a session/request_permission " +
                      (how.ask ? "with no allow_once option" : "(the floor asks nothing)");
      }
    } else if (*method == "session/update") {
      const json::value* params = m.if_contains("params");
      const json::value* update = params && params->is_object() ? params->get_object().if_contains("update") : nullptr;
      if (!update || !update->is_object()) return;
      const json::object& u = update->get_object();
      auto kind = string_at(u, "sessionUpdate");
      auto call = string_at(u, "toolCallId").value_or("");
      if (kind == "tool_call" && !r.seen_by_id.contains(call)) {
        r.call_seen_ms.push_back(ms_between(d.started, d.read_at));
        r.seen_by_id.emplace(call, ms_between(d.started, d.read_at));
      } else if (kind == "tool_call_update") {
        // A call's result: completed, or failed. Qwen Code 0.24.4 driven this way reports some
        // `touch` calls failed with exit code 0 and signal 1 (its pty hung up after the command
        // ended); whether every call really ran is judged from the files f1..fN it left.
        auto status = string_at(u, "status");
        if (status == "completed" || status == "failed") r.done_by_id[call] = ms_between(d.started, d.read_at);
      }
    }
  });
  finish_direct_run(
      d, endpoint,
      {.vendor = how.vendor, .answers_expected = how.ask, .answered_what = "permission requests", .work = plan.cwd}, r);
}

}  // namespace mh::seam
