#include "daemon/gateway/usage_reader.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cctype>

namespace mh::gateway {

namespace json = boost::json;

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const json::value* at_path(const json::value& root, std::initializer_list<std::string_view> path) {
  const json::value* v = &root;
  for (std::string_view key : path) {
    const json::object* object = v->if_object();
    if (!object) return nullptr;
    v = object->if_contains(key);
    if (!v) return nullptr;
  }
  return v;
}

std::optional<std::uint64_t> count_at(const json::value& root, std::initializer_list<std::string_view> path) {
  const json::value* v = at_path(root, path);
  if (!v) return std::nullopt;
  if (const auto* u = v->if_uint64()) return *u;
  if (const auto* i = v->if_int64(); i && *i >= 0) return static_cast<std::uint64_t>(*i);
  return std::nullopt;
}

void take(std::optional<std::uint64_t>& into, std::optional<std::uint64_t> value) {
  if (value) into = value;
}

void take_model(std::string& into, const json::value& root, std::initializer_list<std::string_view> path) {
  if (const json::value* v = at_path(root, path); v && v->is_string()) into = std::string(v->get_string());
}

std::optional<json::value> parse_bounded(std::string_view text) {
  json::parse_options options;
  options.max_depth = 256;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec, {}, options);
  if (ec) return std::nullopt;
  return v;
}

}  // namespace

UsageReader::UsageReader(Wire wire, std::string_view content_type) : wire_(wire) {
  const std::string type = lower(content_type);
  if (type.starts_with("text/event-stream"))
    body_ = Body::sse;
  else if (type.find("json") != std::string::npos)
    body_ = Body::json;
  else
    body_ = Body::other;
}

void UsageReader::feed(std::string_view bytes) {
  if (body_ == Body::json) {
    if (json_overflow_) return;
    if (json_.size() + bytes.size() > kMaxJsonBytes) {
      json_overflow_ = true;
      json_.clear();
      json_.shrink_to_fit();
      return;
    }
    json_.append(bytes);
    return;
  }
  if (body_ != Body::sse) return;
  // Lines end at \n (a \r before it is dropped in line()); a lone \r as a line end is not used by
  // either wire's servers.
  while (!bytes.empty()) {
    const std::size_t end = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, end);
    if (!line_overflow_) {
      if (partial_line_.size() + piece.size() > kMaxEventBytes) {
        line_overflow_ = true;
        partial_line_.clear();
      } else {
        partial_line_.append(piece);
      }
    }
    if (end == std::string_view::npos) return;
    if (line_overflow_) {
      event_overflow_ = true;  // the event that line belonged to is not read
      line_overflow_ = false;
    } else {
      line(partial_line_);
    }
    partial_line_.clear();
    bytes.remove_prefix(end + 1);
  }
}

void UsageReader::line(std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.empty()) {
    dispatch();
    return;
  }
  if (text.front() == ':') return;  // a comment (keep-alive)
  const std::size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    event_name_ = std::string(value);
  } else if (field == "data" && !event_overflow_) {
    if (event_data_.size() + value.size() + 1 > kMaxEventBytes) {
      event_overflow_ = true;
      event_data_.clear();
      return;
    }
    if (!event_data_.empty()) event_data_.push_back('\n');
    event_data_.append(value);
  }
}

void UsageReader::dispatch() {
  if (!event_overflow_ && !event_data_.empty()) read_event(event_name_, event_data_);
  event_name_.clear();
  event_data_.clear();
  event_overflow_ = false;
}

// One GenerateContentResponse (an SSE chunk, or a JSON answer or an element of one): its
// usageMetadata is cumulative, so the last one read stands. promptTokenCount counts the cached
// tokens too (cachedContentTokenCount says how many); thoughts are billed as output, so
// output = candidatesTokenCount + thoughtsTokenCount. A finishReason ends the answer; an
// `error` object (a stream broken off by the API) leaves it incomplete.
void UsageReader::read_gemini_response(const json::value& response) {
  if (at_path(response, {"error"})) {
    usage_.complete = false;
    saw_gemini_error_ = true;
    return;
  }
  take_model(usage_.model, response, {"modelVersion"});
  if (at_path(response, {"usageMetadata"})) {
    take(usage_.input_tokens, count_at(response, {"usageMetadata", "promptTokenCount"}));
    take(usage_.cache_read_tokens, count_at(response, {"usageMetadata", "cachedContentTokenCount"}));
    const auto candidates = count_at(response, {"usageMetadata", "candidatesTokenCount"});
    const auto thoughts = count_at(response, {"usageMetadata", "thoughtsTokenCount"});
    if (candidates || thoughts) usage_.output_tokens = candidates.value_or(0) + thoughts.value_or(0);
  }
  if (const json::value* candidates = at_path(response, {"candidates"}); candidates && candidates->is_array())
    for (const json::value& candidate : candidates->get_array())
      if (const json::value* reason = at_path(candidate, {"finishReason"}); reason && reason->is_string())
        usage_.complete = !saw_gemini_error_;
}

