#include "protocol/frame.hpp"

#include <gtest/gtest.h>

#include "golden_frame.hpp"
#include "protocol/digest.hpp"

namespace mh::protocol {
namespace {

// Reference §7.3: the canonical bytes and the digest the reference implementation pins.
constexpr std::string_view kCanonical =
    R"({"entities":null,"handoff":{"handoff":"none"},"next":[],"node":{"id":"implement"},"obligations":[{"asked_by":null,"text":"the suite is red before the implementation"}],"operations":[{"op":"dir.list"},{"op":"file.edit"},{"op":"file.read"},{"op":"file.write"},{"op":"search"},{"op":"shell"},{"op":"skill.load"}],"prior":[],"reaching":[{"asked_by":null,"text":"to verify: the suite is green"}],"step":{"attempt":1,"index":2,"state":"implement","workflow":"development/default"},"workflow":{"id":"development/default","version":"1"}})";
constexpr std::string_view kDigest = "43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12";
constexpr std::string_view kDocumentSha = "ef897a58a624848aad942d69d2745b431f2eaad5180cd0f5b2e1c8975adcb93b";

Frame vector_frame() {
  auto loaded = load_frame(std::string(R"({"format":"metaharness.frame/1",)") + std::string(kCanonical.substr(1)),
                           /*require_sealed=*/false);
  EXPECT_TRUE(loaded) << loaded.error().message;
  return *loaded;
}

TEST(Frame, CanonicalBytesAndDigestReproduceTheReferenceVector) {
  Frame f = vector_frame();
  EXPECT_EQ(canonical_frame_bytes(f), kCanonical);
  EXPECT_EQ(compute_frame_digest(f), kDigest);
}

TEST(Frame, DocumentFormReproducesTheGoldenFileByteForByte) {
  Frame f = vector_frame();
  seal(f);
  EXPECT_EQ(f.digest, kDigest);
  std::string doc = frame_document(f);
  EXPECT_EQ(sha256_hex(doc), kDocumentSha) << doc;
  auto reloaded = load_frame(doc);
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  EXPECT_EQ(reloaded->digest, kDigest);
}

// ---------------------------------------------------------------------------------------------
// Refusals by name, in the reference's order (§7.4): NotJson, UnknownFormat, Invalid,
// DigestMismatch
// ---------------------------------------------------------------------------------------------

FrameRefusal refused(std::string_view document, bool require_sealed = true) {
  auto loaded = load_frame(document, require_sealed);
  EXPECT_FALSE(loaded) << "accepted: " << document;
  return loaded ? FrameRefusal{FrameRefusalKind::Unreadable, "(accepted)"} : loaded.error();
}

// The golden document with one textual edit applied.
std::string edited_document(std::string_view from, std::string_view to) {
  std::string doc(golden::kFrameDocument);
  auto at = doc.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) doc.replace(at, from.size(), to);
  return doc;
}

TEST(FrameRefusal, TextThatIsNotJsonIsNotJson) {
  FrameRefusal r = refused("workflow: development/default\n");
  EXPECT_EQ(r.kind, FrameRefusalKind::NotJson);
  EXPECT_EQ(r.message.rfind("not a JSON object: ", 0), 0u) << r.message;
  EXPECT_EQ(refused("").kind, FrameRefusalKind::NotJson);
  EXPECT_EQ(refused(golden::kFrameDocument.substr(0, 200)).kind, FrameRefusalKind::NotJson);
}

TEST(FrameRefusal, JsonThatIsNotAnObjectIsNotJsonNamingWhatWasRead) {
  EXPECT_EQ(refused("[1,2]").message, "not a JSON object: read an array");
  EXPECT_EQ(refused("\"frame\"").kind, FrameRefusalKind::NotJson);
}

TEST(FrameRefusal, AnUntaggedDocumentIsUnknownFormatNone) {
  std::string untagged = edited_document("  \"format\": \"metaharness.frame/1\",\n", "");
  FrameRefusal r = refused(untagged);
  EXPECT_EQ(r.kind, FrameRefusalKind::UnknownFormat);
  EXPECT_EQ(r.message, "no format tag, expected \"metaharness.frame/1\"");
}

TEST(FrameRefusal, AWrongTagIsUnknownFormatNamingTheTag) {
  FrameRefusal r = refused(edited_document("metaharness.frame/1", "metaharness.frame/2"));
  EXPECT_EQ(r.kind, FrameRefusalKind::UnknownFormat);
  EXPECT_EQ(r.message, R"(unknown format tag the string "metaharness.frame/2", expected "metaharness.frame/1")");
  FrameRefusal event_tag = refused(edited_document("\"metaharness.frame/1\"", "\"metaharness.event/1\""));
  EXPECT_EQ(event_tag.kind, FrameRefusalKind::UnknownFormat);
  FrameRefusal number = refused(edited_document("\"metaharness.frame/1\"", "1"));
  EXPECT_EQ(number.kind, FrameRefusalKind::UnknownFormat);
  EXPECT_NE(number.message.find("the number 1"), std::string::npos);
}

TEST(FrameRefusal, AMissingWorkflowIsInvalid) {
  std::string doc =
      edited_document(",\n  \"workflow\": {\n    \"id\": \"development/default\",\n    \"version\": \"1\"\n  }", "");
  FrameRefusal r = refused(doc);
  EXPECT_EQ(r.kind, FrameRefusalKind::Invalid);
  EXPECT_EQ(r.message, R"(not a frame: missing required field "workflow")");
}

TEST(FrameRefusal, AnUnknownOperationIsInvalidNamingTheVocabulary) {
  FrameRefusal r = refused(edited_document("\"shell\"", "\"file.delete\""));
  EXPECT_EQ(r.kind, FrameRefusalKind::Invalid);
  EXPECT_EQ(r.message,
            "not a frame: operations: unknown operation \"file.delete\"; the vocabulary is file.read, "
            "file.write, file.edit, dir.list, search, shell, web.read, skill.load, subagent.spawn, "
            "task.todo or mcp.call");
}

TEST(FrameRefusal, AnMcpCallWithoutServerIsInvalid) {
  FrameRefusal r = refused(edited_document("\"op\": \"shell\"", "\"op\": \"mcp.call\", \"tool\": \"create_issue\""));
  EXPECT_EQ(r.kind, FrameRefusalKind::Invalid);
  EXPECT_NE(r.message.find(R"(missing required field "server")"), std::string::npos) << r.message;
  FrameRefusal no_tool = refused(edited_document("\"op\": \"shell\"", "\"op\": \"mcp.call\", \"server\": \"github\""));
  EXPECT_EQ(no_tool.kind, FrameRefusalKind::Invalid);
  EXPECT_NE(no_tool.message.find(R"("tool")"), std::string::npos) << no_tool.message;
}

TEST(FrameRefusal, OtherMisshapenFieldsAreInvalid) {
  struct Edit {
    std::string_view from, to, names;
  };
  for (auto [from, to, names] : std::vector<Edit>{
           {"\"handoff\": \"none\"", "\"handoff\": \"essay\"", "essay"},
           {"\"attempt\": 1", "\"attempt\": 0", "attempt"},
           {"\"index\": 2", "\"index\": -2", "index"},
           {"\"next\": []", "\"next\": [\"review\"]", "next"},
           {"\"prior\": []", "\"prior\": {}", "prior"},
           {"{\n      \"op\": \"search\"\n    }", "\"search\"", "operations"},
           {"\"entities\": null", "\"entities\": {\"source\": \"s\"}", "members"},
           {"\"text\": \"to verify: the suite is green\"", "\"text\": 7", "text"},
       }) {
    FrameRefusal r = refused(edited_document(from, to));
    EXPECT_EQ(r.kind, FrameRefusalKind::Invalid) << to;
    EXPECT_NE(r.message.find(names), std::string::npos) << r.message;
  }
}

TEST(FrameRefusal, EditedAfterSealingIsADigestMismatchNamingBothDigests) {
  std::string doc = edited_document("the suite is green", "the suite is amber");
  FrameRefusal r = refused(doc);
  EXPECT_EQ(r.kind, FrameRefusalKind::DigestMismatch);
  auto computed = load_frame(doc, /*require_sealed=*/false);
  ASSERT_TRUE(computed);
  std::string recomputed = compute_frame_digest(*computed);
  EXPECT_EQ(r.message, "the stated digest " + std::string(golden::kFrameDigest) +
                           " does not describe the contents (computed " + recomputed +
                           "): the frame was never sealed or was edited after sealing");
}

TEST(FrameRefusal, DroppingAnOperationAfterSealingIsADigestMismatch) {
  EXPECT_EQ(refused(edited_document("    {\n      \"op\": \"dir.list\"\n    },\n", "")).kind,
            FrameRefusalKind::DigestMismatch);
}

TEST(FrameRefusal, AnUnsealedDocumentIsRefusedWhenASealIsRequired) {
  std::string doc =
      edited_document("  \"digest\": \"43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12\",\n", "");
  FrameRefusal r = refused(doc);
  EXPECT_EQ(r.kind, FrameRefusalKind::DigestMismatch);
  EXPECT_EQ(r.message, "the frame states no digest: it was never sealed (its canonical digest would be " +
                           std::string(golden::kFrameDigest) + ")");
  auto unsealed = load_frame(doc, /*require_sealed=*/false);
  ASSERT_TRUE(unsealed) << unsealed.error().message;
  EXPECT_EQ(unsealed->digest, "");
}

TEST(FrameRefusal, ShapeIsJudgedBeforeTheDigestAndTheTagBeforeTheShape) {
  std::string misshapen_and_edited = edited_document("\"handoff\": \"none\"", "\"handoff\": 5");
  EXPECT_EQ(refused(misshapen_and_edited).kind, FrameRefusalKind::Invalid);
  std::string wrong_tag_and_misshapen = "{\"format\":\"metaharness.frame/0\"}";
  EXPECT_EQ(refused(wrong_tag_and_misshapen).kind, FrameRefusalKind::UnknownFormat);
}

TEST(FrameRefusal, KindsHaveTheirNames) {
  EXPECT_EQ(to_string(FrameRefusalKind::NotJson), "NotJson");
  EXPECT_EQ(to_string(FrameRefusalKind::UnknownFormat), "UnknownFormat");
  EXPECT_EQ(to_string(FrameRefusalKind::Invalid), "Invalid");
  EXPECT_EQ(to_string(FrameRefusalKind::DigestMismatch), "DigestMismatch");
}

TEST(FrameRefusal, ValueThrowsTheRefusalMessage) {
  auto loaded = load_frame("[]");
  EXPECT_THROW((void)loaded.value(), std::runtime_error);
}

// ---------------------------------------------------------------------------------------------
// Loading: the golden document, unknown keys, operations as a set
// ---------------------------------------------------------------------------------------------

TEST(FrameLoad, TheGoldenDocumentTextIsTheReferenceFile) {
  EXPECT_EQ(sha256_hex(golden::kFrameDocument), golden::kFrameDocumentSha);
  auto loaded = load_frame(golden::kFrameDocument);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->workflow_id, "development/default");
  EXPECT_EQ(loaded->workflow_version, "1");
  EXPECT_EQ(loaded->node_id, "implement");
  EXPECT_EQ(loaded->step.index, 2u);
  EXPECT_EQ(loaded->step.attempt, 1u);
  ASSERT_EQ(loaded->obligations.size(), 1u);
  EXPECT_FALSE(loaded->obligations[0].attribution.has_value());
  EXPECT_EQ(loaded->operations.size(), 7u);
  EXPECT_EQ(frame_document(*loaded), golden::kFrameDocument);
}

