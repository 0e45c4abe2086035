// The typed protocol layer against raw Boost.JSON on the same event lines.
//
// A realistic stream is generated in-process from a fixed seed: a session of turns, each with
// model text, thinking, usage, and a few tool calls whose inputs and results carry kilobytes of
// file content and command output, plus the control-plane events around them. Both paths do
// the same job per line — text in, text out:
//   typed: read_event_line (parse, check, build the typed event) + serialize (canonical form);
//   raw:   boost::json::parse + boost::json::serialize (no checks, insertion order kept).
// The typed path is allowed to cost at most twice the raw one.
#include <benchmark/benchmark.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "protocol/events.hpp"
#include "protocol/reader.hpp"

namespace mh::protocol {
namespace {

// splitmix64: tiny, fast, and the same numbers on every platform (std distributions are not).
class Prng {
 public:
  explicit Prng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  std::size_t between(std::size_t lo, std::size_t hi) { return lo + below(hi - lo + 1); }
  bool chance(unsigned percent) { return below(100) < percent; }

 private:
  std::uint64_t state_;
};

constexpr const char* kWords[] = {
    "the",        "test",      "suite", "is",         "red",    "before",      "implementation",
    "function",   "returns",   "value", "const",      "auto",   "std::string", "include",
    "error",      "warning:",  "build", "passed",     "failed", "src/lib.rs",  "cargo",
    "ninja",      "=>",        "{",     "}",          "(",      ")",           ";",
    "\"quoted\"", "tab\there", "naïve", "café",       "→",      "’s",          "0x7f",
    "42",         "TODO",      "fix",   "assert_eq!", "return", "if",          "else",
    "for",        "while",     "match", "impl"};

// Text that looks like code or command output: words, punctuation, newlines, some non-ASCII.
std::string prose(Prng& rng, std::size_t bytes) {
  std::string out;
  out.reserve(bytes + 16);
  while (out.size() < bytes) {
    out += kWords[rng.below(std::size(kWords))];
    out += rng.chance(12) ? '\n' : ' ';
  }
  return out;
}

std::string call_id(std::size_t n) {
  return "toolu_01" + std::to_string(100000 + n);
}

// Tool inputs as vendors send them: keys in the vendor's order, not sorted.
json::value tool_input(Prng& rng, std::string& tool) {
  json::object input;
  switch (rng.below(4)) {
    case 0:
      tool = "Write";
      input["file_path"] = "/work/src/module_" + std::to_string(rng.below(100)) + ".cpp";
      input["content"] = prose(rng, rng.between(1500, 4000));
      break;
    case 1:
      tool = "Edit";
      input["file_path"] = "/work/src/lib.rs";
      input["old_string"] = prose(rng, rng.between(300, 1200));
      input["new_string"] = prose(rng, rng.between(300, 1500));
      input["replace_all"] = rng.chance(20);
      break;
    case 2:
      tool = "Bash";
      input["command"] = "cd /work && ninja -C build -j2 && ctest --output-on-failure -R " + prose(rng, 40);
      input["description"] = "Build and run the tests";
      input["timeout"] = 120000;
      break;
    default:
      tool = "mcp__github__create_issue";
      input["title"] = prose(rng, 60);
      input["body"] = prose(rng, rng.between(800, 2500));
      input["labels"] = json::array{"bug", "protocol"};
      input["metadata"] = json::object{{"priority", 2}, {"estimate", 1.5}, {"assignees", json::array{}}};
      break;
  }
  return input;
}

json::value tool_output(Prng& rng) {
  if (rng.chance(50)) return json::value(prose(rng, rng.between(1000, 4000)));
  json::array blocks;
  blocks.push_back(json::object{{"type", "text"}, {"text", prose(rng, rng.between(1000, 3500))}});
  if (rng.chance(30)) blocks.push_back(json::object{{"type", "text"}, {"text", prose(rng, 200)}});
  return blocks;
}

TokenUsage usage_of(Prng& rng) {
  TokenUsage u;
  u.input_tokens = rng.between(10, 5000);
  u.output_tokens = rng.between(10, 2000);
  u.cache_read_input_tokens = rng.between(0, 90000);
  u.cache_creation_input_tokens = rng.between(0, 4000);
  u.service_tier = "standard";
  u.iterations = rng.between(0, 3);
  if (rng.chance(30)) u.cost_usd = static_cast<double>(rng.between(1, 99999)) / 1e6;
  return u;
}

// A deterministic session: ~5000 lines, about a third of them tool traffic.
std::vector<std::string> generate_stream(std::uint64_t seed) {
  Prng rng(seed);
  std::vector<std::string> lines;
  std::uint64_t seq = 0;
  std::size_t calls = 0;
  auto emit = [&](EventPayload payload, bool timed) {
    Event e{++seq, "bench-run", std::nullopt, std::move(payload)};
    if (timed) e.at = "2026-11-29T19:" + std::to_string(10 + seq % 50) + ":00.123Z";
    lines.push_back(serialize(e));
  };

  // The session.started of a run, as one value.
  emit(ev::SessionStarted{.adapter = "vendor",
                          .harness_version = "2.1.241",
                          .session_id = "8f0c1d2e-0000-4000-8000-000000000001",
                          .model = "model-opus-4",
                          .permission_mode = "default",
                          .credential_source = "none",
                          .cwd = "/work",
                          .offered_tools = std::vector<std::string>{"Bash", "Edit", "Glob", "Grep", "Read", "Task",
                                                                    "TodoWrite", "WebFetch", "Write"},
                          .mcp_servers = std::vector<McpServerRef>{{"github", "connected"}},
                          .transcript = {.path = "/scratch/transcript.jsonl"}},
       true);

  for (std::uint32_t turn = 1; lines.size() < 5000; ++turn) {
    emit(ev::TurnStarted{turn, std::nullopt}, false);
    if (rng.chance(60)) emit(ev::Thinking{prose(rng, rng.between(200, 1200)), "req_" + std::to_string(turn)}, true);
    emit(ev::Text{prose(rng, rng.between(80, 900)), "req_" + std::to_string(turn)}, true);
    emit(ev::Usage{"req_" + std::to_string(turn), std::string("model-opus-4"), usage_of(rng)}, true);
    for (std::size_t call = 0, n = rng.between(1, 4); call < n; ++call) {
      std::string id = call_id(++calls);
      ev::ToolRequested requested;
      requested.call_id = id;
      requested.input = tool_input(rng, requested.name);
      requested.operations = {requested.name == "Bash" ? "shell" : "file.write"};
      requested.decision_required = rng.chance(30);
      if (requested.decision_required) requested.deadline_ms = 55000;
      requested.seam = Seam::hook;
      emit(requested, true);
      ev::ToolDecided decided;
      decided.call_id = id;
      decided.seam = Seam::hook;
      if (rng.chance(15)) {
        decided.decision =
            decision::Deny{"this step admits no " + requested.name + "; a refusal is the answer, not an obstacle"};
        decided.decided_by = DecidedBy::frame;
        emit(decided, false);
        continue;
      }
      decided.decision = decision::Allow{};
      decided.decided_by = requested.decision_required ? DecidedBy::embedder : DecidedBy::frame;
      if (requested.decision_required) decided.latency_ms = rng.between(5, 3000);
      emit(decided, false);
      if (requested.decision_required)
        emit(ev::CommandResult{"c" + std::to_string(calls), CommandOutcome::ok()}, false);
      ev::ToolResult result;
      result.call_id = id;
      result.is_error = rng.chance(10);
      result.content = tool_output(rng);
      result.bytes = result.content.is_string() ? result.content.get_string().size() : 0;
      result.tool_use_result = json::object{{"stdout", prose(rng, 120)}, {"stderr", ""}, {"interrupted", false}};
      emit(result, true);
    }
    if (rng.chance(5)) {
      ev::Opaque opaque;
      opaque.vendor_type = "system";
      opaque.vendor_subtype = "compact_boundary";
      opaque.digest = std::string(64, 'a');
      opaque.source_line = seq;
      emit(opaque, true);
    }
    if (rng.chance(3)) emit(ev::Warning{"UNCOVERED_TOOL", "NotebookEdit is outside the operation vocabulary"}, false);
    if (rng.chance(4)) {
      emit(ev::RateLimit{RateLimitInfo{std::string("allowed"), std::string("five_hour"), 1767225600,
                                       static_cast<double>(rng.below(1000)) / 1000.0, false}},
           true);
    }
    emit(ev::TurnEnded{turn, std::string("tool_use")}, false);
  }

  ev::SessionEnded ended;
  ended.is_error = false;
  ended.subtype = "success";
  ended.num_turns = 120;
  ended.total_cost_usd = 4.2375;
  ended.usage = usage_of(rng);
  ended.census.allowed = static_cast<std::uint32_t>(calls);
  ended.census.by_seam["hook"] = static_cast<std::uint32_t>(calls);
  emit(ended, true);
  ev::StreamClosed closed;
  closed.events = seq;
  closed.reason = CloseReason::completed;
  closed.run_id = "bench-run";
  emit(closed, false);
  return lines;
}

struct Corpus {
  std::vector<std::string> lines;
  std::int64_t bytes = 0;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus out;
    out.lines = generate_stream(0x6d657461);
    for (const auto& line : out.lines) {
      out.bytes += static_cast<std::int64_t>(line.size());
      // The lines are the typed layer's own output, so they must survive it unchanged.
      auto read = read_event_line(line);
      if (!read || serialize(*read) != line) {
        std::fprintf(stderr, "generated line does not round-trip: %s\n", line.substr(0, 200).c_str());
        std::abort();
      }
    }
    return out;
  }();
  return c;
}

void report(benchmark::State& state) {
  const Corpus& c = corpus();
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(c.lines.size()));
  state.SetBytesProcessed(state.iterations() * c.bytes);
  state.counters["lines"] = static_cast<double>(c.lines.size());
  state.counters["avg_line_bytes"] = static_cast<double>(c.bytes) / static_cast<double>(c.lines.size());
}

