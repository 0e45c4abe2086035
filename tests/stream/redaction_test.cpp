// No secret in the record (issue 25 section 4): a value the run must never write is replaced by
// `[redacted:NAME]` in events.jsonl before the line is written, in its JSON-escaped forms too, and
// the line stays within its bound.
#include "daemon/stream/redactor.hpp"
#include "protocol/completeness.hpp"
#include "protocol/json.hpp"
#include "stream_test_support.hpp"

namespace mh::daemon::test {
namespace {

const std::string kKey = "sk-ant-api03-THE-REAL-KEY-0123456789";
const std::string kPlaceholder = "mh-run-placeholder-aaaabbbbcccc";

EventLogOptions redacting() {
  EventLogOptions options;
  options.redactions = {{"ANTHROPIC_API_KEY", kKey}, {"placeholder", kPlaceholder}, {"SHORT", "abc"}};
  return options;
}

TEST(Redaction, AVendorLineThatEchoesTheKeyOrThePlaceholderNeverReachesEventsJsonlInClear) {
  TempDir dir;
  auto log = make_log(dir, "run-r", redacting());
  protocol::ev::Text text;
  text.text = "env says ANTHROPIC_API_KEY=" + kKey + " and the token " + kPlaceholder + "; abc stays";
  ASSERT_TRUE(log.append(text));
  protocol::ev::Warning warning{"X", "twice: " + kKey + kKey};
  ASSERT_TRUE(log.append(warning));
  ASSERT_TRUE(log.close(protocol::CloseReason::completed, {}));
  auto file = read_file(dir.events());
  EXPECT_EQ(file.find(kKey), std::string::npos) << file;
  EXPECT_EQ(file.find(kPlaceholder), std::string::npos) << file;
  EXPECT_NE(file.find("ANTHROPIC_API_KEY=[redacted:ANTHROPIC_API_KEY]"), std::string::npos) << file;
  EXPECT_NE(file.find("[redacted:placeholder]"), std::string::npos) << file;
  EXPECT_NE(file.find("[redacted:ANTHROPIC_API_KEY][redacted:ANTHROPIC_API_KEY]"), std::string::npos) << file;
  EXPECT_NE(file.find("abc stays"), std::string::npos) << "a value shorter than kMinRedactedBytes is left";
  // Still a well-formed, complete stream.
  auto verdict = protocol::check_stream(file);
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.first_bad_reason;
}

TEST(Redaction, ASecretWithCharactersJsonEscapesIsFoundAsTheLineHoldsIt) {
  const std::string secret = "pa\"ss\\word\n-0123";  // written as pa\"ss\\word\n-0123
  TempDir dir;
  EventLogOptions options;
  options.redactions = {{"DB PASSWORD", secret}};
  auto log = make_log(dir, "run-e", options);
  protocol::ev::Text once;
  once.text = "got " + secret;
  ASSERT_TRUE(log.append(once));
  // A vendor's JSON line carried as a string: the secret escaped twice in the events line.
  std::string inner;
  protocol::JsonWriter w(inner);
  w.string(secret);
  protocol::ev::Text twice;
  twice.text = "{\"env\":" + inner + "}";
  ASSERT_TRUE(log.append(twice));
  ASSERT_TRUE(log.release());
  auto file = read_file(dir.events());
  EXPECT_EQ(file.find("pa\\\"ss"), std::string::npos) << file;
  EXPECT_EQ(file.find("pa\\\\\\\"ss"), std::string::npos) << file;
  EXPECT_EQ(file.find("word"), std::string::npos) << file;
  EXPECT_NE(file.find("got [redacted:DB_PASSWORD]"), std::string::npos) << file;
  EXPECT_NE(file.find("{\\\"env\\\":\\\"[redacted:DB_PASSWORD]\\\"}"), std::string::npos) << file;
  auto verdict = protocol::check_stream(file);
  EXPECT_EQ(verdict.first_bad_reason, "") << file;
}

TEST(Redaction, ALineTheMarkersLengthenIsCutAgainToItsBound) {
  TempDir dir;
  EventLogOptions options;
  options.max_line_bytes = protocol::kMinEventLineBytes;
  const std::string secret = "s3cr3t-8";  // 8 bytes, marker 40: each occurrence grows by 32
  options.redactions = {{"A_RATHER_LONG_SECRET_NAME", secret}};
  auto log = make_log(dir, "run-b", options);
  protocol::ev::Text text;
  for (std::size_t i = 0; text.text.size() + secret.size() < options.max_line_bytes; ++i)
    text.text += secret;
  ASSERT_TRUE(log.append(text));
  ASSERT_TRUE(log.release());
  auto file = read_file(dir.events());
  ASSERT_FALSE(file.empty());
  EXPECT_LE(file.size() - 1, options.max_line_bytes) << "the line keeps its bound";
  EXPECT_EQ(file.find(secret), std::string::npos);
  auto line = protocol::read_event_line(std::string_view(file).substr(0, file.size() - 1));
  ASSERT_TRUE(line) << line.error().message;
  EXPECT_FALSE(line->cut.empty()) << "the line says it was cut";
}

TEST(Redaction, TheRedactorLeavesTextWithoutSecretsAlone) {
  Redactor none;
  EXPECT_TRUE(none.empty());
  Redactor r({{"K", "0123456789"}, {"EMPTY", ""}});
  std::string text = "nothing here";
  EXPECT_EQ(r.redact(text), 0u);
  EXPECT_EQ(text, "nothing here");
  text = "a0123456789b";
  EXPECT_EQ(r.redact(text), 1u);
  EXPECT_EQ(text, "a[redacted:K]b");
}

}  // namespace
}  // namespace mh::daemon::test
