// The lenient getters of protocol/json.hpp: vendor records read field by field, where a field
// that is missing or of another type is unknown. Kept apart from the writer (json.cpp), the parser
// (json_parse.cpp) and FieldReader (json_field_reader.cpp), which are the wire's own.
#include "protocol/json.hpp"

namespace mh::protocol {

std::optional<std::uint64_t> as_u64(const json::value& v) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
  return std::nullopt;
}

std::optional<double> as_f64(const json::value& v) {
  if (v.is_double()) return v.get_double();
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return std::nullopt;
}

std::optional<std::string> string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v && v->is_string()) return std::string(v->get_string());
  return std::nullopt;
}

std::optional<bool> bool_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v && v->is_bool()) return v->get_bool();
  return std::nullopt;
}

std::optional<std::uint64_t> u64_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? as_u64(*v) : std::nullopt;
}

std::optional<std::uint64_t> u64_at(const json::object& o, std::initializer_list<std::string_view> keys) {
  for (auto key : keys)
    if (auto n = u64_at(o, key)) return n;
  return std::nullopt;
}

std::optional<double> f64_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? as_f64(*v) : std::nullopt;
}

const json::object* object_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

const json::array* array_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_array() ? &v->get_array() : nullptr;
}

std::optional<std::vector<std::string>> strings_at(const json::object& o, std::string_view key) {
  const json::array* a = array_at(o, key);
  if (!a) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& e : *a)
    if (e.is_string()) out.emplace_back(e.get_string());
  return out;
}

}  // namespace mh::protocol