TEST(FrameLoad, UnknownKeysAreDroppedAndDoNotEnterTheDigest) {
  std::string doc = edited_document("  \"next\": [],", "  \"next\": [],\n  \"x-note\": {\"by\": \"editor\"},");
  auto loaded = load_frame(doc);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(canonical_frame_bytes(*loaded), golden::kCanonicalFrame);
}

TEST(FrameLoad, OperationsAreSortedAndDeduplicatedOnLoad) {
  std::string doc = R"({"format":"metaharness.frame/1","workflow":{"id":"w","version":"1"},"node":{"id":"n"},)"
                    R"("step":{"workflow":"w","state":"n","index":0,"attempt":1},"prior":[],"obligations":[],)"
                    R"("reaching":[],"next":[],"handoff":{"handoff":"none"},"entities":null,"operations":[)"
                    R"({"op":"shell"},{"op":"file.read"},{"op":"shell"},)"
                    R"({"op":"mcp.call","server":"b","tool":"x"},{"op":"mcp.call","server":"a","tool":"y"},)"
                    R"({"op":"mcp.call","server":"a","tool":"x"},{"op":"mcp.call","server":"a","tool":"x"},)"
                    R"({"op":"dir.list"}]})";
  auto loaded = load_frame(doc, /*require_sealed=*/false);
  ASSERT_TRUE(loaded) << loaded.error().message;
  std::vector<std::string> order;
  for (const auto& op : loaded->operations)
    order.push_back(std::string(op.wire_name()) + (op.server.empty() ? "" : " " + op.server + "/" + op.tool));
  EXPECT_EQ(order, (std::vector<std::string>{"dir.list", "file.read", "mcp.call a/x", "mcp.call a/y", "mcp.call b/x",
                                             "shell"}));
  EXPECT_NE(canonical_frame_bytes(*loaded).find(
                R"("operations":[{"op":"dir.list"},{"op":"file.read"},)"
                R"({"op":"mcp.call","server":"a","tool":"x"},{"op":"mcp.call","server":"a","tool":"y"},)"
                R"({"op":"mcp.call","server":"b","tool":"x"},{"op":"shell"}])"),
            std::string::npos)
      << canonical_frame_bytes(*loaded);
  EXPECT_TRUE(loaded->admits(Operation{OpKind::mcp_call, "a", "y"}));
  EXPECT_FALSE(loaded->admits(Operation{OpKind::mcp_call, "a", "z"}));
  EXPECT_TRUE(loaded->admits(Operation{OpKind::shell, {}, {}}));
  EXPECT_FALSE(loaded->admits(Operation{OpKind::web_read, {}, {}}));
}

