// The writer and the reader of every described wire type, both derived from its one description
// (protocol/wire_describe.hpp): write_fields writes the members in description order, read_fields
// reads them in the same order, so the first complaint a reader gives is the one the field order
// implies. Internal to protocol/: the public headers keep their write / read functions, which
// call these.
//
// What a member's C++ type means on the wire (rules in wire_describe.hpp refine it):
//   std::string, bool, std::uint32_t, std::uint64_t, enum  required (an enum by its EnumNames spelling)
//   std::int32_t                                            an integer that must fit 32 bits; absent reads 0
//   std::optional<scalar or string>                         nullable
//   json::value                                             free-form; absent reads as null
//   std::vector<T>                                          array; absent or null reads as empty
//   std::optional<std::vector<T>>                           nullable array (null is not [])
//   std::map<std::string, V>                                object keyed by name
//   a described struct                                      nested object, read with the key as context
//   a type with a Codec                                     its own writer and reader (tagged unions,
//                                                           fields that depend on each other)
#pragma once

#include <boost/describe/members.hpp>
#include <boost/mp11/algorithm.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "protocol/commands.hpp"
#include "protocol/digest.hpp"
#include "protocol/events.hpp"

namespace mh::protocol::wire {

template <class T>
inline constexpr bool is_described = boost::describe::has_describe_members<T>::value;

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
struct is_name_map : std::false_type {};
template <class V>
struct is_name_map<std::map<std::string, V>> : std::true_type {};

// Values whose shape a list of members cannot say; each specialisation has kObjectOnly (the value
// must be a JSON object: a required one is refused as "expected an object" before the codec
// reads it), write and read (nullopt with an error naming the problem).
template <class T>
struct Codec;
template <class T>
concept has_codec = requires {
  Codec<T>::kObjectOnly;
};

// Checks across fields, run after a described struct's members are read.
template <class T>
struct Check {
  static void check(FieldReader&, const T&) {}
};

// `"name":` for a described member, built at compile time.
template <class D>
struct QuotedKey {
  static constexpr std::size_t size = std::char_traits<char>::length(D::name);
  static constexpr std::array<char, size + 3> text = [] {
    std::array<char, size + 3> a{};
    a[0] = '"';
    for (std::size_t i = 0; i < size; ++i)
      a[i + 1] = D::name[i];
    a[size + 1] = '"';
    a[size + 2] = ':';
    return a;
  }();
  static constexpr bool plain = [] {
    for (std::size_t i = 0; i < size; ++i) {
      char c = D::name[i];
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
  }();
  static_assert(plain, "a wire key is written unescaped: lowercase letters, digits and _ only");
  static constexpr std::string_view view() { return {text.data(), text.size()}; }
};

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

template <class T>
void write_fields(JsonWriter& w, const T& v);

template <class T>
void write_value(JsonWriter& w, const T& v) {
  if constexpr (has_codec<T>) {
    Codec<T>::write(w, v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    w.string(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    w.boolean(v);
  } else if constexpr (std::is_enum_v<T>) {
    w.string(to_string(v));
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    w.uinteger(v);
  } else if constexpr (std::is_integral_v<T>) {
    w.integer(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    w.real(v);
  } else if constexpr (std::is_same_v<T, json::value>) {
    w.value(v);
  } else if constexpr (is_optional<T>::value) {
    if (v)
      write_value(w, *v);
    else
      w.null();
  } else if constexpr (is_vector<T>::value) {
    w.begin_array();
    for (const auto& item : v)
      write_value(w, item);
    w.end_array();
  } else if constexpr (is_name_map<T>::value) {
    w.begin_object();
    for (const auto& [name, item] : v) {
      w.key(name);
      write_value(w, item);
    }
    w.end_object();
  } else {
    static_assert(is_described<T>, "a wire type needs BOOST_DESCRIBE_STRUCT or a Codec");
    w.begin_object();
    write_fields(w, v);
    w.end_object();
  }
}

// The members of a described struct, appended to an already-open object.
template <class T>
void write_fields(JsonWriter& w, const T& v) {
  boost::mp11::mp_for_each<boost::describe::describe_members<T, boost::describe::mod_public>>([&](auto d) {
    using D = decltype(d);
    constexpr unsigned rules = wire_rules<T>(D::name);
    const auto& member = v.*D::pointer;
    if constexpr ((rules & kOmitNull) != 0) {
      if (!member) return;
    }
    if constexpr ((rules & kOmitEmpty) != 0) {
      if (member.empty()) return;
    }
    w.key_literal(QuotedKey<D>::view());
    write_value(w, member);
  });
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

template <class E>
E read_enum(FieldReader& f, std::string_view k) {
  std::string text = f.req_string(k);
  if (!f.ok()) return E{};
  auto e = parse_enum<E>(text);
  if (!e) {
    f.fail("field \"" + std::string(k) + "\" is \"" + excerpt(text, 40) + "\", expected " + vocabulary<E>());
    return E{};
  }
  return *e;
}

// An optional integer that must fit a C int (exit codes, signals, pids): a value that does not
// is refused rather than silently truncated into a different number.
inline int read_int(FieldReader& f, std::string_view k) {
  auto v = f.opt_i64(k);
  if (!v) return 0;
  if (*v < INT32_MIN || *v > INT32_MAX) {
    f.fail("field \"" + std::string(k) + "\" does not fit 32 bits");
    return 0;
  }
  return static_cast<int>(*v);
}

inline void check_digest(FieldReader& f, std::string_view k, const std::string& d) {
  if (f.ok() && !is_digest(d)) f.fail("field \"" + std::string(k) + "\" is not a lowercase hex SHA-256");
}

template <class T>
void read_fields(FieldReader& f, T& out);

// One nested object, read with `context` naming it; its complaint becomes the parent's.
template <class T>
void read_nested(FieldReader& parent, const json::object& o, std::string context, T& out) {
  FieldReader r(o, std::move(context));
  read_fields(r, out);
  if (!r.ok()) parent.fail(r.error());
}

template <class T>
std::optional<std::vector<T>> read_list(FieldReader& f, std::string_view k) {
  const json::array* a = f.opt_array(k);
  if (!a) return std::nullopt;
  std::vector<T> out;
  out.reserve(a->size());
  for (const auto& item : *a) {
    if (!item.is_object()) {
      f.fail("field \"" + std::string(k) + "\" holds " + describe_json(item) + ", expected objects");
      return std::nullopt;
    }
    T one;
    read_nested(f, item.get_object(), std::string(k), one);
    if (!f.ok()) return std::nullopt;
    out.push_back(std::move(one));
  }
  return out;
}

template <unsigned Rules, class T>
void read_field(FieldReader& f, std::string_view k, T& out);

template <class V>
void read_map(FieldReader& f, std::string_view k, const json::object& o, std::map<std::string, V>& out) {
  if constexpr (is_described<V>) {
    for (const auto& kv : o) {
      if (!kv.value().is_object()) {
        f.fail(std::string(k) + " entry \"" + excerpt(kv.key(), 40) + "\" is not an object");
        return;
      }
      V item;
      read_nested(f, kv.value().get_object(), std::string(k), item);
      out.emplace(std::string(kv.key()), std::move(item));
    }
  } else {
    FieldReader entries(o, std::string(k));
    for (const auto& kv : o)
      read_field<0>(entries, kv.key(), out[std::string(kv.key())]);
    if (!entries.ok()) f.fail(entries.error());
  }
}

template <class T>
void read_codec_value(FieldReader& f, const json::value& v, T& out, std::string_view prefix) {
  std::string error;
  if (auto read = Codec<T>::read(v, error))
    out = std::move(*read);
  else
    f.fail(prefix.empty() ? std::move(error) : std::string(prefix) + ": " + error);
}

template <unsigned Rules, class T>
void read_field(FieldReader& f, std::string_view k, T& out) {
  constexpr bool additive = (Rules & kAdditive) != 0;
  if constexpr (has_codec<T>) {
    if constexpr (additive || Codec<T>::kObjectOnly) {
      const json::object* o = additive ? f.opt_object(k) : f.req_object(k);
      if (o) read_codec_value(f, *f.object().if_contains(k), out, {});
    } else if (const json::value* v = f.object().if_contains(k)) {
      read_codec_value(f, *v, out, {});
    } else {
      f.fail("missing required field \"" + std::string(k) + "\"");
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = f.req_string(k);
    if constexpr ((Rules & kDigest) != 0) check_digest(f, k, out);
  } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
    out = f.opt_string(k);
    if constexpr ((Rules & kDigest) != 0) {
      if (out) check_digest(f, k, *out);
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    if constexpr (additive)
      out = f.opt_bool(k).value_or(out);
    else
      out = f.req_bool(k);
  } else if constexpr (std::is_same_v<T, std::optional<bool>>) {
    out = f.opt_bool(k);
  } else if constexpr (std::is_same_v<T, std::uint32_t>) {
    out = f.req_u32(k);
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    out = f.req_u64(k);
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    out = read_int(f, k);
  } else if constexpr (std::is_same_v<T, std::optional<std::uint64_t>>) {
    out = f.opt_u64(k);
  } else if constexpr (std::is_same_v<T, std::optional<std::int64_t>>) {
    out = f.opt_i64(k);
  } else if constexpr (std::is_same_v<T, std::optional<double>>) {
    out = f.opt_f64(k);
  } else if constexpr (std::is_enum_v<T>) {
    out = read_enum<T>(f, k);
  } else if constexpr (std::is_same_v<T, json::value>) {
    if constexpr ((Rules & kPresent) != 0) {
      if (!f.object().contains(k)) f.fail("missing required field \"" + std::string(k) + "\"");
    }
    out = f.any(k);
  } else if constexpr (std::is_same_v<T, std::optional<std::vector<std::string>>>) {
    out = f.opt_strings(k);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    out = f.strings_or_empty(k);
  } else if constexpr (is_vector<T>::value) {
    out = read_list<typename T::value_type>(f, k).value_or(T{});
  } else if constexpr (is_name_map<T>::value) {
    if (const json::object* o = f.req_object(k)) read_map(f, k, *o, out);
  } else if constexpr (is_described<T>) {
    const json::object* o = additive ? f.opt_object(k) : f.req_object(k);
    if (o) read_nested(f, *o, std::string(k), out);
  } else {
    static_assert(is_optional<T>::value, "no wire reading for this member type");
    using V = typename T::value_type;
    if constexpr (has_codec<V>) {
      // An optional tagged value says which field its complaint is about.
      if (const json::value* v = f.object().if_contains(k); v && !v->is_null()) {
        V item;
        read_codec_value(f, *v, item, k);
        if (f.ok()) out = std::move(item);
      }
    } else if constexpr (is_vector<V>::value) {
      out = read_list<typename V::value_type>(f, k);
    } else if (const json::object* o = f.opt_object(k)) {
      out.emplace();
      if constexpr (is_name_map<V>::value)
        read_map(f, k, *o, *out);
      else
        read_nested(f, *o, std::string(k), *out);
    }
  }
}

// The members of a described struct, in description order, then its cross-field check.
template <class T>
void read_fields(FieldReader& f, T& out) {
  boost::mp11::mp_for_each<boost::describe::describe_members<T, boost::describe::mod_public>>([&](auto d) {
    using D = decltype(d);
    read_field<wire_rules<T>(D::name)>(f, D::name, out.*D::pointer);
  });
  Check<T>::check(f, out);
}

// A payload variant's alternatives, one reader each, indexed like the variant.
template <class Variant, std::size_t I>
Variant read_alternative(FieldReader& f) {
  std::variant_alternative_t<I, Variant> payload;
  read_fields(f, payload);
  return Variant(std::in_place_index<I>, std::move(payload));
}
template <class Variant, std::size_t... I>
constexpr auto make_readers(std::index_sequence<I...>) {
  return std::array<Variant (*)(FieldReader&), sizeof...(I)>{&read_alternative<Variant, I>...};
}
template <class Variant>
inline constexpr auto kReaders = make_readers<Variant>(std::make_index_sequence<std::variant_size_v<Variant>>{});

template <class Variant>
void write_alternative(JsonWriter& w, const Variant& payload) {
  std::visit([&](const auto& p) { write_fields(w, p); }, payload);
}

// ---------------------------------------------------------------------------------------------
// Codecs and checks
// ---------------------------------------------------------------------------------------------

template <>
struct Codec<Decision> {
  static constexpr bool kObjectOnly = false;  // "allow" and "abstain" may be bare strings
  static void write(JsonWriter& w, const Decision& d) { write_decision(w, d); }
  static std::optional<Decision> read(const json::value& v, std::string& error) { return read_decision(v, error); }
};

template <>
struct Codec<StepOutcome> {
  static constexpr bool kObjectOnly = true;
  static void write(JsonWriter& w, const StepOutcome& o) { protocol::write(w, o); }
  static std::optional<StepOutcome> read(const json::value& v, std::string& error) {
    return read_step_outcome(v, error);
  }
};

template <>
struct Codec<CommandOutcome> {
  static constexpr bool kObjectOnly = true;
  static void write(JsonWriter& w, const CommandOutcome& o) { write_outcome(w, o); }
  static std::optional<CommandOutcome> read(const json::value& v, std::string& error) {
    return read_outcome(v.get_object(), error);
  }
};

// `code` only for exited, `signal` only for signaled.
template <>
struct Codec<ProcessTermination> {
  static constexpr bool kObjectOnly = true;
  static void write(JsonWriter& w, const ProcessTermination& p) { protocol::write(w, p); }
  static std::optional<ProcessTermination> read(const json::value& v, std::string& error) {
    FieldReader r(v.get_object(), "process");
    ProcessTermination p;
    p.kind = read_enum<ProcessKind>(r, "kind");
    if (r.ok() && p.kind == ProcessKind::exited) p.code = read_int(r, "code");
    if (r.ok() && p.kind == ProcessKind::signaled) p.signal = read_int(r, "signal");
    if (r.ok()) return p;
    error = r.error();
    return std::nullopt;
  }
};

// A frame.set carries the sealed frame document (its own canonical form, protocol/frame.hpp).
template <>
struct Codec<Frame> {
  static constexpr bool kObjectOnly = false;  // frame_from_json names what else it found
  static void write(JsonWriter& w, const Frame& frame) { w.value(frame_to_json(frame, true)); }
  static std::optional<Frame> read(const json::value& v, std::string& error) {
    auto frame = frame_from_json(v, /*require_sealed=*/true);
    if (frame) return std::move(*frame);
    error = "the frame is refused (" + std::string(to_string(frame.error().kind)) + "): " + frame.error().message;
    return std::nullopt;
  }
};

template <>
struct Check<StepRef> {
  static void check(FieldReader& f, const StepRef& s) {
    if (f.ok() && s.attempt == 0) f.fail("field \"attempt\" counts from 1");
  }
};

template <>
struct Check<cmd::PermissionSet> {
  static void check(FieldReader& f, const cmd::PermissionSet& p) {
    if (f.ok() && p.posture.empty()) f.fail("field \"posture\" is empty");
  }
};

template <>
struct Check<CutField> {
  static void check(FieldReader& f, const CutField& c) {
    if (f.ok() && c.form != "text" && c.form != "json")
      f.fail("field \"form\" is \"" + excerpt(c.form, 20) + "\", expected text or json");
    if (f.ok() && !is_digest(c.digest)) f.fail("field \"digest\" is not a lowercase hex SHA-256");
    if (f.ok() && c.kept > c.bytes)
      f.fail("kept " + std::to_string(c.kept) + " is more than bytes " + std::to_string(c.bytes));
  }
};

}  // namespace mh::protocol::wire
