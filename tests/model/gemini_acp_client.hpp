// A minimal ACP client over a LiveProcess's stdio, for the real Gemini CLI tests
// (tests/model/gemini_cli_test.cpp, tests/gateway/gemini_through_gateway_test.cpp): requests
// answered in order, every wait bounded; session/request_permission answered allow_once for the
// first call and reject_once after; any other agent request refused.
#pragma once

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include "tests/model/process_support.hpp"

namespace mh::model::testing {

// The Gemini CLI to test: $MH_GEMINI_CLI, else .vendor/node_modules/.bin/gemini when present.
inline std::optional<std::filesystem::path> gemini_cli() {
  if (const char* env = std::getenv("MH_GEMINI_CLI"); env && *env) return std::filesystem::path(env);
  const std::filesystem::path vendored = std::filesystem::path(MH_SOURCE_DIR) / ".vendor/node_modules/.bin/gemini";
  if (std::filesystem::exists(vendored)) return vendored;
  return std::nullopt;
}

inline constexpr const char* kGeminiCliMissing =
    "the Gemini CLI is missing: set MH_GEMINI_CLI to its `gemini` or install @google/gemini-cli@0.61.0 so that "
    ".vendor/node_modules/.bin/gemini exists";

// A bounded ACP conversation over the CLI's stdio.
class AcpClient {
 public:
  explicit AcpClient(LiveProcess& process) : process_(process) {}

  // Sends a request and reads until its answer, answering permission requests on the way.
  std::optional<boost::json::value> call(std::string_view method, boost::json::object params) {
    const std::int64_t id = ++next_id_;
    boost::json::object request{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
    if (!process_.write_line(boost::json::serialize(request))) return std::nullopt;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      auto line = process_.read_line(std::chrono::seconds(120));
      if (!line) return std::nullopt;
      boost::system::error_code ec;
      boost::json::value message = boost::json::parse(*line, ec);
      if (ec || !message.is_object()) continue;  // the CLI's own stdout noise, if any
      const boost::json::object& m = message.get_object();
      if (m.contains("method") && m.contains("id")) {
        answer(m);
        continue;
      }
      if (const boost::json::value* got = m.if_contains("id"); got && got->is_int64() && got->get_int64() == id)
        return message;
    }
    return std::nullopt;
  }
  int permissions_asked = 0;

 private:
  void answer(const boost::json::object& m) {
    boost::json::object reply{{"jsonrpc", "2.0"}, {"id", m.at("id")}};
    if (m.at("method") == "session/request_permission") {
      ++permissions_asked;
      const char* wanted = permissions_asked == 1 ? "allow_once" : "reject_once";
      boost::json::object outcome{{"outcome", "cancelled"}};
      for (const auto& option : m.at("params").at("options").as_array())
        if (option.at("kind") == wanted) outcome = {{"outcome", "selected"}, {"optionId", option.at("optionId")}};
      reply["result"] = boost::json::object{{"outcome", std::move(outcome)}};
    } else {
      reply["error"] = boost::json::object{{"code", -32601}, {"message", "not offered by this client"}};
    }
    process_.write_line(boost::json::serialize(reply));
  }
  LiveProcess& process_;
  std::int64_t next_id_ = 0;
};

}  // namespace mh::model::testing