TEST(FrameLoad, TheSameSetInAnotherOrderHasTheSameDigest) {
  std::string shuffled =
      edited_document("    {\n      \"op\": \"dir.list\"\n    },\n    {\n      \"op\": \"file.edit\"\n    },",
                      "    {\n      \"op\": \"file.edit\"\n    },\n    {\n      \"op\": \"skill.load\"\n    },\n"
                      "    {\n      \"op\": \"dir.list\"\n    },");
  auto loaded = load_frame(shuffled);  // still verifies: the digest is over the sorted set
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(frame_document(*loaded), golden::kFrameDocument);
}

TEST(FrameLoad, EmbeddedFramesNeedNoFormatTag) {
  auto v = parse_json(std::string(R"({"digest":")") + std::string(golden::kFrameDigest) + "\"," +
                      std::string(golden::kCanonicalFrame.substr(1)));
  ASSERT_TRUE(v);
  auto frame = frame_from_json(*v);
  ASSERT_TRUE(frame) << frame.error().message;
  EXPECT_EQ(frame->digest, golden::kFrameDigest);
  EXPECT_EQ(frame_from_json(json::value(3)).error().kind, FrameRefusalKind::NotJson);
}

// ---------------------------------------------------------------------------------------------
// Sealing
// ---------------------------------------------------------------------------------------------

