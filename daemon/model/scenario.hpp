// metaharness.scenario/1: the script a ScriptedEndpoint plays to a vendor CLI.
//
// One scenario drives every model wire the project speaks to: the Anthropic Messages API
// (Claude Code), the OpenAI Responses API (Codex) and the Gemini API (Gemini CLI). A step is
// written once in neutral terms (text, thinking, tool calls, usage, an HTTP error, pacing) and
// rendered into each wire's shapes when served; where the wires genuinely differ a step or a
// content block carries per-wire overrides ("anthropic": {...}, "responses": {...},
// "gemini": {...}) whose keys replace its own on that wire.
// Overrides are resolved and every wire's form validated when the scenario is loaded, so a
// scenario that loads can always be served. docs/scenarios.md is the full reference.
//
// No Asio here: the daemon's config layer and the CLI load scenarios without a server.
#pragma once

#include <array>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mh::model {

inline constexpr std::string_view kScenarioFormat = "metaharness.scenario/1";

// The model APIs the endpoint serves. The wire of a request is decided by its path.
enum class Wire { anthropic, responses, gemini };
inline constexpr std::array kWires = {Wire::anthropic, Wire::responses, Wire::gemini};
std::string_view to_string(Wire wire);
// The wire of a model API as adapters, upstreams and the gateway name it ("anthropic",
// "openai-responses", "gemini"): a scenario calls the second "responses". nullopt: none of them.
std::optional<Wire> wire_of_model_api(std::string_view name);

// Token counts reported for one model response, in neutral names; each wire renders its own
// shape (Anthropic: input/output/cache_read/cache_creation; Responses: input/output with
// input_tokens_details.cached_tokens and output_tokens_details.reasoning_tokens; Gemini:
// usageMetadata prompt/candidates/cachedContent/thoughts/totalTokenCount).
struct Usage {
  std::uint64_t input_tokens = 10;
  std::uint64_t output_tokens = 5;
  std::uint64_t cached_input_tokens = 0;          // Anthropic cache_read; Gemini cachedContentTokenCount
  std::uint64_t cache_creation_input_tokens = 0;  // Anthropic only
  std::uint64_t reasoning_tokens = 0;             // Responses reasoning_tokens; Gemini thoughtsTokenCount
};

// One piece of model output.
struct Block {
  enum class Kind {
    text,              // Anthropic text block; Responses message item (output_text); Gemini text part
    thinking,          // Anthropic thinking block (+signature); Responses reasoning item (summary);
                       // Gemini part with thought: true (+thoughtSignature)
    tool_call,         // Anthropic tool_use; Responses function_call (arguments = JSON text);
                       // Gemini functionCall part {name, args} (+id only when the block gives one)
    custom_tool_call,  // Responses custom_tool_call with a raw string input (apply_patch); no
                       // Anthropic or Gemini form
  };
  Kind kind = Kind::text;
  std::string text;          // text, thinking
  std::string signature;     // thinking; empty = generated
  std::string id;            // tool calls: tool_use id / call_id; empty = generated
  std::string name;          // tool calls
  boost::json::value input;  // tool_call: an object; custom_tool_call: a string
  // Responses only, a tool_call's `namespace`: the function belongs to a namespace tool (Codex
  // offers its sub-agent tools, spawn_agent and the rest, in "multi_agent_v1"). Set only through
  // the block's "responses" override; empty = none (the item carries no namespace key).
  std::string tool_namespace;
};

// An HTTP error answer instead of a model response.
struct HttpError {
  unsigned status = 500;
  std::string message;  // empty = the wire's usual text for the status
  std::string type;     // empty = the wire's usual error type for the status (Gemini: error.status,
                        // e.g. RESOURCE_EXHAUSTED)
  std::string code;     // Responses `error.code`; empty = the usual code for the status (or null)
  std::optional<std::uint64_t> retry_after_s;                // `retry-after: N`
  std::optional<std::uint64_t> retry_after_ms;               // `retry-after-ms: N`
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
};

