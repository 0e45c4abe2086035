// One full value of every payload type of the wire (the 20 events and the 7 commands): every
// nullable field set, every omittable key present. Shared by the event tests, the round-trip
// golden test (wire_roundtrip_test.cpp) and the protocol bench.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "golden_frame.hpp"
#include "protocol/commands.hpp"
#include "protocol/digest.hpp"
#include "protocol/events.hpp"

namespace mh::protocol::samples {

inline const std::string kDigestA = sha256_hex("a");
inline const std::string kDigestB = sha256_hex("b");

inline Event make_event(EventPayload payload) {
  return Event{1, "r-1", std::nullopt, std::move(payload)};
}

inline json::value parse_or_die(std::string_view text) {
  auto v = parse_json(text);
  if (!v) throw std::runtime_error("sample JSON does not parse: " + std::string(text));
  return *v;
}

inline StepRef sample_step() {
  return StepRef{"development/default", "implement", 2, 1};
}

inline TokenUsage full_usage(double cost) {
  return TokenUsage{100, 20, 3000, 400, std::string("standard"), 7, 2, std::string("fast"), cost};
}

struct Sample {
  std::string label;
  std::function<Event()> build;
};

// Vocabulary order, one per event.
inline std::vector<Sample> full_events() {
  std::vector<Sample> cases;
  auto add = [&](std::string label, std::function<Event()> build) {
    cases.push_back({std::move(label), std::move(build)});
  };
  add("session_started", [] {
    ev::SessionStarted e;
    e.adapter = "codex";
    e.adapter_class = AdapterClass::direct_provider;
    e.harness_version = "2.1.241";
    e.session_id = "s-1";
    e.model = "claude-opus";
    e.permission_mode = "default";
    e.credential_source = "none";
    e.output_style = "default";
    e.cwd = "/work";
    e.offered_tools = std::vector<std::string>{"Bash", "Read"};
    e.available_operations = std::vector<std::string>{"shell", "file.read"};
    e.withheld = std::vector<WithheldTool>{{"WebFetch", "denied by policy"}};
    e.slash_commands = std::vector<std::string>{"/compact"};
    e.skills = std::vector<std::string>{"tdd"};
    e.agents = std::vector<std::string>{"reviewer"};
    e.plugins = std::vector<PluginRef>{{"p", "repo@p", "1.0"}};
    e.mcp_servers = std::vector<McpServerRef>{{"github", "connected"}};
    e.inputs_digest = kDigestA;
    e.transcript = TranscriptRef{"/tmp/t.jsonl", kDigestB, 1234};
    e.hermetic.mode = HermeticMode::strict;
    e.hermetic.decisions = DecisionMode::ask;
    e.hermetic.imposed = {{HermeticRow::h1a, "empty plugin dir"}, {HermeticRow::h10, "copied tree"}};
    e.hermetic.unavailable = {{HermeticRow::h11, "no sandbox"}};
    e.hermetic.ambient_inputs = {"allow grants on this wire"};
    e.hermetic.installed_plugins = {{"p", "repo@p", "/scratch/p", kDigestB, "--plugin-dir"}};
    return make_event(e);
  });
  add("session_ended", [] {
    ev::SessionEnded e;
    e.final_answer = FinalAnswer{"done", std::string("turn-1")};
    e.observed_models = std::vector<ObservedModel>{{1, std::string("turn-1"), std::string("gpt-5"), "turn_selection"}};
    e.is_error = false;
    e.subtype = "success";
    e.stop_reason = "end_turn";
    e.terminal_reason = "completed";
    e.api_error_status = "529";
    e.num_turns = 3;
    e.duration_ms = 1000;
    e.duration_api_ms = 900;
    e.ttft_ms = 50;
    e.time_to_request_ms = 10;
    e.total_cost_usd = 0.0010919999999999999;
    e.permission_denials = std::vector<PermissionDenial>{
        {"Bash", std::string("toolu_9"), parse_or_die(R"({"command":"rm -rf /","b":[2,1]})")}};
    e.subagents_spawned = 0;
    e.usage = full_usage(0.25);
    e.model_usage = std::map<std::string, TokenUsage>{{"opus", full_usage(0.0)}, {"haiku", full_usage(3.0)}};
    e.census.allowed = 1;
    e.census.denied = 2;
    e.census.by_seam = {{"hook", 3}};
    e.census.by_decider = {{"frame", 2}, {"embedder", 1}};
    return make_event(e);
  });
  add("step_entered", [] { return make_event(ev::StepEntered{sample_step(), kDigestA}); });
  add("step_left", [] {
    return make_event(ev::StepLeft{sample_step(), StepOutcome{StepOutcome::Kind::failed, "suite red"}});
  });
  add("turn_started", [] { return make_event(ev::TurnStarted{4, kDigestB}); });
  add("turn_ended", [] { return make_event(ev::TurnEnded{4, std::string("end_turn")}); });
  add("text", [] { return make_event(ev::Text{"hello", std::string("req_1")}); });
  add("thinking", [] { return make_event(ev::Thinking{"let me see", std::string("req_1")}); });
  add("thinking_estimate", [] { return make_event(ev::ThinkingEstimate{120, -5}); });
  add("injection", [] { return make_event(ev::Injection{"frame text", std::string("frame")}); });
  add("tool_requested", [] {
    ev::ToolRequested e;
    e.call_id = "toolu_01";
    e.name = "apply_patch";
    e.input = parse_or_die(R"({"patch":"*** Begin Patch","path":"src/lib.rs"})");
    e.operations = {"file.write", "file.edit"};
    e.subjects = {"file:src/lib.rs"};
    e.decision_required = true;
    e.deadline_ms = 55000;
    e.seam = Seam::hook;
    e.agent = "toolu_parent";
    e.escalation = true;
    return make_event(e);
  });
  add("tool_decided", [] {
    ev::ToolDecided e;
    e.call_id = "toolu_01";
    e.decision = decision::Replace{parse_or_die(R"({"command":"ls -la"})")};
    e.decided_by = DecidedBy::embedder;
    e.seam = Seam::control_request;
    e.latency_ms = 12;
    e.peer = PeerIdentity{1000, 4242};
    e.requested = decision::Allow{};
    return make_event(e);
  });
  add("tool_result", [] {
    ev::ToolResult e;
    e.exit_code = -1;
    e.outcome_source = "retained_tool_completion";
    e.call_id = "toolu_01";
    e.is_error = true;
    e.content = json::value("exit 1");
    e.bytes = 6;
    e.tool_use_result = parse_or_die(R"({"stdout":"","stderr":"boom","interrupted":false})");
    return make_event(e);
  });
  add("usage", [] { return make_event(ev::Usage{std::string("req_1"), std::string("opus"), full_usage(0.0123)}); });
  add("rate_limit", [] {
    return make_event(
        ev::RateLimit{RateLimitInfo{std::string("allowed"), std::string("five_hour"), 1767225600, 0.238876, false}});
  });
  add("command_result", [] {
    return make_event(ev::CommandResult{"c2", CommandOutcome::ok("the next turn or step boundary")});
  });
  add("warning", [] { return make_event(ev::Warning{"UNCOVERED_TOOL", "NotebookEdit is uncovered"}); });
  add("opaque", [] { return make_event(ev::Opaque{std::string("system"), std::string("hologram"), kDigestA, 7}); });
  add("auth_expired", [] {
    return make_event(ev::AuthExpired{std::string("operator-login"), std::string("OAuth token expired"), 12});
  });
  add("stream_closed", [] {
    ev::StreamClosed e;
    e.events = 41;
    e.reason = CloseReason::completed;
    e.run_id = "r-1";
    e.process = ProcessTermination{ProcessKind::exited, 0, 0};
    Event event = make_event(e);
    event.seq = 42;
    return event;
  });
  return cases;
}

// What the full forms above leave out: the envelope's optional keys (the vendor's `at`,
// `recorded_at` and a `cut` list) and a decision answered through the viewer (`peer.via`).
inline std::vector<Event> full_extras() {
  Event cut = make_event(ev::Text{"hel", std::string("req_1")});
  cut.seq = 7;
  cut.at = "2026-11-29T10:00:00.000Z";
  cut.recorded_at = "2026-11-29T10:00:00.125Z";
  cut.cut = {CutField{"text", "/text", "text", 5, 3, kDigestA}, CutField{"input", "/input", "json", 90, 10, kDigestB}};
  ev::ToolDecided viewer;
  viewer.call_id = "toolu_02";
  viewer.decision = decision::Deny{"not now"};
  viewer.decided_by = DecidedBy::embedder;
  viewer.seam = Seam::hook;
  viewer.latency_ms = 900;
  viewer.peer = PeerIdentity{1000, 4343, std::string("viewer")};
  viewer.requested = decision::Abstain{};
  ev::StreamClosed counted;  // a run with a cgroup of its own: what it counted
  counted.events = 9;
  counted.reason = CloseReason::killed;
  counted.run_id = "r-1";
  counted.process = ProcessTermination{ProcessKind::signaled, 0, 9};
  counted.resources = ev::RunResources{412345, 73400320, 17, 0, 3};
  Event closed = make_event(counted);
  closed.seq = 10;
  return {cut, make_event(viewer), closed};
}

inline Frame golden_frame() {
  auto frame = load_frame(golden::kFrameDocument, /*require_sealed=*/true);
  if (!frame) throw std::runtime_error("the golden frame does not load: " + frame.error().message);
  return std::move(*frame);
}

struct CommandSample {
  std::string label;
  std::function<Command()> build;
};

// Vocabulary order, one per command.
inline std::vector<CommandSample> full_commands() {
  return {
      {"tool_decide",
       [] {
         return Command{"c1", cmd::ToolDecide{"toolu_01", decision::Deny{"not in this step"}}};
       }},
      {"frame_set",
       [] {
         return Command{"c2", cmd::FrameSet{golden_frame(), StepOutcome{StepOutcome::Kind::completed, ""}}};
       }},
      {"message_inject",
       [] {
         return Command{"c3", cmd::MessageInject{"also run the linter"}};
       }},
      {"steer",
       [] {
         return Command{"c4", cmd::Steer{"stop and summarise"}};
       }},
      {"permission_set",
       [] {
         return Command{"c5", cmd::PermissionSet{"acceptEdits"}};
       }},
      {"interrupt",
       [] {
         return Command{"c6", cmd::Interrupt{std::string("the user pressed stop")}};
       }},
      {"halt",
       [] {
         return Command{"c7", cmd::Halt{std::string("budget spent")}};
       }},
  };
}

}  // namespace mh::protocol::samples
