#include "daemon/model/wire_render.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cstdio>
#include <optional>

namespace mh::model::detail {

namespace json = boost::json;

namespace {

std::string padded(std::uint64_t n) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%04llu", static_cast<unsigned long long>(n));
  return buffer;
}

// Generated ids: deterministic for a deterministic request order, unique per endpoint.
std::string id_for(std::string_view prefix, std::uint64_t sequence) {
  return std::string(prefix) + "_mh_" + padded(sequence);
}
std::string id_for(std::string_view prefix, std::uint64_t sequence, std::size_t index) {
  return id_for(prefix, sequence) + "_" + std::to_string(index);
}

std::string request_id(std::uint64_t sequence) {
  return id_for("req", sequence);
}

bool has_tool_call(const StepForm& form) {
  for (const Block& b : form.content)
    if (b.kind == Block::Kind::tool_call || b.kind == Block::Kind::custom_tool_call) return true;
  return false;
}

std::string signature_of(const Block& block, std::uint64_t sequence, std::size_t index) {
  return block.signature.empty() ? id_for("sig", sequence, index) : block.signature;
}

// ---------------------------------------------------------------------------------------------
// Error shapes
// ---------------------------------------------------------------------------------------------

struct ErrorDefaults {
  std::string_view anthropic_type;
  std::string_view anthropic_message;
  std::string_view openai_type;
  std::string_view openai_code;  // empty = null
  std::string_view openai_message;
};

// The answer each status gets unless the scenario words its own, per wire.
struct StatusDefaults {
  unsigned status;
  ErrorDefaults defaults;
};
constexpr StatusDefaults kErrorDefaults[] = {
    {400, {"invalid_request_error", "invalid request", "invalid_request_error", "", "Invalid request."}},
    {401,
     {"authentication_error", "invalid x-api-key", "invalid_request_error", "invalid_api_key",
      "Incorrect API key provided."}},
    {403,
     {"permission_error", "Your API key does not have permission to use the specified resource.", "permission_error",
      "", "You are not allowed to sample from this model."}},
    {404, {"not_found_error", "Not found", "invalid_request_error", "not_found", "Not found."}},
    {405, {"invalid_request_error", "Method not allowed", "invalid_request_error", "", "Method not allowed."}},
    {413,
     {"request_too_large", "Request exceeds the maximum allowed number of bytes.", "invalid_request_error",
      "request_too_large", "Request too large."}},
    {415,
     {"invalid_request_error", "Unsupported content encoding", "invalid_request_error", "",
      "Unsupported content encoding."}},
    {429,
     {"rate_limit_error", "Number of requests has exceeded your rate limit", "requests", "rate_limit_exceeded",
      "Rate limit reached. Please try again later."}},
    {431,
     {"invalid_request_error", "Request headers too large", "invalid_request_error", "", "Request headers too large."}},
    {500,
     {"api_error", "Internal server error", "server_error", "",
      "The server had an error while processing your request."}},
    {529,
     {"overloaded_error", "Overloaded", "server_error", "overloaded",
      "The engine is currently overloaded, please try again later."}},
};

ErrorDefaults defaults_for(unsigned status) {
  for (const auto& row : kErrorDefaults)
    if (row.status == status) return row.defaults;
  if (status >= 500) return {"api_error", "Internal server error", "server_error", "", "Server error."};
  return {"invalid_request_error", "invalid request", "invalid_request_error", "", "Invalid request."};
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages API
// ---------------------------------------------------------------------------------------------

json::object anthropic_usage(const Usage& u, std::uint64_t output_tokens) {
  return json::object{{"input_tokens", u.input_tokens},
                      {"cache_creation_input_tokens", u.cache_creation_input_tokens},
                      {"cache_read_input_tokens", u.cached_input_tokens},
                      {"output_tokens", output_tokens}};
}

std::string anthropic_stop_reason(const StepForm& form) {
  if (form.stop_reason) return *form.stop_reason;
  return has_tool_call(form) ? "tool_use" : "end_turn";
}

std::string tool_use_id(const Block& block, std::uint64_t sequence, std::size_t index) {
  return block.id.empty() ? id_for("toolu", sequence, index) : block.id;
}

json::object anthropic_block(const Block& block, std::uint64_t sequence, std::size_t index) {
  switch (block.kind) {
    case Block::Kind::text:
      return {{"type", "text"}, {"text", block.text}};
    case Block::Kind::thinking:
      return {{"type", "thinking"}, {"thinking", block.text}, {"signature", signature_of(block, sequence, index)}};
    case Block::Kind::tool_call:
    case Block::Kind::custom_tool_call:  // refused at load for this wire; kept total
      return {{"type", "tool_use"},
              {"id", tool_use_id(block, sequence, index)},
              {"name", block.name},
              {"input", block.input}};
  }
  return {};
}

void add_event(std::vector<SseEvent>& events, json::object data) {
  std::string name(data.at("type").as_string());
  events.push_back({std::move(name), json::serialize(data)});
}

Reply anthropic_reply(const StepForm& form, const RenderContext& ctx) {
  Reply reply;
  reply.headers.emplace_back("request-id", request_id(ctx.sequence));
  const std::string message_id = id_for("msg", ctx.sequence);
  const std::string stop_reason = anthropic_stop_reason(form);

  if (!ctx.stream) {
    if (form.finish == Finish::disconnect) {
      reply.disconnect_after_hold = true;
      return reply;
    }
    if (form.finish == Finish::stream_error) return render_error(Wire::anthropic, HttpError{}, ctx.sequence);
    json::array content;
    for (std::size_t i = 0; i < form.content.size(); ++i)
      content.push_back(anthropic_block(form.content[i], ctx.sequence, i));
    json::object message{{"id", message_id},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", ctx.model},
                         {"content", std::move(content)},
                         {"stop_reason", stop_reason},
                         {"stop_sequence", nullptr},
                         {"usage", anthropic_usage(form.usage, form.usage.output_tokens)}};
    reply.headers.emplace_back("content-type", "application/json");
    reply.body = json::serialize(message);
    return reply;
  }

  reply.streaming = true;
  reply.headers.emplace_back("content-type", "text/event-stream; charset=utf-8");
  reply.headers.emplace_back("cache-control", "no-cache");
  auto& events = reply.content_events;
  add_event(events, {{"type", "message_start"},
                     {"message",
                      {{"id", message_id},
                       {"type", "message"},
                       {"role", "assistant"},
                       {"model", ctx.model},
                       {"content", json::array{}},
                       {"stop_reason", nullptr},
                       {"stop_sequence", nullptr},
                       {"usage", anthropic_usage(form.usage, 1)}}}});
  for (std::size_t i = 0; i < form.content.size(); ++i) {
    const Block& block = form.content[i];
    const auto index = static_cast<std::uint64_t>(i);
    auto delta = [&](json::object d) {
      add_event(events, {{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(d)}});
    };
    switch (block.kind) {
      case Block::Kind::text:
        add_event(
            events,
            {{"type", "content_block_start"}, {"index", index}, {"content_block", {{"type", "text"}, {"text", ""}}}});
        for (const std::string& piece : split_utf8(block.text, form.delta_bytes))
          delta({{"type", "text_delta"}, {"text", piece}});
        break;
      case Block::Kind::thinking:
        add_event(events, {{"type", "content_block_start"},
                           {"index", index},
                           {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
        for (const std::string& piece : split_utf8(block.text, form.delta_bytes))
          delta({{"type", "thinking_delta"}, {"thinking", piece}});
        delta({{"type", "signature_delta"}, {"signature", signature_of(block, ctx.sequence, i)}});
        break;
      case Block::Kind::tool_call:
      case Block::Kind::custom_tool_call:
        add_event(events, {{"type", "content_block_start"},
                           {"index", index},
                           {"content_block",
                            {{"type", "tool_use"},
                             {"id", tool_use_id(block, ctx.sequence, i)},
                             {"name", block.name},
                             {"input", json::object{}}}}});
        for (const std::string& piece : split_utf8(json::serialize(block.input), form.delta_bytes))
          delta({{"type", "input_json_delta"}, {"partial_json", piece}});
        break;
    }
    add_event(events, {{"type", "content_block_stop"}, {"index", index}});
  }

  switch (form.finish) {
    case Finish::complete:
      add_event(reply.final_events, {{"type", "message_delta"},
                                     {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", nullptr}}},
                                     {"usage", anthropic_usage(form.usage, form.usage.output_tokens)}});
      add_event(reply.final_events, {{"type", "message_stop"}});
      break;
    case Finish::stream_error:
      add_event(reply.final_events,
                {{"type", "error"}, {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}});
      break;
    case Finish::disconnect:
      reply.disconnect_after_hold = true;
      break;
  }
  return reply;
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses API
// ---------------------------------------------------------------------------------------------

json::object responses_usage(const Usage& u) {
  return json::object{{"input_tokens", u.input_tokens},
                      {"input_tokens_details", {{"cached_tokens", u.cached_input_tokens}}},
                      {"output_tokens", u.output_tokens},
                      {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
                      {"total_tokens", u.input_tokens + u.output_tokens}};
}

struct ItemIds {
  std::string item_id;
  std::string call_id;
};

ItemIds responses_ids(const Block& block, std::uint64_t sequence, std::size_t index) {
  switch (block.kind) {
    case Block::Kind::text:
      return {id_for("msg", sequence, index), {}};
    case Block::Kind::thinking:
      return {id_for("rs", sequence, index), {}};
    case Block::Kind::tool_call:
      return {id_for("fc", sequence, index), block.id.empty() ? id_for("call", sequence, index) : block.id};
    case Block::Kind::custom_tool_call:
      return {id_for("ctc", sequence, index), block.id.empty() ? id_for("call", sequence, index) : block.id};
  }
  return {};
}

json::object output_text_part(std::string_view text) {
  return {{"type", "output_text"}, {"annotations", json::array{}}, {"text", text}};
}

// The item as it looks when complete (output_item.done, response.output) or just opened
// (output_item.added: empty text / arguments / input, status in_progress).
json::object responses_item(const Block& block, std::uint64_t sequence, std::size_t index, bool complete) {
  const ItemIds ids = responses_ids(block, sequence, index);
  const char* status = complete ? "completed" : "in_progress";
  switch (block.kind) {
    case Block::Kind::text: {
      json::array content;
      if (complete) content.push_back(output_text_part(block.text));
      return {{"id", ids.item_id},
              {"type", "message"},
              {"status", status},
              {"role", "assistant"},
              {"content", std::move(content)}};
    }
    case Block::Kind::thinking: {
      json::array summary;
      if (complete) summary.push_back({{"type", "summary_text"}, {"text", block.text}});
      json::object item{{"id", ids.item_id}, {"type", "reasoning"}, {"summary", std::move(summary)}};
      if (complete) item["encrypted_content"] = signature_of(block, sequence, index);
      return item;
    }
    case Block::Kind::tool_call: {
      json::object item{{"id", ids.item_id},  {"type", "function_call"},
                        {"status", status},   {"call_id", ids.call_id},
                        {"name", block.name}, {"arguments", complete ? json::serialize(block.input) : std::string()}};
      // A function of a namespace tool names its namespace beside its own name.
      if (!block.tool_namespace.empty()) item["namespace"] = block.tool_namespace;
      return item;
    }
    case Block::Kind::custom_tool_call:
      return {{"id", ids.item_id},  {"type", "custom_tool_call"},
              {"status", status},   {"call_id", ids.call_id},
              {"name", block.name}, {"input", complete ? std::string(block.input.as_string()) : std::string()}};
  }
  return {};
}

json::object response_object(const StepForm& form, const RenderContext& ctx, std::string_view status,
                             bool with_output) {
  json::array output;
  if (with_output)
    for (std::size_t i = 0; i < form.content.size(); ++i)
      output.push_back(responses_item(form.content[i], ctx.sequence, i, true));
  json::object r{{"id", id_for("resp", ctx.sequence)},
                 {"object", "response"},
                 {"created_at", ctx.created_at},
                 {"status", status},
                 {"model", ctx.model},
                 {"output", std::move(output)},
                 {"error", nullptr},
                 {"incomplete_details", nullptr},
                 {"usage", nullptr}};
  if (status == "completed") r["usage"] = responses_usage(form.usage);
  return r;
}

// {"type": type, <where...>, <extra...>}: the events about one part of one item share `where`.
json::object event_at(std::string_view type, const json::object& where, json::object extra) {
  json::object event{{"type", type}};
  for (const auto& kv : where)
    event[kv.key()] = kv.value();
  for (const auto& kv : extra)
    event[kv.key()] = kv.value();
  return event;
}

Reply responses_reply(const StepForm& form, const RenderContext& ctx) {
  Reply reply;
  reply.headers.emplace_back("x-request-id", request_id(ctx.sequence));

  if (!ctx.stream) {
    if (form.finish == Finish::disconnect) {
      reply.disconnect_after_hold = true;
      return reply;
    }
    if (form.finish == Finish::stream_error) return render_error(Wire::responses, HttpError{}, ctx.sequence);
    reply.headers.emplace_back("content-type", "application/json");
    reply.body = json::serialize(response_object(form, ctx, "completed", true));
    return reply;
  }

  reply.streaming = true;
  reply.headers.emplace_back("content-type", "text/event-stream; charset=utf-8");
  reply.headers.emplace_back("cache-control", "no-cache");
  std::uint64_t sequence_number = 0;
  auto emit = [&](std::vector<SseEvent>& events, json::object data) {
    data["sequence_number"] = sequence_number++;
    add_event(events, std::move(data));
  };
  auto& events = reply.content_events;
  // A piece of output streamed as `<kind>.delta` events, form.delta_bytes at a time, then whole in
  // `<kind>.done` under `whole_key`.
  auto deltas_then_done = [&](std::string_view kind, const json::object& where, std::string_view whole,
                              std::string_view whole_key) {
    for (const std::string& piece : split_utf8(whole, form.delta_bytes))
      emit(events, event_at(std::string(kind) + ".delta", where, {{"delta", piece}}));
    emit(events, event_at(std::string(kind) + ".done", where, {{whole_key, whole}}));
  };
  emit(events, {{"type", "response.created"}, {"response", response_object(form, ctx, "in_progress", false)}});
  emit(events, {{"type", "response.in_progress"}, {"response", response_object(form, ctx, "in_progress", false)}});

  for (std::size_t i = 0; i < form.content.size(); ++i) {
    const Block& block = form.content[i];
    const auto output_index = static_cast<std::uint64_t>(i);
    const std::string item_id = responses_ids(block, ctx.sequence, i).item_id;
    emit(events, {{"type", "response.output_item.added"},
                  {"output_index", output_index},
                  {"item", responses_item(block, ctx.sequence, i, false)}});
    switch (block.kind) {
      case Block::Kind::text: {
        const json::object where{{"item_id", item_id}, {"output_index", output_index}, {"content_index", 0}};
        emit(events, event_at("response.content_part.added", where, {{"part", output_text_part("")}}));
        deltas_then_done("response.output_text", where, block.text, "text");
        emit(events, event_at("response.content_part.done", where, {{"part", output_text_part(block.text)}}));
        break;
      }
      case Block::Kind::thinking: {
        const json::object where{{"item_id", item_id}, {"output_index", output_index}, {"summary_index", 0}};
        emit(events, event_at("response.reasoning_summary_part.added", where,
                              {{"part", {{"type", "summary_text"}, {"text", ""}}}}));
        deltas_then_done("response.reasoning_summary_text", where, block.text, "text");
        emit(events, event_at("response.reasoning_summary_part.done", where,
                              {{"part", {{"type", "summary_text"}, {"text", block.text}}}}));
        break;
      }
      case Block::Kind::tool_call: {
        const json::object where{{"item_id", item_id}, {"output_index", output_index}};
        deltas_then_done("response.function_call_arguments", where, json::serialize(block.input), "arguments");
        break;
      }
      case Block::Kind::custom_tool_call: {
        const json::object where{{"item_id", item_id}, {"output_index", output_index}};
        deltas_then_done("response.custom_tool_call_input", where, block.input.as_string(), "input");
        break;
      }
    }
    emit(events, {{"type", "response.output_item.done"},
                  {"output_index", output_index},
                  {"item", responses_item(block, ctx.sequence, i, true)}});
  }

  switch (form.finish) {
    case Finish::complete:
      emit(reply.final_events,
           {{"type", "response.completed"}, {"response", response_object(form, ctx, "completed", true)}});
      break;
    case Finish::stream_error: {
      json::object failed = response_object(form, ctx, "failed", true);
      failed["error"] = {{"code", "server_error"}, {"message", "metaharness: scripted stream failure"}};
      emit(reply.final_events, {{"type", "response.failed"}, {"response", std::move(failed)}});
      break;
    }
    case Finish::disconnect:
      reply.disconnect_after_hold = true;
      break;
  }
  return reply;
}

// ---------------------------------------------------------------------------------------------
// Gemini API (generateContent / streamGenerateContent?alt=sse)
// ---------------------------------------------------------------------------------------------

// Gemini's error `status` (a google.rpc.Code name) for an HTTP status.
std::string_view gemini_status(unsigned status) {
  switch (status) {
    case 400:
    case 413:
    case 415:
    case 431:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 405:
      return "UNIMPLEMENTED";
    case 409:
      return "ABORTED";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 501:
      return "UNIMPLEMENTED";
    case 503:
    case 529:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
  }
}

std::string_view gemini_message(unsigned status) {
  switch (status) {
    case 401:
      return "Request had invalid authentication credentials. Expected a valid API key.";
    case 429:
      return "Resource has been exhausted (e.g. check quota).";
    case 500:
      return "An internal error has occurred. Please retry or report in "
             "https://developers.generativeai.google/guide/troubleshooting";
    case 503:
    case 529:
      return "The model is overloaded. Please try again later.";
    default:
      return defaults_for(status).openai_message;
  }
}

json::object gemini_error_object(const HttpError& error) {
  return {{"error",
           {{"code", error.status},
            {"message", error.message.empty() ? gemini_message(error.status) : std::string_view(error.message)},
            {"status", error.type.empty() ? gemini_status(error.status) : std::string_view(error.type)}}}};
}

std::string_view gemini_finish_reason(const StepForm& form) {
  const std::string reason = anthropic_stop_reason(form);
  if (reason == "max_tokens" || reason == "model_context_window_exceeded") return "MAX_TOKENS";
  if (reason == "refusal") return "SAFETY";
  return "STOP";
}

// promptTokenCount counts the cached tokens too (cachedContentTokenCount says how many of them);
// totalTokenCount = prompt + candidates + thoughts, as the API reports it.
json::object gemini_usage(const Usage& u, bool final) {
  json::object usage{{"promptTokenCount", u.input_tokens}};
  if (final) {
    usage["candidatesTokenCount"] = u.output_tokens;
    usage["totalTokenCount"] = u.input_tokens + u.output_tokens + u.reasoning_tokens;
  } else {
    usage["totalTokenCount"] = u.input_tokens;
  }
  if (u.cached_input_tokens > 0) usage["cachedContentTokenCount"] = u.cached_input_tokens;
  if (final && u.reasoning_tokens > 0) usage["thoughtsTokenCount"] = u.reasoning_tokens;
  return usage;
}

// The parts one block becomes; streamed, text is cut into delta_bytes pieces (one part each).
json::array gemini_parts(const Block& block, const StepForm& form, std::uint64_t sequence, std::size_t index,
                         bool split) {
  json::array parts;
  switch (block.kind) {
    case Block::Kind::text:
    case Block::Kind::thinking: {
      const bool thought = block.kind == Block::Kind::thinking;
      std::vector<std::string> pieces =
          split ? split_utf8(block.text, form.delta_bytes) : std::vector<std::string>{block.text};
      if (pieces.empty()) pieces.emplace_back();
      for (std::size_t p = 0; p < pieces.size(); ++p) {
        json::object part{{"text", pieces[p]}};
        if (thought) {
          part["thought"] = true;
          if (p + 1 == pieces.size()) part["thoughtSignature"] = signature_of(block, sequence, index);
        }
        parts.push_back(std::move(part));
      }
      break;
    }
    case Block::Kind::tool_call:
    case Block::Kind::custom_tool_call: {  // custom_tool_call is refused at load for this wire
      // The Gemini API gives a functionCall no id of its own (the CLI makes one up); the scenario
      // may give one, and then it is sent.
      json::object call{{"name", block.name}, {"args", block.input}};
      if (!block.id.empty()) call["id"] = block.id;
      parts.push_back(json::object{{"functionCall", std::move(call)}});
      break;
    }
  }
  return parts;
}

json::object gemini_response(json::array parts, std::optional<std::string_view> finish_reason, json::object usage,
                             const RenderContext& ctx) {
  json::object candidate{{"content", {{"role", "model"}, {"parts", std::move(parts)}}}, {"index", 0}};
  if (finish_reason) candidate["finishReason"] = *finish_reason;
  return {{"candidates", json::array{std::move(candidate)}},
          {"usageMetadata", std::move(usage)},
          {"modelVersion", ctx.model},
          {"responseId", id_for("resp", ctx.sequence)}};
}

Reply gemini_reply(const StepForm& form, const RenderContext& ctx) {
  Reply reply;
  reply.headers.emplace_back("x-request-id", request_id(ctx.sequence));
  if (!ctx.stream) {
    if (form.finish == Finish::disconnect) {
      reply.disconnect_after_hold = true;
      return reply;
    }
    if (form.finish == Finish::stream_error) return render_error(Wire::gemini, HttpError{}, ctx.sequence);
    json::array parts;
    for (std::size_t i = 0; i < form.content.size(); ++i)
      for (auto& part : gemini_parts(form.content[i], form, ctx.sequence, i, false))
        parts.push_back(std::move(part));
    reply.headers.emplace_back("content-type", "application/json; charset=UTF-8");
    reply.body = json::serialize(
        gemini_response(std::move(parts), gemini_finish_reason(form), gemini_usage(form.usage, true), ctx));
    return reply;
  }

  // SSE as the API sends it with alt=sse: `data:` lines only (no event names), one
  // GenerateContentResponse per chunk; the last chunk carries finishReason and the whole
  // usageMetadata (the one a meter reads).
  reply.streaming = true;
  reply.headers.emplace_back("content-type", "text/event-stream");
  reply.headers.emplace_back("cache-control", "no-cache");
  for (std::size_t i = 0; i < form.content.size(); ++i)
    for (auto& part : gemini_parts(form.content[i], form, ctx.sequence, i, true))
      reply.content_events.push_back({"", json::serialize(gemini_response(json::array{std::move(part)}, std::nullopt,
                                                                          gemini_usage(form.usage, false), ctx))});
  switch (form.finish) {
    case Finish::complete:
      // The finishing chunk holds an empty text part: the shape the API sends when the
      // content is already out.
      reply.final_events.push_back(
          {"", json::serialize(gemini_response(json::array{json::object{{"text", ""}}}, gemini_finish_reason(form),
                                               gemini_usage(form.usage, true), ctx))});
      break;
    case Finish::stream_error: {
      HttpError error;
      reply.final_events.push_back({"", json::serialize(gemini_error_object(error))});
      break;
    }
    case Finish::disconnect:
      reply.disconnect_after_hold = true;
      break;
  }
  return reply;
}

}  // namespace

Reply render_step(Wire wire, const StepForm& form, const RenderContext& context) {
  if (form.error) return render_error(wire, *form.error, context.sequence);
  switch (wire) {
    case Wire::anthropic:
      return anthropic_reply(form, context);
    case Wire::responses:
      return responses_reply(form, context);
    case Wire::gemini:
      return gemini_reply(form, context);
  }
  return responses_reply(form, context);
}

Reply render_error(Wire wire, const HttpError& error, std::uint64_t sequence) {
  const ErrorDefaults d = defaults_for(error.status);
  Reply reply;
  reply.status = error.status;
  json::object body;
  if (wire == Wire::anthropic) {
    reply.headers.emplace_back("request-id", request_id(sequence));
    body = {{"type", "error"},
            {"error",
             {{"type", error.type.empty() ? d.anthropic_type : std::string_view(error.type)},
              {"message", error.message.empty() ? d.anthropic_message : std::string_view(error.message)}}}};
  } else if (wire == Wire::gemini) {
    reply.headers.emplace_back("x-request-id", request_id(sequence));
    body = gemini_error_object(error);
  } else {
    reply.headers.emplace_back("x-request-id", request_id(sequence));
    const std::string_view code = error.code.empty() ? d.openai_code : std::string_view(error.code);
    json::value code_value = code.empty() ? json::value(nullptr) : json::value(code);
    body = {{"error",
             {{"message", error.message.empty() ? d.openai_message : std::string_view(error.message)},
              {"type", error.type.empty() ? d.openai_type : std::string_view(error.type)},
              {"param", nullptr},
              {"code", std::move(code_value)}}}};
  }
  reply.headers.emplace_back("content-type", "application/json");
  if (error.retry_after_s) reply.headers.emplace_back("retry-after", std::to_string(*error.retry_after_s));
  if (error.retry_after_ms) reply.headers.emplace_back("retry-after-ms", std::to_string(*error.retry_after_ms));
  for (const auto& h : error.headers)
    reply.headers.push_back(h);
  reply.body = json::serialize(body);
  return reply;
}

Reply render_neutral_error(unsigned status, std::string_view type, std::string_view message, std::uint64_t sequence) {
  Reply reply;
  reply.status = status;
  reply.headers.emplace_back("request-id", request_id(sequence));
  reply.headers.emplace_back("x-request-id", request_id(sequence));
  reply.headers.emplace_back("content-type", "application/json");
  reply.body = json::serialize(json::object{
      {"type", "error"}, {"error", {{"type", type}, {"message", message}, {"param", nullptr}, {"code", nullptr}}}});
  return reply;
}

std::string sse_frame(const SseEvent& event) {
  std::string frame;
  frame.reserve(event.name.size() + event.data.size() + 16);
  // A nameless event is a bare `data:` line (Gemini's alt=sse stream has no event names).
  if (!event.name.empty()) frame.append("event: ").append(event.name).append("\n");
  frame.append("data: ").append(event.data).append("\n\n");
  return frame;
}

std::vector<std::string> split_utf8(std::string_view text, std::size_t max_bytes) {
  std::vector<std::string> pieces;
  if (text.empty()) return pieces;
  if (max_bytes == 0 || text.size() <= max_bytes) {
    pieces.emplace_back(text);
    return pieces;
  }
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = std::min(text.size(), at + max_bytes);
    // Never cut inside a UTF-8 sequence; a piece holds at least one whole character.
    while (end < text.size() && end > at && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
      --end;
    if (end == at) {
      end = at + 1;
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
        ++end;
    }
    pieces.emplace_back(text.substr(at, end - at));
    at = end;
  }
  return pieces;
}

}  // namespace mh::model::detail