void UsageReader::read_event(std::string_view name, std::string_view data) {
  if (wire_ == Wire::gemini) {
    // alt=sse: nameless `data:` chunks, each a whole GenerateContentResponse. Every chunk is
    // parsed: the usage rides on the content chunks too, and the last one is not marked.
    if (auto parsed = parse_bounded(data)) read_gemini_response(*parsed);
    return;
  }
  // Only the events that carry usage or the end are parsed: the deltas, most of the bytes, pass.
  auto interesting = [&](std::string_view n) {
    if (wire_ == Wire::anthropic)
      return n == "message_start" || n == "message_delta" || n == "message_stop" || n == "error";
    return n == "response.completed" || n == "response.failed" || n == "response.incomplete" || n == "error" ||
           n == "response.created";
  };
  if (!name.empty() && !interesting(name)) return;
  auto parsed = parse_bounded(data);
  if (!parsed) return;
  std::string type(name);
  if (const json::value* t = at_path(*parsed, {"type"}); t && t->is_string()) type = std::string(t->get_string());
  if (!interesting(type)) return;

  if (wire_ == Wire::anthropic) {
    if (type == "message_start") {
      take_model(usage_.model, *parsed, {"message", "model"});
      take(usage_.input_tokens, count_at(*parsed, {"message", "usage", "input_tokens"}));
      take(usage_.cache_read_tokens, count_at(*parsed, {"message", "usage", "cache_read_input_tokens"}));
      take(usage_.cache_creation_tokens, count_at(*parsed, {"message", "usage", "cache_creation_input_tokens"}));
      take(usage_.output_tokens, count_at(*parsed, {"message", "usage", "output_tokens"}));
    } else if (type == "message_delta") {
      // Cumulative counts: the last one stands. Newer servers repeat the input counts here too.
      take(usage_.output_tokens, count_at(*parsed, {"usage", "output_tokens"}));
      take(usage_.input_tokens, count_at(*parsed, {"usage", "input_tokens"}));
      take(usage_.cache_read_tokens, count_at(*parsed, {"usage", "cache_read_input_tokens"}));
      take(usage_.cache_creation_tokens, count_at(*parsed, {"usage", "cache_creation_input_tokens"}));
    } else if (type == "message_stop") {
      usage_.complete = true;
    } else if (type == "error") {
      usage_.complete = false;
    }
    return;
  }
  if (type == "response.created") {
    take_model(usage_.model, *parsed, {"response", "model"});
    return;
  }
  if (type == "error") return;
  take_model(usage_.model, *parsed, {"response", "model"});
  take(usage_.input_tokens, count_at(*parsed, {"response", "usage", "input_tokens"}));
  take(usage_.output_tokens, count_at(*parsed, {"response", "usage", "output_tokens"}));
  take(usage_.cache_read_tokens, count_at(*parsed, {"response", "usage", "input_tokens_details", "cached_tokens"}));
  usage_.complete = type == "response.completed";
}

void UsageReader::finish() {
  if (body_ == Body::sse) {
    if (!partial_line_.empty() && !line_overflow_) line(partial_line_);
    partial_line_.clear();
    dispatch();
    return;
  }
  if (body_ == Body::json && !json_overflow_) read_json_answer(json_);
  json_.clear();
}

void UsageReader::read_json_answer(std::string_view text) {
  auto parsed = parse_bounded(text);
  if (!parsed) return;
  if (wire_ == Wire::gemini) {
    // generateContent answers one response; streamGenerateContent without alt=sse a JSON array of
    // them.
    if (const json::array* chunks = parsed->if_array())
      for (const json::value& chunk : *chunks)
        read_gemini_response(chunk);
    else
      read_gemini_response(*parsed);
    return;
  }
  take_model(usage_.model, *parsed, {"model"});
  if (wire_ == Wire::anthropic) {
    take(usage_.input_tokens, count_at(*parsed, {"usage", "input_tokens"}));
    take(usage_.output_tokens, count_at(*parsed, {"usage", "output_tokens"}));
    take(usage_.cache_read_tokens, count_at(*parsed, {"usage", "cache_read_input_tokens"}));
    take(usage_.cache_creation_tokens, count_at(*parsed, {"usage", "cache_creation_input_tokens"}));
    const json::value* type = at_path(*parsed, {"type"});
    usage_.complete = type && type->is_string() && type->get_string() == "message";
    return;
  }
  take(usage_.input_tokens, count_at(*parsed, {"usage", "input_tokens"}));
  take(usage_.output_tokens, count_at(*parsed, {"usage", "output_tokens"}));
  take(usage_.cache_read_tokens, count_at(*parsed, {"usage", "input_tokens_details", "cached_tokens"}));
  const json::value* status = at_path(*parsed, {"status"});
  usage_.complete = status && status->is_string() && status->get_string() == "completed";
}

}  // namespace mh::gateway
