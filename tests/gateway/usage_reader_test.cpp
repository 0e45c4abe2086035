// Usage read from answers as they pass: SSE split at every possible chunk boundary, the JSON
// answers, and the bounds.
#include "daemon/gateway/usage_reader.hpp"

#include <gtest/gtest.h>

namespace mh::gateway {
namespace {

const std::string kAnthropicStream =
    "event: message_start\r\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-x\",\"usage\":"
    "{\"input_tokens\":120,\"cache_read_input_tokens\":40,\"cache_creation_input_tokens\":7,\"output_tokens\":1}}}\r\n"
    "\r\n"
    ": keep-alive comment\n\n"
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
    "event: message_delta\n"
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":33}}\n\n"
    "event: message_stop\n"
    "data: {\"type\":\"message_stop\"}\n\n";

const std::string kResponsesStream =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-x\",\"usage\":null}}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-x\",\"status\":\"completed\",\"usage\":"
    "{\"input_tokens\":200,\"input_tokens_details\":{\"cached_tokens\":150},\"output_tokens\":50}}}\n\n";

void expect_anthropic(const RequestUsage& u) {
  EXPECT_EQ(u.model, "claude-x");
  EXPECT_EQ(u.input_tokens, 120u);
  EXPECT_EQ(u.cache_read_tokens, 40u);
  EXPECT_EQ(u.cache_creation_tokens, 7u);
  EXPECT_EQ(u.output_tokens, 33u);
  EXPECT_TRUE(u.complete);
}

void expect_responses(const RequestUsage& u) {
  EXPECT_EQ(u.model, "gpt-x");
  EXPECT_EQ(u.input_tokens, 200u);
  EXPECT_EQ(u.cache_read_tokens, 150u);
  EXPECT_EQ(u.output_tokens, 50u);
  EXPECT_TRUE(u.complete);
}

TEST(UsageReader, AnthropicStreamAtEverySplit) {
  for (std::size_t cut = 0; cut <= kAnthropicStream.size(); ++cut) {
    UsageReader reader(Wire::anthropic, "text/event-stream; charset=utf-8");
    reader.feed(std::string_view(kAnthropicStream).substr(0, cut));
    reader.feed(std::string_view(kAnthropicStream).substr(cut));
    reader.finish();
    SCOPED_TRACE(cut);
    expect_anthropic(reader.usage());
  }
}

TEST(UsageReader, AnthropicStreamByteByByte) {
  UsageReader reader(Wire::anthropic, "text/event-stream");
  for (char c : kAnthropicStream)
    reader.feed(std::string_view(&c, 1));
  reader.finish();
  expect_anthropic(reader.usage());
}

TEST(UsageReader, AnthropicStreamCutBeforeStopIsIncomplete) {
  UsageReader reader(Wire::anthropic, "text/event-stream");
  reader.feed(kAnthropicStream.substr(0, kAnthropicStream.find("event: message_stop")));
  reader.finish();
  EXPECT_EQ(reader.usage().input_tokens, 120u);
  EXPECT_EQ(reader.usage().output_tokens, 33u);
  EXPECT_FALSE(reader.usage().complete);
}

TEST(UsageReader, ResponsesStreamAtEverySplit) {
  for (std::size_t cut = 0; cut <= kResponsesStream.size(); ++cut) {
    UsageReader reader(Wire::openai_responses, "text/event-stream");
    reader.feed(std::string_view(kResponsesStream).substr(0, cut));
    reader.feed(std::string_view(kResponsesStream).substr(cut));
    reader.finish();
    SCOPED_TRACE(cut);
    expect_responses(reader.usage());
  }
}

TEST(UsageReader, ResponsesFailedHasUsageButIsNotComplete) {
  UsageReader reader(Wire::openai_responses, "text/event-stream");
  reader.feed(
      "data: {\"type\":\"response.failed\",\"response\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3,"
      "\"output_tokens\":0}}}\n\n");
  reader.finish();
  EXPECT_EQ(reader.usage().input_tokens, 3u);
  EXPECT_FALSE(reader.usage().complete);
}

TEST(UsageReader, JsonAnswers) {
  UsageReader anthropic(Wire::anthropic, "application/json");
  const std::string a =
      R"({"type":"message","model":"claude-x","usage":{"input_tokens":120,"cache_read_input_tokens":40,)"
      R"("cache_creation_input_tokens":7,"output_tokens":33}})";
  anthropic.feed(a.substr(0, 10));
  anthropic.feed(a.substr(10));
  anthropic.finish();
  expect_anthropic(anthropic.usage());

  UsageReader responses(Wire::openai_responses, "application/json; charset=utf-8");
  responses.feed(R"({"object":"response","status":"completed","model":"gpt-x","usage":{"input_tokens":200,)"
                 R"("input_tokens_details":{"cached_tokens":150},"output_tokens":50}})");
  responses.finish();
  expect_responses(responses.usage());

  UsageReader error(Wire::anthropic, "application/json");
  error.feed(R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})");
  error.finish();
  EXPECT_FALSE(error.usage().complete);
  EXPECT_FALSE(error.usage().input_tokens);
}

// As the Gemini API (and the scripted endpoint) stream with alt=sse: bare data lines, usage on
// every chunk, the whole of it on the last, with the finishReason.
const std::string kGeminiStream =
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"hi\"}]},\"index\":0}],"
    "\"usageMetadata\":{\"promptTokenCount\":200,\"totalTokenCount\":200},\"modelVersion\":\"gemini-x\"}\r\n\r\n"
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"ls\","
    "\"args\":{}}}]},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":200,\"totalTokenCount\":200}}\r\n\r\n"
    "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\"}]},\"finishReason\":"
    "\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":200,\"candidatesTokenCount\":50,"
    "\"cachedContentTokenCount\":150,\"thoughtsTokenCount\":12,\"totalTokenCount\":262},"
    "\"modelVersion\":\"gemini-x\"}\r\n\r\n";

TEST(UsageReader, GeminiStreamAtEverySplit) {
  for (std::size_t split = 0; split <= kGeminiStream.size(); ++split) {
    UsageReader reader(Wire::gemini, "text/event-stream");
    reader.feed(std::string_view(kGeminiStream).substr(0, split));
    reader.feed(std::string_view(kGeminiStream).substr(split));
    reader.finish();
    const RequestUsage& u = reader.usage();
    SCOPED_TRACE(split);
    EXPECT_EQ(u.model, "gemini-x");
    EXPECT_EQ(u.input_tokens, 200u);
    EXPECT_EQ(u.cache_read_tokens, 150u);
    EXPECT_EQ(u.output_tokens, 62u) << "thoughts are billed as output";
    EXPECT_TRUE(u.complete);
  }
}

TEST(UsageReader, GeminiStreamWithoutFinishOrEndingInAnErrorIsIncomplete) {
  const std::string first_two = kGeminiStream.substr(0, kGeminiStream.rfind("data: "));
  UsageReader cut(Wire::gemini, "text/event-stream");
  cut.feed(first_two);
  cut.finish();
  EXPECT_EQ(cut.usage().input_tokens, 200u);
  EXPECT_FALSE(cut.usage().output_tokens);
  EXPECT_FALSE(cut.usage().complete);

  UsageReader broken(Wire::gemini, "text/event-stream");
  broken.feed(first_two);
  broken.feed("data: {\"error\":{\"code\":500,\"message\":\"x\",\"status\":\"INTERNAL\"}}\n\n");
  broken.finish();
  EXPECT_FALSE(broken.usage().complete);
}

TEST(UsageReader, GeminiJsonAnswersOneOrAnArray) {
  const std::string one =
      "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]},\"finishReason\":\"MAX_TOKENS\"}],"
      "\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":4,\"totalTokenCount\":13},"
      "\"modelVersion\":\"gemini-y\"}";
  UsageReader single(Wire::gemini, "application/json; charset=UTF-8");
  single.feed(one);
  single.finish();
  EXPECT_EQ(single.usage().model, "gemini-y");
  EXPECT_EQ(single.usage().input_tokens, 9u);
  EXPECT_EQ(single.usage().output_tokens, 4u);
  EXPECT_TRUE(single.usage().complete);

  // streamGenerateContent without alt=sse answers a JSON array of chunks.
  UsageReader array(Wire::gemini, "application/json");
  array.feed(
      "[{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],\"usageMetadata\":"
      "{\"promptTokenCount\":9}}," +
      one + "]");
  array.finish();
  EXPECT_EQ(array.usage().input_tokens, 9u);
  EXPECT_EQ(array.usage().output_tokens, 4u);
  EXPECT_TRUE(array.usage().complete);
}

TEST(UsageReader, HostileInputIsBoundedAndIgnored) {
  UsageReader reader(Wire::anthropic, "text/event-stream");
  // A line longer than the bound, then garbage, then a real event: only the real one counts.
  reader.feed("data: ");
  reader.feed(std::string(UsageReader::kMaxEventBytes + 10, 'x'));
  reader.feed("\n\nevent: message_start\ndata: {not json\n\n");
  reader.feed("event: message_start\ndata: [1,2]\n\n");
  reader.feed(kAnthropicStream);
  reader.finish();
  expect_anthropic(reader.usage());

  UsageReader big(Wire::openai_responses, "application/json");
  big.feed(std::string(UsageReader::kMaxJsonBytes + 1, ' '));
  big.feed(R"({"status":"completed","usage":{"input_tokens":1}})");
  big.finish();
  EXPECT_FALSE(big.usage().input_tokens);  // past the bound: not read, still passed through
}

}  // namespace
}  // namespace mh::gateway
