// One side of a JSON-RPC-over-JSONL conversation with a real vendor CLI (a LiveProcess's stdio),
// for the tests that speak a CLI's own wire to it without metaharness in between (Codex's
// app-server, ACP agents). Every line read is kept, in order, so a test can say what the CLI said
// and what it did not say; every wait is bounded by a deadline and ends on a line the test names
// (or the CLI's end), never on time alone.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/model/process_support.hpp"

namespace mh::model::testing {

class RpcPeer {
 public:
  using Clock = std::chrono::steady_clock;
  // `jsonrpc`: stamp "jsonrpc":"2.0" on what we send (ACP does; Codex's app-server has no such field).
  RpcPeer(LiveProcess& process, bool jsonrpc) : process_(process), jsonrpc_(jsonrpc) {}

  // Sends a request; returns its id.
  std::int64_t request(std::string_view method, boost::json::object params) {
    const std::int64_t id = ++next_id_;
    boost::json::object line{{"method", method}, {"id", id}, {"params", std::move(params)}};
    send(std::move(line));
    return id;
  }
  void notify(std::string_view method, std::optional<boost::json::object> params = std::nullopt) {
    boost::json::object line{{"method", method}};
    if (params) line["params"] = std::move(*params);
    send(std::move(line));
  }

  // Reads lines until one satisfies `wanted` (returned, and kept like every other) or the CLI's
  // stdout ends or `timeout` passes (nullopt). Lines that are not JSON objects are kept as text only.
  std::optional<boost::json::object> read_until(const std::function<bool(const boost::json::object&)>& wanted,
                                                std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!ended_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      auto line = process_.read_line(left);
      if (!line) {
        // read_line says nullopt for both the end and the bound: which one, the clock tells.
        if (Clock::now() < deadline) ended_ = true;
        return std::nullopt;
      }
      transcript_.push_back("<- " + *line);
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(*line, ec);
      if (ec || !v.is_object()) continue;
      read_.push_back(v.as_object());
      if (wanted(read_.back())) return read_.back();
    }
    return std::nullopt;
  }
  // The answer to request `id` (a line with that id and no method).
  std::optional<boost::json::object> answer_to(std::int64_t id, std::chrono::milliseconds timeout) {
    return read_until(
        [id](const boost::json::object& o) {
          const boost::json::value* got = o.if_contains("id");
          return !o.contains("method") && got && got->is_int64() && got->get_int64() == id;
        },
        timeout);
  }
  // The first line (a request or a notification) with this method.
  std::optional<boost::json::object> message(std::string_view method, std::chrono::milliseconds timeout) {
    return read_until([method](const boost::json::object& o) { return is(o, method); }, timeout);
  }
  // Everything left, to the CLI's end of stdout; true when the end came within the bound.
  bool read_to_end(std::chrono::milliseconds timeout) {
    read_until([](const boost::json::object&) { return false; }, timeout);
    return ended_;
  }

  // Every JSON object the CLI wrote so far, in order.
  const std::vector<boost::json::object>& read() const { return read_; }
  // Those with this method.
  std::vector<boost::json::object> read(std::string_view method) const {
    std::vector<boost::json::object> out;
    for (const auto& o : read_)
      if (is(o, method)) out.push_back(o);
    return out;
  }
  // Both directions as lines ("-> " what we sent, "<- " what the CLI wrote), for a failure's message.
  std::string transcript() const {
    std::string out;
    for (const auto& l : transcript_)
      out += l.substr(0, 2000) + "\n";
    return out;
  }

  static bool is(const boost::json::object& o, std::string_view method) {
    const boost::json::value* m = o.if_contains("method");
    return m && m->is_string() && m->get_string() == method;
  }

 private:
  void send(boost::json::object line) {
    if (jsonrpc_) line["jsonrpc"] = "2.0";
    std::string text = boost::json::serialize(line);
    transcript_.push_back("-> " + text);
    process_.write_line(text);
  }

  LiveProcess& process_;
  bool jsonrpc_;
  std::int64_t next_id_ = 0;
  bool ended_ = false;
  std::vector<boost::json::object> read_;
  std::vector<std::string> transcript_;
};

}  // namespace mh::model::testing