Frame rich_frame() {
  Frame f;
  f.workflow_id = "dev/x";
  f.workflow_version = "3";
  f.node_id = "choose";
  f.step = StepRef{"dev/x", "choose", 0, 2};
  f.prior = {{"the suite exists", std::string("step 1")}, {"CI is green", std::nullopt}};
  f.next = {"review", "done"};
  f.handoff.kind = Handoff::Kind::artifact;
  f.handoff.name = "patch.diff";
  f.handoff.kind_ = "diff";
  f.entities = Entities{"open issues", {"#1", "#2"}};
  f.operations = {Operation{OpKind::mcp_call, "github", "create_issue"}, Operation{OpKind::file_read, {}, {}},
                  Operation{OpKind::file_read, {}, {}}};
  return f;
}

TEST(FrameSeal, SealingAnUnsealedFrameSortsItsOperationsAndStatesTheCanonicalDigest) {
  Frame f = rich_frame();
  seal(f);
  ASSERT_EQ(f.operations.size(), 2u);
  EXPECT_EQ(f.operations[0].op, OpKind::file_read);
  EXPECT_EQ(f.digest, sha256_hex(canonical_frame_bytes(f)));
  std::string doc = frame_document(f);
  auto reloaded = load_frame(doc);
  ASSERT_TRUE(reloaded) << reloaded.error().message << "\n" << doc;
  EXPECT_EQ(frame_document(*reloaded), doc);
}

