// What the park probes (tests/{opencode,gemini,qwen}/*_park_test.cpp) say to a real ACP CLI and read
// back from the scripted endpoint, in one place: initialize as the adapter sends it, a prompt, the
// text of a JSON value, and the tool_results the model was sent for one call.
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "tests/model/rpc_peer.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {

// A string as it is; Anthropic content blocks as their texts joined; anything else serialized.
inline std::string text_of(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_array()) {
    std::string out;
    for (const auto& block : v.as_array())
      if (block.is_object() && block.as_object().contains("text")) out += text_of(block.at("text"));
    return out;
  }
  return boost::json::serialize(v);
}

// initialize, as the adapter sends it (adapters/acp/acp_wire.cpp); its agentCapabilities (empty,
// and a test failure, when it is not answered within `bound`).
inline boost::json::object acp_initialize(RpcPeer& peer, std::chrono::seconds bound) {
  auto id = peer.request(
      "initialize",
      {{"protocolVersion", 1},
       {"clientCapabilities", {{"fs", {{"readTextFile", false}, {"writeTextFile", false}}}, {"terminal", false}}},
       {"clientInfo", {{"name", "metaharness"}, {"version", "0"}}}});
  auto answer = peer.answer_to(id, bound);
  if (!answer || !answer->contains("result")) {
    ADD_FAILURE() << "initialize was not answered\n" << peer.transcript();
    return {};
  }
  return answer->at("result").at("agentCapabilities").as_object();
}

// session/prompt's params: one text block.
inline boost::json::object acp_prompt(const std::string& session_id, const std::string& text) {
  return {{"sessionId", session_id},
          {"prompt", boost::json::array{boost::json::object{{"type", "text"}, {"text", text}}}}};
}

struct ToolResult {
  std::string content;
  bool is_error = false;
};

// The tool_results for `call_id` in the Anthropic requests the endpoint served, in order.
inline std::vector<ToolResult> tool_results_sent(const RunningEndpoint& endpoint, std::string_view call_id) {
  std::vector<ToolResult> out;
  for (const auto& r : endpoint.requests()) {
    if (!r.body.is_object()) continue;
    const boost::json::value* messages = r.body.as_object().if_contains("messages");
    if (!messages || !messages->is_array()) continue;
    for (const auto& m : messages->as_array()) {
      const boost::json::value* content = m.is_object() ? m.as_object().if_contains("content") : nullptr;
      if (!content || !content->is_array()) continue;
      for (const auto& block : content->as_array())
        if (block.is_object() && block.as_object().contains("type") && block.at("type") == "tool_result" &&
            block.at("tool_use_id").is_string() && block.at("tool_use_id").get_string() == call_id) {
          const boost::json::value* err = block.as_object().if_contains("is_error");
          out.push_back({text_of(block.at("content")), err && err->is_bool() && err->get_bool()});
        }
    }
  }
  return out;
}

}  // namespace mh::model::testing
