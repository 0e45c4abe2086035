// Internal to mh_model: turns a scenario step (as one wire sees it) into the exact HTTP answer
// that wire's clients expect, with no I/O. The server only paces and writes what this returns,
// so every byte a CLI receives can be checked here without a socket.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/model/scenario.hpp"

namespace mh::model::detail {

struct SseEvent {
  std::string name;  // `event:` line
  std::string data;  // `data:` line: compact JSON
};

// The whole answer to one request. Streaming answers are split where the scenario's hold
// happens: content first, then (after the hold) the final events.
struct Reply {
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // content-type included
  bool streaming = false;
  std::string body;                      // non-streaming
  std::vector<SseEvent> content_events;  // streaming: before the hold
  std::vector<SseEvent> final_events;    // streaming: after the hold
  bool disconnect_after_hold = false;    // Finish::disconnect: close instead of finishing
};

struct RenderContext {
  std::uint64_t sequence = 0;   // the served request's sequence number; seeds generated ids
  std::string model;            // echoed from the request (or a stand-in)
  bool stream = false;          // the request asked for SSE
  std::int64_t created_at = 0;  // Responses `created_at` (unix seconds)
};

Reply render_step(Wire wire, const StepForm& form, const RenderContext& context);
// An error answer in the wire's shape (the step's scripted errors and the endpoint's own
// refusals: bad token, bad JSON, ...).
Reply render_error(Wire wire, const HttpError& error, std::uint64_t sequence);
// For requests whose wire is unknown (unknown path): a body both client families can read
// (`error.type` and `error.message`).
Reply render_neutral_error(unsigned status, std::string_view type, std::string_view message, std::uint64_t sequence);

// One SSE frame as written on the wire: "event: NAME\ndata: JSON\n\n" ("data: JSON\n\n" for a
// nameless event).
std::string sse_frame(const SseEvent& event);
// `text` cut into pieces of at most `max_bytes` bytes without splitting a UTF-8 sequence;
// 0 = one piece. An empty text gives no pieces.
std::vector<std::string> split_utf8(std::string_view text, std::size_t max_bytes);

}  // namespace mh::model::detail