TEST(FrameSeal, CanonicalBytesHaveSortedKeysAndExplicitNulls) {
  Frame f = rich_frame();
  seal(f);
  EXPECT_EQ(canonical_frame_bytes(f),
            R"({"entities":{"members":["#1","#2"],"source":"open issues"},)"
            R"("handoff":{"handoff":"artifact","kind":"diff","name":"patch.diff"},)"
            R"("next":[{"id":"review"},{"id":"done"}],"node":{"id":"choose"},"obligations":[],)"
            R"("operations":[{"op":"file.read"},{"op":"mcp.call","server":"github","tool":"create_issue"}],)"
            R"("prior":[{"source":"step 1","text":"the suite exists"},{"source":null,"text":"CI is green"}],)"
            R"("reaching":[],"step":{"attempt":2,"index":0,"state":"choose","workflow":"dev/x"},)"
            R"("workflow":{"id":"dev/x","version":"3"}})");
}

TEST(FrameSeal, ResealingTheGoldenFrameChangesNothing) {
  auto loaded = load_frame(golden::kFrameDocument);
  ASSERT_TRUE(loaded);
  seal(*loaded);
  EXPECT_EQ(loaded->digest, golden::kFrameDigest);
}

TEST(FrameSeal, WritingNeverReseals) {
  Frame f = rich_frame();
  f.digest = std::string(64, '0');
  std::string doc = frame_document(f);
  EXPECT_NE(doc.find(std::string(64, '0')), std::string::npos);
  EXPECT_EQ(refused(doc).kind, FrameRefusalKind::DigestMismatch);
}

