// One description per wire type. Each struct the wire carries is described once, beside its
// definition: its members in serialization order (BOOST_DESCRIBE_STRUCT: the member names are
// the wire's keys), and, where the wire treats a field other than its C++ type says, a rule
// (MH_WIRE_RULES). protocol/wire_codec.hpp derives both the writer and the reader from that
// one description, so a field cannot be written in one order and read in another, or added to
// one side only.
//
// What the C++ type says by itself: std::optional is nullable (written as null, never omitted;
// absent or null reads as nullopt), anything else is required; an enum is written by its
// EnumNames spelling; a std::vector that is not optional reads as empty when absent.
#pragma once

#include <array>
#include <boost/describe/class.hpp>
#include <string_view>

namespace mh::protocol {

// Where the wire departs from what the type says. Flags; a field may carry several.
enum WireRule : unsigned {
  kOmitNull = 1,   // std::optional: the key is omitted when null (additive fields, so older lines stay)
  kOmitEmpty = 2,  // std::vector: the key is omitted when empty
  kAdditive = 4,   // not optional, but added later: absent or null reads as the default value
  kDigest = 8,     // a string that must be a lowercase hex SHA-256
  kPresent = 16,   // free-form JSON that must be present (null is a value; absent is refused)
};

struct WireFieldRule {
  std::string_view field;
  unsigned rules;
};

// MH_WIRE_RULES(T, WireFieldRule{"key", kRule}, ...) beside T, in T's namespace (like
// BOOST_DESCRIBE_STRUCT, it is found by argument-dependent lookup); a type without it has no rules.
#define MH_WIRE_RULES(T, ...)              \
  constexpr auto mh_wire_rules(const T*) { \
    return std::array{__VA_ARGS__};        \
  }

constexpr std::array<WireFieldRule, 0> mh_wire_rules(const void*) {
  return {};
}

template <class T>
constexpr unsigned wire_rules(std::string_view field) {
  for (const auto& e : mh_wire_rules(static_cast<const T*>(nullptr)))
    if (e.field == field) return e.rules;
  return 0;
}

}  // namespace mh::protocol
