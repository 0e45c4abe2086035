#include "adapters/opencode/opencode_plugin.hpp"

#include "adapters/acp/acp_wire.hpp"
#include "protocol/json.hpp"

namespace mh::adapters::opencode {

std::string_view plugin_source() {
  // Plain JavaScript that needs nothing but node:net (opencode's runtime has it): no import of
  // @opencode-ai/plugin, whose package opencode still insists on finding in the config dir.
  static constexpr std::string_view kSource =
      R"JS(// Written by metaharness: the call seam of a governed opencode run. Do not edit.
// Every tool call asks the run (over $METAHARNESS_HOOK_SOCKET) before it executes, and waits.
// Fails closed: no channel, no connection, no answer in time, or an unusable answer denies.
import net from "node:net";

const deadlineSeconds = Math.max(1, Number(process.env.METAHARNESS_HOOK_DEADLINE_S) || 50);
const maxAnswerBytes = 1 << 20;

function refuse(why) {
  return new Error("metaharness could not decide this call, so it is denied: " + why);
}

function ask(request) {
  return new Promise((resolve) => {
    let address = process.env.METAHARNESS_HOOK_SOCKET || "";
    if (!address) return resolve({ error: "METAHARNESS_HOOK_SOCKET is not set (the run is not governed)" });
    if (address.startsWith("@")) address = "\0" + address.slice(1);  // an abstract socket
    let answer = "";
    let settled = false;
    let socket;
    const settle = (result) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (socket) socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => settle({ error: "no answer within " + deadlineSeconds + " s" }),
                             deadlineSeconds * 1000);
    try {
      socket = net.createConnection({ path: address });
    } catch (e) {
      clearTimeout(timer);
      settled = true;
      return resolve({ error: "the run's hook channel is unreachable: " + e.message });
    }
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(JSON.stringify(request) + "\n"));
    socket.on("data", (chunk) => {
      answer += chunk;
      const end = answer.indexOf("\n");
      if (end >= 0) settle({ line: answer.slice(0, end) });
      else if (answer.length > maxAnswerBytes) settle({ error: "the answer is over 1 MiB" });
    });
    socket.on("error", (e) => settle({ error: "the run's hook channel is unreachable: " + e.message }));
    socket.on("close", () => settle({ error: "the run closed the channel without answering" }));
  });
}

export const MetaharnessSeam = async () => ({
  "tool.execute.before": async (input, output) => {
    const asked = await ask({ hook: "tool.execute.before", tool: input.tool, session_id: input.sessionID,
                              call_id: input.callID, args: output.args });
    if (asked.error) throw refuse(asked.error);
    let answer;
    try {
      answer = JSON.parse(asked.line);
    } catch {
      throw refuse(asked.line === "" ? "an empty answer" : asked.line);  // the run refused, saying why
    }
    if (answer === null || typeof answer !== "object") throw refuse("an answer that is not an object");
    switch (answer.decision) {
      case "allow":
      case "abstain":
        return;
      case "deny":
        throw new Error(typeof answer.reason === "string" && answer.reason ? answer.reason : "denied");
      case "replace": {
        const next = answer.input;
        if (next === null || typeof next !== "object" || Array.isArray(next))
          throw refuse("a replace with no input object");
        for (const key of Object.keys(output.args)) delete output.args[key];
        Object.assign(output.args, next);
        return;
      }
      default:
        throw refuse("an answer with no known decision");
    }
  },
});
)JS";
  return kSource;
}

std::variant<ToolCall, std::string> read_seam_request(const json::value& request) {
  const json::object* in = request.is_object() ? &request.get_object() : nullptr;
  if (!in || proto::string_at(*in, "hook") != kSeamHook) return std::string("not a tool.execute.before request");
  auto tool = proto::string_at(*in, "tool");
  auto id = proto::string_at(*in, "call_id");
  if (!tool || tool->empty() || tool->size() > acp::kMaxIdBytes)
    return std::string("the request names no tool (a short string), so the call cannot be governed");
  if (!id || id->empty() || id->size() > acp::kMaxIdBytes)
    return std::string("the request names no call id (a short string), so the call cannot be governed");
  const json::value* args = in->if_contains("args");
  return ToolCall{*id, *tool, args ? *args : json::value(json::object{}), proto::Seam::hook};
}

std::string seam_answer(const proto::Decision& decision) {
  json::object answer;
  if (std::holds_alternative<proto::decision::Allow>(decision)) {
    answer["decision"] = "allow";
  } else if (auto* deny = std::get_if<proto::decision::Deny>(&decision)) {
    answer["decision"] = "deny";
    answer["reason"] = deny->reason;
  } else if (auto* replace = std::get_if<proto::decision::Replace>(&decision)) {
    answer["decision"] = "replace";
    answer["input"] = replace->input;
  } else {
    answer["decision"] = "abstain";
  }
  return proto::canonical_json(answer);
}

}  // namespace mh::adapters::opencode