TEST(FrameSeal, SubjectRulesEnterTheDigestAndAreOmittedWhenEmpty) {
  Frame f = rich_frame();
  seal(f);
  std::string without = f.digest;
  EXPECT_EQ(canonical_frame_bytes(f).find("subjects"), std::string::npos);
  f.subject_rules = {
      SubjectRule{{"file:src/**"}, {Operation{OpKind::file_edit, {}, {}}, Operation{OpKind::file_read, {}, {}}}},
      SubjectRule{{"**"}, {Operation{OpKind::file_read, {}, {}}}}};
  seal(f);
  EXPECT_NE(f.digest, without);
  EXPECT_NE(canonical_frame_bytes(f).find(
                R"("step":{"attempt":2,"index":0,"state":"choose","workflow":"dev/x"},"subjects":{"rules":[)"
                R"({"operations":[{"op":"file.edit"},{"op":"file.read"}],"subjects":["file:src/**"]},)"
                R"({"operations":[{"op":"file.read"}],"subjects":["**"]}]},"workflow")"),
            std::string::npos)
      << canonical_frame_bytes(f);
  auto reloaded = load_frame(frame_document(f));
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  ASSERT_EQ(reloaded->subject_rules.size(), 2u);
  EXPECT_EQ(reloaded->subject_rules[0].subjects, std::vector<std::string>{"file:src/**"});
}

TEST(FrameSeal, FrameToJsonWithoutEnvelopeLeavesOutFormatAndDigest) {
  auto loaded = load_frame(golden::kFrameDocument);
  ASSERT_TRUE(loaded);
  json::value bare = frame_to_json(*loaded, /*with_envelope=*/false);
  EXPECT_FALSE(bare.get_object().contains("format"));
  EXPECT_FALSE(bare.get_object().contains("digest"));
  EXPECT_EQ(canonical_json(frame_to_json(*loaded, true)), golden::kSealedFrameObject);
}

// ---------------------------------------------------------------------------------------------
// Frame as model text (§7.5)
// ---------------------------------------------------------------------------------------------

TEST(FrameText, TheGoldenFrameRendersInTheReferenceLayout) {
  auto loaded = load_frame(golden::kFrameDocument);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(render_frame_text(*loaded),
            "Workflow development/default (1), state implement, step 2 attempt 1.\n"
            "\n"
            "Already established:\n"
            "- nothing yet.\n"
            "\n"
            "Must hold here:\n"
            "- the suite is red before the implementation\n"
            "\n"
            "Not yet satisfied on a way out:\n"
            "- to verify: the suite is green\n"
            "\n"
            "This step owes: nothing.\n"
            "\n"
            "Strictly only these operations are admitted here:\n"
            "- dir.list\n"
            "- file.edit\n"
            "- file.read\n"
            "- file.write\n"
            "- search\n"
            "- shell\n"
            "- skill.load\n"
            "\n"
            "Frame 43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12.");
}

TEST(FrameText, EverySectionOfARichFrame) {
  Frame f = rich_frame();
  f.obligations = {};
  seal(f);
  EXPECT_EQ(render_frame_text(f),
            "Workflow dev/x (3), state choose, step 0 attempt 2.\n"
            "\n"
            "Already established:\n"
            "- the suite exists (step 1)\n"
            "- CI is green\n"
            "\n"
            "Must hold here:\n"
            "- nothing is required of this step beyond its handoff.\n"
            "\n"
            "Reachable from here: review, done.\n"
            "\n"
            "This step owes: the artifact patch.diff (kind diff).\n"
            "\n"
            "Choose exactly one of these, enumerated from open issues:\n"
            "- #1\n"
            "- #2\n"
            "\n"
            "Strictly only these operations are admitted here:\n"
            "- file.read\n"
            "- mcp.call github/create_issue\n"
            "\n"
            "Frame " +
                f.digest + ".");
}

TEST(FrameText, ObligationsCarryWhoAskedAndNoOperationsSaysSo) {
  Frame f = rich_frame();
  f.obligations = {{"tests pass", std::string("reviewer")}};
  f.operations.clear();
  f.handoff = Handoff{Handoff::Kind::structured_answer, "", std::nullopt, "verdict/1"};
  f.entities.reset();
  f.next.clear();
  std::string text = render_frame_text(f);
  EXPECT_NE(text.find("Must hold here:\n- tests pass (reviewer)\n\n"), std::string::npos) << text;
  EXPECT_NE(text.find("This step owes: a structured answer against the schema verdict/1.\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Strictly only these operations are admitted here:\n- none. This step calls no tools.\n\nFrame "),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("Reachable"), std::string::npos);
  EXPECT_EQ(text.find("Choose exactly one"), std::string::npos);
  f.handoff = Handoff{Handoff::Kind::artifact, "notes.md", std::nullopt, ""};
  EXPECT_NE(render_frame_text(f).find("This step owes: the artifact notes.md.\n"), std::string::npos);
}

}  // namespace
}  // namespace mh::protocol
