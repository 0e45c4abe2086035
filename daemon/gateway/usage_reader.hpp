// Reads a model answer's own usage as it passes through the gateway, without holding the answer:
// an SSE stream is split into events across whatever chunk boundaries the upstream chose, and only
// the events that carry usage are kept and parsed; a JSON answer is kept up to a bound and parsed
// at its end.
//   Anthropic: message_start (message.usage, message.model), message_delta (usage.output_tokens),
//              message_stop (complete); a JSON answer's usage and model.
//   OpenAI:    response.completed (response.usage, response.model; complete), response.failed and
//              response.incomplete (usage, not complete); a JSON answer's usage, model and status.
//   Gemini:    every `data:` chunk (no event names) is a GenerateContentResponse: its
//              usageMetadata (the last one stands), modelVersion, and a candidate's finishReason
//              (complete); an `error` chunk leaves it incomplete. A JSON answer: one response or
//              an array of them.
#pragma once

#include <boost/json/value.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "daemon/gateway/gateway.hpp"

namespace mh::gateway {

class UsageReader {
 public:
  enum class Body { sse, json, other };
  // `content_type`: the answer's Content-Type, which says how to read it.
  UsageReader(Wire wire, std::string_view content_type);

  void feed(std::string_view bytes);
  // The answer's body has ended: parses a JSON answer, flushes a last SSE event.
  void finish();

  // What was read so far (request and status are the caller's).
  const RequestUsage& usage() const { return usage_; }
  Body body() const { return body_; }

  // Bounds on what is kept: one SSE line / event's data, and a whole JSON answer. Past them the
  // event (or answer) is not read for usage; the bytes still pass through untouched.
  static constexpr std::size_t kMaxEventBytes = 8u << 20;
  static constexpr std::size_t kMaxJsonBytes = 8u << 20;

 private:
  void line(std::string_view text);
  void dispatch();
  void read_event(std::string_view name, std::string_view data);
  void read_json_answer(std::string_view text);
  void read_gemini_response(const boost::json::value& response);

  Wire wire_;
  Body body_;
  RequestUsage usage_;
  std::string partial_line_;
  bool line_overflow_ = false;
  std::string event_name_;
  std::string event_data_;
  bool event_overflow_ = false;
  std::string json_;
  bool json_overflow_ = false;
  bool saw_gemini_error_ = false;
};

}  // namespace mh::gateway