// Every line of the corpus through `per_line`, once per iteration; then the corpus's counters.
template <class PerLine>
void over_corpus(benchmark::State& state, PerLine per_line) {
  const Corpus& c = corpus();
  for (auto _ : state)
    for (const auto& line : c.lines)
      per_line(line);
  report(state);
}

// Typed: read_event_line + serialize, every line.
void BM_Typed_ReadAndSerialize(benchmark::State& state) {
  over_corpus(state, [](const std::string& line) {
    std::string out = serialize(*read_event_line(line));
    benchmark::DoNotOptimize(out.data());
  });
}

// Raw: boost::json::parse + boost::json::serialize, every line.
void BM_Raw_BoostJsonParseAndSerialize(benchmark::State& state) {
  over_corpus(state, [](const std::string& line) {
    std::string out = json::serialize(json::parse(line));
    benchmark::DoNotOptimize(out.data());
  });
}

// The two halves of the typed path, for profiling.
void BM_Typed_ReadOnly(benchmark::State& state) {
  over_corpus(state, [](const std::string& line) {
    auto event = read_event_line(line);
    benchmark::DoNotOptimize(&event);
  });
}

void BM_Typed_SerializeOnly(benchmark::State& state) {
  const Corpus& c = corpus();
  std::vector<Event> events;
  events.reserve(c.lines.size());
  for (const auto& line : c.lines)
    events.push_back(*read_event_line(line));
  for (auto _ : state) {
    for (const auto& e : events) {
      std::string out = serialize(e);
      benchmark::DoNotOptimize(out.data());
    }
  }
  report(state);
}

