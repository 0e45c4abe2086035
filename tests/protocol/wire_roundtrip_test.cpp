// Every payload type of the wire, full form: the bytes written equal the golden lines captured
// from the writers as they were before the writers were derived from the type descriptions
// (golden/full_wire.jsonl, one line per sample in wire_samples.hpp order), and reading a line back
// gives the value that was written, field by field.
#include <gtest/gtest.h>

#include <boost/describe/members.hpp>
#include <boost/mp11/algorithm.hpp>
#include <fstream>
#include <map>
#include <set>

#include "protocol/reader.hpp"
#include "protocol/wire_codec.hpp"
#include "wire_samples.hpp"

namespace mh::protocol {
namespace {

using wire::is_name_map;
using wire::is_optional;
using wire::is_vector;
template <class T>
struct is_variant : std::false_type {};
template <class... A>
struct is_variant<std::variant<A...>> : std::true_type {};

// The path of the first field where a and b differ, or "" when they are equal. Described structs
// are compared member by member, so a member one side drops is named here.
template <class T>
std::string difference(const T& a, const T& b, const std::string& path) {
  if constexpr (boost::describe::has_describe_members<T>::value) {
    std::string diff;
    boost::mp11::mp_for_each<boost::describe::describe_members<T, boost::describe::mod_public>>([&](auto d) {
      if (diff.empty()) diff = difference(a.*d.pointer, b.*d.pointer, path + "." + d.name);
    });
    return diff;
  } else if constexpr (is_optional<T>::value) {
    if (a.has_value() != b.has_value()) return path + " (set on one side only)";
    return a ? difference(*a, *b, path) : "";
  } else if constexpr (is_vector<T>::value) {
    if (a.size() != b.size()) return path + " (sizes differ)";
    for (std::size_t i = 0; i < a.size(); ++i)
      if (auto d = difference(a[i], b[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
    return "";
  } else if constexpr (is_name_map<T>::value) {
    if (a.size() != b.size()) return path + " (sizes differ)";
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
      if (ia->first != ib->first) return path + " (keys differ)";
      if (auto d = difference(ia->second, ib->second, path + "." + ia->first); !d.empty()) return d;
    }
    return "";
  } else if constexpr (is_variant<T>::value) {
    if (a.index() != b.index()) return path + " (alternatives differ)";
    return std::visit([&](const auto& x) { return difference(x, std::get<std::decay_t<decltype(x)>>(b), path); }, a);
  } else if constexpr (std::is_same_v<T, decision::Allow> || std::is_same_v<T, decision::Abstain>) {
    return "";
  } else if constexpr (std::is_same_v<T, decision::Deny>) {
    return a.reason == b.reason ? "" : path + ".reason";
  } else if constexpr (std::is_same_v<T, decision::Replace>) {
    return a.input == b.input ? "" : path + ".input";
  } else if constexpr (std::is_same_v<T, StepOutcome>) {
    return a.kind == b.kind && a.reason == b.reason ? "" : path;
  } else if constexpr (std::is_same_v<T, CommandOutcome>) {
    bool same = a.applies_at == b.applies_at && a.refusal.has_value() == b.refusal.has_value() &&
                (!a.refusal || (a.refusal->code == b.refusal->code && a.refusal->reason == b.refusal->reason));
    return same ? "" : path;
  } else if constexpr (std::is_same_v<T, ProcessTermination>) {
    return a.kind == b.kind && a.code == b.code && a.signal == b.signal ? "" : path;
  } else if constexpr (std::is_same_v<T, Frame>) {
    return frame_to_json(a) == frame_to_json(b) ? "" : path;
  } else {
    return a == b ? "" : path;
  }
}

std::vector<std::string> golden_lines() {
  std::ifstream in(MH_PROTOCOL_GOLDEN_DIR "/full_wire.jsonl");
  EXPECT_TRUE(in) << "cannot open " << MH_PROTOCOL_GOLDEN_DIR "/full_wire.jsonl";
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

std::vector<Event> all_events() {
  std::vector<Event> out;
  for (const auto& s : samples::full_events())
    out.push_back(s.build());
  for (auto& e : samples::full_extras())
    out.push_back(std::move(e));
  return out;
}

TEST(WireRoundTrip, TheSamplesCoverEveryEventAndEveryCommand) {
  std::set<std::string_view> events;
  for (const auto& e : all_events())
    events.insert(event_name(e.payload));
  EXPECT_EQ(events.size(), kEventCount);
  std::set<std::size_t> commands;
  for (const auto& s : samples::full_commands())
    commands.insert(s.build().payload.index());
  EXPECT_EQ(commands.size(), kCommandCount);
  EXPECT_EQ(golden_lines().size(), all_events().size() + samples::full_commands().size());
}

TEST(WireRoundTrip, EveryEventWritesTheGoldenBytesAndReadsBackToTheSameValue) {
  const auto golden = golden_lines();
  const auto events = all_events();
  ASSERT_GE(golden.size(), events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    std::string line = serialize(events[i]);
    EXPECT_EQ(line, golden[i]) << "sample " << i << " (" << event_name(events[i].payload) << ")";
    auto read = read_event_line(line);
    ASSERT_TRUE(read) << read.error().message << "\n" << line;
    EXPECT_EQ(read->seq, events[i].seq);
    EXPECT_EQ(read->run, events[i].run);
    EXPECT_EQ(read->at, events[i].at);
    EXPECT_EQ(read->recorded_at, events[i].recorded_at);
    EXPECT_EQ(difference(read->cut, events[i].cut, "cut"), "");
    EXPECT_EQ(difference(read->payload, events[i].payload, std::string(event_name(events[i].payload))), "");
  }
}

TEST(WireRoundTrip, EveryCommandWritesTheGoldenBytesAndReadsBackToTheSameValue) {
  const auto golden = golden_lines();
  const auto commands = samples::full_commands();
  const std::size_t first = all_events().size();
  ASSERT_EQ(golden.size(), first + commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    Command c = commands[i].build();
    std::string line = serialize(c);
    EXPECT_EQ(line, golden[first + i]) << commands[i].label;
    auto read = read_command_line(line);
    ASSERT_TRUE(read) << read.error().message << "\n" << line;
    EXPECT_EQ(read->id, c.id);
    EXPECT_EQ(difference(read->payload, c.payload, commands[i].label), "");
  }
}

}  // namespace
}  // namespace mh::protocol
