// The JSON layer: the parser's number semantics (exact doubles, serde_json's -0 and overflow),
// the compact writer's canonical rules, the pretty layout, and the field reader's complaints.
#include "protocol/json.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <random>

namespace mh::protocol {
namespace {

std::string write_value(std::string_view text) {
  auto v = parse_json(text);
  EXPECT_TRUE(v.has_value()) << text;
  return v ? canonical_json(*v) : std::string();
}

// ---------------------------------------------------------------------------------------------
// parse_json
// ---------------------------------------------------------------------------------------------

TEST(ParseJson, ReadsEveryShortestDoubleBackExactly) {
  // Boost.JSON 1.81's own decimal conversion is one ulp off for about one double in ten; the
  // wire re-serializes vendor numbers, so that would alter them. Deterministic sample: random
  // bit patterns (every magnitude) and random values in the ranges costs actually take.
  std::mt19937_64 rng(20261129);
  std::uniform_real_distribution<double> cost(0.0, 0.05);
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    double d;
    if (i % 2 == 0) {
      std::uint64_t bits = rng();
      std::memcpy(&d, &bits, sizeof d);
      if (!std::isfinite(d)) continue;
    } else {
      d = cost(rng);
    }
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
    ASSERT_EQ(ec, std::errc());
    auto v = parse_json(std::string_view(buf, static_cast<std::size_t>(end - buf)));
    ASSERT_TRUE(v.has_value());
    double back = v->is_double() ? v->get_double() : v->to_number<double>();
    if (back != d && ++mismatches <= 3) ADD_FAILURE() << std::string_view(buf, static_cast<std::size_t>(end - buf));
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(ParseJson, KnownOneUlpCasesReadExactly) {
  for (double d : {949.3012028926441, 0.0075574503474009685, 993.6527282127801, -1.9934908051011654e+189,
                   1.1430767782883795e-192}) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
    (void)ec;
    auto v = parse_json(std::string_view(buf, static_cast<std::size_t>(end - buf)));
    ASSERT_TRUE(v && v->is_double());
    EXPECT_EQ(v->get_double(), d) << buf;
  }
}

TEST(ParseJson, NegativeZeroIsTheFloatMinusZeroAsSerdeJsonReadsIt) {
  auto v = parse_json("-0");
  ASSERT_TRUE(v && v->is_double());
  EXPECT_TRUE(std::signbit(v->get_double()));
  EXPECT_EQ(canonical_json(*v), "-0.0");
  v = parse_json("0");
  ASSERT_TRUE(v && v->is_int64());
  EXPECT_EQ(canonical_json(*v), "0");
}

TEST(ParseJson, ANumberNoDoubleCanHoldIsAnErrorNotInfinity) {
  std::string error;
  EXPECT_FALSE(parse_json("[1e400]", &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(parse_json("-1e400"));
  auto tiny = parse_json("1e-400");
  ASSERT_TRUE(tiny && tiny->is_double());
  EXPECT_EQ(tiny->get_double(), 0.0);
}

TEST(ParseJson, IntegersKeepTheirKindAndHugeOnesBecomeDoubles) {
  EXPECT_EQ(write_value("[9223372036854775807,-9223372036854775808,18446744073709551615]"),
            "[9223372036854775807,-9223372036854775808,18446744073709551615]");
  EXPECT_EQ(write_value("18446744073709551616"), "1.8446744073709552e19");
  EXPECT_EQ(write_value("[1E2,1e+2,10e-1,0.5e1]"), "[100.0,100.0,1.0,5.0]");
}

TEST(ParseJson, RefusesTrailingDataEmptyTextAndInvalidUtf8) {
  std::string error;
  EXPECT_FALSE(parse_json("{} x", &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(parse_json(""));
  EXPECT_FALSE(parse_json("{\"a\":1"));
  EXPECT_FALSE(parse_json("\"\xff\""));
  EXPECT_FALSE(parse_json("\"\\ud800\""));  // a lone surrogate is not text
  EXPECT_FALSE(parse_json("{\"a\":1,}"));
  EXPECT_FALSE(parse_json("[1] // comment"));
}

TEST(ParseJson, NestingIsBoundedAtMaxDepth) {
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(ok));
  std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_FALSE(parse_json(deep));
}

TEST(ParseJson, DuplicateKeysKeepTheLastValueLikeSerdeJson) {
  EXPECT_EQ(write_value(R"({"a":1,"b":2,"a":3})"), R"({"a":3,"b":2})");
}

// ---------------------------------------------------------------------------------------------
// JsonWriter / canonical_json
// ---------------------------------------------------------------------------------------------

TEST(JsonWriter, SortsKeysByteWiseAtEveryDepthWithoutSpaces) {
  EXPECT_EQ(write_value(R"( { "b" : [ { "y" : 1 , "x" : 2 } ] , "a" : { "é" : 1 , "z" : 2 , "Z" : 3 } } )"),
            R"({"a":{"Z":3,"z":2,"é":1},"b":[{"x":2,"y":1}]})");
}

TEST(JsonWriter, SortsObjectsLargerThanTheInlineBuffer) {
  std::string text = "{";
  for (int i = 40; i > 0; --i)
    text += (i == 40 ? "" : ",") + ("\"k" + std::to_string(i) + "\":" + std::to_string(i));
  text += "}";
  std::string out = write_value(text);
  EXPECT_EQ(out.substr(0, 22), R"({"k1":1,"k10":10,"k11")");
  EXPECT_EQ(out.substr(out.size() - 7), R"("k9":9})");
}

TEST(JsonWriter, InfersCommasAcrossNestedContainers) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  w.key("a");
  w.begin_array();
  w.begin_object();
  w.end_object();
  w.begin_array();
  w.end_array();
  w.string("");
  w.null();
  w.boolean(true);
  w.end_array();
  w.field("b", "x");
  w.field_u64("c", std::nullopt);
  w.field_i64("d", -3);
  w.field_bool("e", false);
  w.field_strings("f", std::vector<std::string>{"p", "q"});
  w.field("g", std::optional<std::string>("h"));
  w.end_object();
  EXPECT_EQ(out, R"({"a":[{},[],"",null,true],"b":"x","c":null,"d":-3,"e":false,"f":["p","q"],"g":"h"})");
}

TEST(JsonWriter, NonFiniteDoublesAreWrittenAsNull) {
  std::string out;
  JsonWriter w(out);
  w.begin_array();
  w.real(std::nan(""));
  w.real(INFINITY);
  w.real(-INFINITY);
  w.real(-0.0);
  w.end_array();
  EXPECT_EQ(out, "[null,null,null,-0.0]");
}

TEST(JsonWriter, FloatsInFreeFormJsonPrintShortestWithPointZero) {
  EXPECT_EQ(write_value("[0.0,0.25,3.0,1e21,1e-7,0.0001,123456789012345680000.0,5e-324]"),
            "[0.0,0.25,3.0,1e21,1e-7,0.0001,1.2345678901234568e20,5e-324]");
}

TEST(JsonWriter, EscapesControlsWithShortFormsAndLowercaseHex) {
  std::string s;
  for (int c = 0; c < 0x20; ++c)
    s.push_back(static_cast<char>(c));
  std::string out;
  JsonWriter(out).string(s);
  EXPECT_EQ(out,
            R"("\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f)"
            R"(\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f")");
  out.clear();
  JsonWriter(out).string("\"\\/ é ’ \x7f");
  EXPECT_EQ(out, "\"\\\"\\\\/ é ’ \x7f\"");
}

TEST(JsonWriter, KeysAreEscapedLikeStrings) {
  EXPECT_EQ(write_value(R"({"a\nb":1,"\"":2})"), R"({"\"":2,"a\nb":1})");
}

// ---------------------------------------------------------------------------------------------
// pretty_json
// ---------------------------------------------------------------------------------------------

TEST(PrettyJson, TwoSpaceIndentKeyColonSpaceEmptyContainersAndTrailingNewline) {
  auto v = parse_json(R"({"b":[1,{"d":[],"c":{}}],"a":"x"})");
  ASSERT_TRUE(v);
  EXPECT_EQ(pretty_json(*v),
            "{\n"
            "  \"a\": \"x\",\n"
            "  \"b\": [\n"
            "    1,\n"
            "    {\n"
            "      \"c\": {},\n"
            "      \"d\": []\n"
            "    }\n"
            "  ]\n"
            "}\n");
}

TEST(PrettyJson, KeepsInsertionOrderWhenAskedNotToSort) {
  json::object o;
  o["z"] = 1;
  o["a"] = 2.5;
  EXPECT_EQ(pretty_json(o, /*sort_keys=*/false), "{\n  \"z\": 1,\n  \"a\": 2.5\n}\n");
  EXPECT_EQ(pretty_json(o), "{\n  \"a\": 2.5,\n  \"z\": 1\n}\n");
}

// ---------------------------------------------------------------------------------------------
// FieldReader
// ---------------------------------------------------------------------------------------------

json::object object_of(std::string_view text) {
  auto v = parse_json(text);
  EXPECT_TRUE(v && v->is_object()) << text;
  return v && v->is_object() ? v->get_object() : json::object();
}

TEST(FieldReader, NamesTheMissingFieldWithItsContext) {
  auto o = object_of(R"({"a":1})");
  FieldReader f(o, "usage");
  f.req_string("model");
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(f.error(), R"(usage: missing required field "model")");
}

TEST(FieldReader, NamesTheFieldWhatWasFoundAndWhatWasExpected) {
  auto o = object_of(R"({"n":"seven","b":1,"s":["x",2],"o":[]})");
  {
    FieldReader f(o, "");
    f.req_u64("n");
    EXPECT_EQ(f.error(), R"(field "n" is the string "seven", expected a non-negative integer)");
  }
  {
    FieldReader f(o, "");
    f.opt_bool("b");
    EXPECT_EQ(f.error(), R"(field "b" is the number 1, expected a boolean or null)");
  }
  {
    FieldReader f(o, "");
    f.opt_strings("s");
    EXPECT_EQ(f.error(), R"(field "s" holds the number 2, expected strings only)");
  }
  {
    FieldReader f(o, "");
    f.req_object("o");
    EXPECT_EQ(f.error(), R"(field "o" is an array, expected an object)");
  }
}

TEST(FieldReader, KeepsOnlyTheFirstComplaint) {
  auto o = object_of(R"({})");
  FieldReader f(o, "");
  f.req_string("first");
  f.req_string("second");
  EXPECT_EQ(f.error(), R"(missing required field "first")");
}

TEST(FieldReader, AbsentAndNullNullableFieldsBothReadAsNull) {
  auto o = object_of(R"({"x":null})");
  FieldReader f(o, "");
  EXPECT_FALSE(f.opt_string("x"));
  EXPECT_FALSE(f.opt_string("absent"));
  EXPECT_FALSE(f.opt_u64("absent"));
  EXPECT_TRUE(f.any("absent").is_null());
  EXPECT_TRUE(f.ok());
}

TEST(FieldReader, IntegerRangesAreChecked) {
  auto o = object_of(R"({"big":4294967296,"neg":-1,"huge":18446744073709551615,"f":1.5})");
  {
    FieldReader f(o, "");
    f.req_u32("big");
    EXPECT_EQ(f.error(), R"(field "big" does not fit 32 bits)");
  }
  {
    FieldReader f(o, "");
    f.req_u64("neg");
    EXPECT_FALSE(f.ok());
  }
  {
    FieldReader f(o, "");
    f.opt_i64("huge");
    EXPECT_FALSE(f.ok());
  }
  {
    FieldReader f(o, "");
    EXPECT_EQ(f.opt_u64("huge"), 18446744073709551615ull);
    f.opt_u64("f");
    EXPECT_FALSE(f.ok());
  }
}

// ---------------------------------------------------------------------------------------------
// describe_json, excerpt, utf8_sequence_length
// ---------------------------------------------------------------------------------------------

TEST(DescribeJson, IsShortAndBounded) {
  EXPECT_EQ(describe_json(json::value(nullptr)), "null");
  EXPECT_EQ(describe_json(json::value(true)), "true");
  EXPECT_EQ(describe_json(json::value(2.5)), "the number 2.5");
  EXPECT_EQ(describe_json(json::array{}), "an array");
  EXPECT_EQ(describe_json(json::object{}), "an object");
  EXPECT_EQ(describe_json(json::value(std::string(100, 'x'))), "the string \"" + std::string(40, 'x') + "…\"");
}

TEST(Excerpt, CutsAtACharacterBoundaryAndMarksTheCut) {
  EXPECT_EQ(excerpt("short", 10), "short");
  EXPECT_EQ(excerpt("abcdef", 3), "abc…");
  EXPECT_EQ(excerpt("ab’cd", 3), "ab…");  // ’ is three bytes; never split
  EXPECT_EQ(excerpt("ab’cd", 5), "ab’…");
}

TEST(Excerpt, ReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ(excerpt("a\xff"
                    "b\xc3",
                    10),
            "a�b�");
}

TEST(Utf8, SequenceLengthAcceptsOnlyWellFormedUtf8) {
  EXPECT_EQ(utf8_sequence_length("a", 0), 1u);
  EXPECT_EQ(utf8_sequence_length("é", 0), 2u);
  EXPECT_EQ(utf8_sequence_length("’", 0), 3u);
  EXPECT_EQ(utf8_sequence_length("😀", 0), 4u);
  EXPECT_EQ(utf8_sequence_length("\xc0\x80", 0), 0u);          // overlong NUL
  EXPECT_EQ(utf8_sequence_length("\xe0\x80\x80", 0), 0u);      // overlong
  EXPECT_EQ(utf8_sequence_length("\xed\xa0\x80", 0), 0u);      // surrogate U+D800
  EXPECT_EQ(utf8_sequence_length("\xf4\x90\x80\x80", 0), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8_sequence_length("\xe2\x80", 0), 0u);          // cut short
  EXPECT_EQ(utf8_sequence_length("\x80", 0), 0u);              // lone continuation
}

}  // namespace
}  // namespace mh::protocol

namespace mh::protocol {
namespace {

// Vendor numbers are untrusted: an integer that fits comes out, anything else is nullopt, never
// an exception (Boost.JSON's to_number throws "not exact") or an overflowing cast.
TEST(ExactInt64, IntegersThatFitComeOutAndEverythingElseIsNullopt) {
  auto exact = [](std::string_view text) { return exact_int64(*parse_json(text)); };
  EXPECT_EQ(exact("42"), 42);
  EXPECT_EQ(exact("-7"), -7);
  EXPECT_EQ(exact("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(exact("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(exact("1795989576253.0"), 1795989576253);
  EXPECT_EQ(exact("9223372036854775808"), std::nullopt) << "a uint64 past INT64_MAX";
  EXPECT_EQ(exact("18446744073709551615"), std::nullopt);
  EXPECT_EQ(exact("1.5"), std::nullopt);
  EXPECT_EQ(exact("1e300"), std::nullopt);
  EXPECT_EQ(exact("-1e300"), std::nullopt);
  EXPECT_EQ(exact("9223372036854775808.0"), std::nullopt) << "2^63 as a double does not fit";
  EXPECT_EQ(exact("\"12\""), std::nullopt);
  EXPECT_EQ(exact("null"), std::nullopt);
  EXPECT_EQ(exact("true"), std::nullopt);
}

}  // namespace
}  // namespace mh::protocol