// One event kind at a time: the corpus's lines of that kind, read (read_event_line) or written
// (serialize, from events read once). The time is per pass over those lines; `lines` says how
// many, so time / lines is the cost of one line. The three commonest events on a governed run.
struct Kind {
  std::vector<std::string> lines;
  std::vector<Event> events;
  std::int64_t bytes = 0;
};

const Kind& kind(std::string_view name) {
  static std::map<std::string, Kind, std::less<>> kinds;
  auto it = kinds.find(name);
  if (it != kinds.end()) return it->second;
  Kind k;
  for (const auto& line : corpus().lines) {
    auto event = read_event_line(line);
    if (event_name(event->payload) != name) continue;
    k.lines.push_back(line);
    k.events.push_back(std::move(*event));
    k.bytes += static_cast<std::int64_t>(line.size());
  }
  return kinds.emplace(std::string(name), std::move(k)).first->second;
}

void report_kind(benchmark::State& state, const Kind& k) {
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(k.lines.size()));
  state.SetBytesProcessed(state.iterations() * k.bytes);
  state.counters["lines"] = static_cast<double>(k.lines.size());
  state.counters["ns_per_line"] = benchmark::Counter(
      static_cast<double>(k.lines.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Event_Read(benchmark::State& state, std::string_view name) {
  const Kind& k = kind(name);
  for (auto _ : state) {
    for (const auto& line : k.lines) {
      auto event = read_event_line(line);
      benchmark::DoNotOptimize(&event);
    }
  }
  report_kind(state, k);
}

void BM_Event_Write(benchmark::State& state, std::string_view name) {
  const Kind& k = kind(name);
  std::string out;
  for (auto _ : state) {
    for (const auto& e : k.events) {
      out.clear();
      serialize_to(out, e);
      benchmark::DoNotOptimize(out.data());
    }
  }
  report_kind(state, k);
}

BENCHMARK(BM_Typed_ReadAndSerialize)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Raw_BoostJsonParseAndSerialize)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Typed_ReadOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Typed_SerializeOnly)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Event_Read, tool_requested, "tool.requested")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Event_Write, tool_requested, "tool.requested")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Event_Read, text, "text")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Event_Write, text, "text")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Event_Read, command_result, "command.result")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Event_Write, command_result, "command.result")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mh::protocol

BENCHMARK_MAIN();
