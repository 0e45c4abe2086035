// The lenient getters adapters read vendor records with: a missing field, null, or a field of
// another type is unknown (nullopt / nullptr), never an error and never a default; and a number
// reads as it does through the strict FieldReader.
#include <gtest/gtest.h>

#include "protocol/json.hpp"

namespace mh::protocol {
namespace {

json::object record() {
  auto v = parse_json(R"({
    "s": "text", "empty": "", "n": 7, "neg": -3, "big": 18446744073709551615, "half": 2.5, "whole": 3.0,
    "t": true, "f": false, "nil": null, "o": {"k": 1}, "a": [1, "x", null, "y", {"z": 1}], "none": []
  })");
  EXPECT_TRUE(v && v->is_object());
  return v->as_object();
}

TEST(JsonGetters, StringAtReadsOnlyStrings) {
  auto o = record();
  EXPECT_EQ(string_at(o, "s"), "text");
  EXPECT_EQ(string_at(o, "empty"), "") << "an empty string is a string, not unknown";
  for (auto k : {"missing", "nil", "n", "t", "o", "a"})
    EXPECT_EQ(string_at(o, k), std::nullopt) << k;
}

TEST(JsonGetters, BoolAtReadsOnlyBooleans) {
  auto o = record();
  EXPECT_EQ(bool_at(o, "t"), true);
  EXPECT_EQ(bool_at(o, "f"), false) << "false is known, not unknown";
  for (auto k : {"missing", "nil", "n", "s"})
    EXPECT_EQ(bool_at(o, k), std::nullopt) << k;
}

TEST(JsonGetters, U64AtReadsNonNegativeIntegersOnly) {
  auto o = record();
  EXPECT_EQ(u64_at(o, "n"), 7u);
  EXPECT_EQ(u64_at(o, "big"), 18446744073709551615u);
  for (auto k : {"neg", "half", "whole", "s", "nil", "missing"})
    EXPECT_EQ(u64_at(o, k), std::nullopt) << k;
}

TEST(JsonGetters, U64AtOverKeysTakesTheFirstThatHoldsOne) {
  auto o = record();
  EXPECT_EQ(u64_at(o, {"missing", "n"}), 7u);
  EXPECT_EQ(u64_at(o, {"neg", "s", "n"}), 7u) << "a key of another type is skipped, not taken as unknown";
  EXPECT_EQ(u64_at(o, {"n", "big"}), 7u) << "in order";
  EXPECT_EQ(u64_at(o, {"missing", "neg"}), std::nullopt);
}

TEST(JsonGetters, F64AtReadsEveryNumber) {
  auto o = record();
  EXPECT_EQ(f64_at(o, "half"), 2.5);
  EXPECT_EQ(f64_at(o, "n"), 7.0);
  EXPECT_EQ(f64_at(o, "neg"), -3.0);
  for (auto k : {"s", "t", "nil", "missing"})
    EXPECT_EQ(f64_at(o, k), std::nullopt) << k;
}

TEST(JsonGetters, ObjectAndArrayAtPointIntoTheRecordOrAreNull) {
  auto o = record();
  ASSERT_NE(object_at(o, "o"), nullptr);
  EXPECT_EQ(object_at(o, "o"), &o.at("o").as_object()) << "a view, not a copy";
  ASSERT_NE(array_at(o, "a"), nullptr);
  EXPECT_EQ(array_at(o, "a")->size(), 5u);
  EXPECT_EQ(object_at(o, "a"), nullptr);
  EXPECT_EQ(array_at(o, "o"), nullptr);
  EXPECT_EQ(object_at(o, "nil"), nullptr);
  EXPECT_EQ(array_at(o, "missing"), nullptr);
}

TEST(JsonGetters, StringsAtKeepsTheStringsAndTellsNoneFromUnknown) {
  auto o = record();
  EXPECT_EQ(strings_at(o, "a"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(strings_at(o, "none"), std::vector<std::string>{}) << "[] is none";
  EXPECT_EQ(strings_at(o, "missing"), std::nullopt) << "missing is unknown, never []";
  EXPECT_EQ(strings_at(o, "s"), std::nullopt);
}

TEST(JsonGetters, NumbersReadTheSameAsThroughTheFieldReader) {
  auto o = record();
  for (auto k : {"n", "neg", "big", "half", "whole", "s", "nil"}) {
    FieldReader strict(o, "r");
    EXPECT_EQ(u64_at(o, k), o.at(k).is_null() ? std::nullopt : strict.opt_u64(k)) << k;
    FieldReader strict_f(o, "r");
    EXPECT_EQ(f64_at(o, k), o.at(k).is_null() ? std::nullopt : strict_f.opt_f64(k)) << k;
  }
}

}  // namespace
}  // namespace mh::protocol