struct Timing {
  std::chrono::milliseconds headers_delay{0};  // before the status line
  std::chrono::milliseconds event_delay{0};    // between consecutive SSE events
  std::chrono::milliseconds hold{0};           // after the content, before the final events
  bool hold_until_disconnect = false;          // hold until the client goes away (no final events)
};

// How a streamed response ends once the content (and any hold) is out.
enum class Finish {
  complete,      // message_delta + message_stop / response.completed / Gemini's last chunk
                 // (finishReason + usageMetadata)
  stream_error,  // Anthropic `event: error` (overloaded) / Responses response.failed / Gemini
                 // a `data: {"error": {...}}` chunk (500 INTERNAL)
  disconnect,    // close the connection without final events
};

// What one wire serves for one step: the step with that wire's overrides applied.
struct StepForm {
  std::vector<Block> content;
  // Anthropic's name; empty = tool_use if a tool call, else end_turn. Gemini maps it to a
  // finishReason (end_turn/tool_use/stop_sequence/pause_turn: STOP; max_tokens and
  // model_context_window_exceeded: MAX_TOKENS; refusal: SAFETY).
  std::optional<std::string> stop_reason;
  Usage usage;
  std::optional<HttpError> error;  // when set, the step answers with this error and no content
  Timing timing;
  Finish finish = Finish::complete;
  std::size_t delta_bytes = 0;  // split streamed text/arguments into deltas of at most this; 0 = one
};

// Which main-loop requests a step may answer, by a request header (names are compared
// lower-case). Codex sends a sub-agent's requests with `x-openai-subagent`, and its main agent's
// without: a sub-agent and its parent run concurrently, so their steps are told apart by this,
// never by the order their requests happen to arrive in.
struct When {
  std::string header;  // the header that must be present (has_header) or absent (!has_header)
  bool has_header = true;
  bool matches(const std::map<std::string, std::string>& lower_case_headers) const {
    return lower_case_headers.count(header) == (has_header ? 1u : 0u);
  }
};

struct Step {
  std::string name;          // label for logs; empty = none
  std::uint64_t repeat = 1;  // served this many times before the next step
  bool sticky = false;       // served for this and every later main-loop request
  // Set: only requests that match it take this step; a request is served the first step in
  // order that is not used up and whose `when` (if any) it matches.
  std::optional<When> when;
  StepForm anthropic;
  StepForm responses;
  StepForm gemini;

  const StepForm& form(Wire wire) const {
    return wire == Wire::anthropic ? anthropic : wire == Wire::responses ? responses : gemini;
  }
  StepForm& form(Wire wire) {
    return wire == Wire::anthropic ? anthropic : wire == Wire::responses ? responses : gemini;
  }
};

// Which requests consume steps. Everything else gets the `aux` answer.
enum class MainLoopRule {
  requests_with_tools,  // a request whose body has a non-empty `tools` array (the agent loop);
                        // tool-less ones (titles, classifiers, summaries) are aux
  all_requests,         // every request consumes a step (e.g. a CLI run with no tools at all)
};

struct Scenario {
  std::string description;
  bool serves_anthropic = true;
  bool serves_responses = true;
  bool serves_gemini = true;
  MainLoopRule main_loop = MainLoopRule::requests_with_tools;
  std::vector<Step> steps;
  Step aux;        // answer for requests that are not main-loop
  Step exhausted;  // answer for main-loop requests once the steps have run out

  bool serves(Wire wire) const {
    return wire == Wire::anthropic ? serves_anthropic : wire == Wire::responses ? serves_responses : serves_gemini;
  }
};

// A refusal names where the problem is (a JSON path such as `steps[2].content[0].input`) and
// what it is.
struct ScenarioError {
  std::string where;  // empty for document-level problems (unreadable file, not JSON)
  std::string problem;
  std::string message() const { return where.empty() ? problem : where + ": " + problem; }
};

boost::system::result<Scenario, ScenarioError> parse_scenario(std::string_view document);
boost::system::result<Scenario, ScenarioError> load_scenario_file(const std::filesystem::path& path);

// Makes boost::system::result<T, ScenarioError>::value() usable (throws std::runtime_error).
[[noreturn]] void throw_exception_from_error(const ScenarioError& e, const boost::source_location& loc);

}  // namespace mh::model
