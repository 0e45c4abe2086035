// What an adapter session's outputs said, by kind: the run loop's side for the tests that drive
// one session (or client) line by line with no process and no clock. Each test reads the kinds it
// asserts on; the recorder keeps every kind, in the order the session returned them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "adapters/adapter.hpp"
#include "adapters/session.hpp"
#include "protocol/json.hpp"

namespace mh::test {

struct OutputRecorder {
  struct Presented {
    adapters::ToolCall call;
    std::optional<adapters::ReplyToken> reply;  // set when the vendor waits for the answer
  };
  std::vector<protocol::EventPayload> events;  // a cut event stands here whole; its cut in `cuts`
  std::vector<std::vector<protocol::CutField>> cuts;
  std::vector<Presented> calls;
  std::vector<boost::json::object> written;  // what the session wrote to the vendor's stdin
  std::vector<adapters::ReplyToken> withdrawn;
  std::vector<adapters::ControlReply> controls;
  std::vector<std::pair<std::uint64_t, std::string>> hook_replies;  // (connection, line)
  std::vector<std::string> turns;                                   // "started" / "ended:<reason>"
  std::vector<std::string> failures;
  std::vector<adapters::out::PostureReported> postures;
  int ready = 0;

  void take(adapters::AdapterOutputs& outputs) {
    for (auto& output : outputs.take())
      std::visit([&](auto& o) { one(o); }, output);
  }

  // One input's outputs, taken in when the full expression that made them ends.
  struct Feed {
    OutputRecorder& into;
    adapters::AdapterOutputs outputs;
    operator adapters::AdapterOutputs&() { return outputs; }
    ~Feed() { into.take(outputs); }
  };
  Feed in() { return Feed{*this, {}}; }

  template <class T>
  std::vector<T> of() const {
    std::vector<T> found;
    for (const auto& e : events)
      if (auto* t = std::get_if<T>(&e)) found.push_back(*t);
    return found;
  }
  const boost::json::object& last_written() const { return written.back(); }

 private:
  void one(adapters::out::Event& o) { events.push_back(std::move(o.payload)); }
  void one(adapters::out::EventCut& o) {
    events.push_back(std::move(o.payload));
    cuts.push_back(std::move(o.cut));
  }
  void one(adapters::out::CallPresented& o) { calls.push_back({std::move(o.call), std::nullopt}); }
  void one(adapters::out::CallAwaitsAnswer& o) { calls.push_back({std::move(o.call), std::move(o.reply)}); }
  void one(adapters::out::CallWithdrawn& o) { withdrawn.push_back(std::move(o.reply)); }
  void one(adapters::out::ControlAnswered& o) { controls.push_back(std::move(o.reply)); }
  void one(adapters::out::TurnStarted&) { turns.push_back("started"); }
  void one(adapters::out::TurnEnded& o) { turns.push_back("ended:" + o.stop_reason.value_or("")); }
  void one(adapters::out::WriteVendor& o) {
    auto v = protocol::parse_json(o.line);
    ASSERT_TRUE(v && v->is_object()) << o.line;
    written.push_back(v->as_object());
  }
  void one(adapters::out::ReplyHook& o) { hook_replies.emplace_back(o.connection, std::move(o.line)); }
  void one(adapters::out::SessionReady&) { ++ready; }
  void one(adapters::out::FailRun& o) { failures.push_back(std::move(o.reason)); }
  void one(adapters::out::PostureReported& o) { postures.push_back(std::move(o)); }
};

}  // namespace mh::test
