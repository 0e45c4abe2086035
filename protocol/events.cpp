// Events: the names table, the envelope and the payload dispatch. Each payload's fields are
// described once (events.hpp) and written and read by protocol/wire_codec.hpp.
#include "protocol/events.hpp"

#include <cstdint>

#include "protocol/reader.hpp"
#include "protocol/wire_codec.hpp"

namespace mh::protocol {

namespace {

// Name -> index table, built once from the variant's alternatives.
template <std::size_t... I>
constexpr std::array<std::string_view, kEventCount> make_event_names(std::index_sequence<I...>) {
  return {std::variant_alternative_t<I, EventPayload>::kName...};
}
constexpr auto kEventNames = make_event_names(std::make_index_sequence<kEventCount>{});

std::string event_vocabulary() {
  std::string out;
  for (std::size_t i = 0; i < kEventNames.size(); ++i) {
    if (i > 0) out += ", ";
    out += kEventNames[i];
  }
  return out;
}

}  // namespace

std::string_view event_name(const EventPayload& payload) {
  return kEventNames[payload.index()];
}

const std::array<std::string_view, kEventCount>& event_names() {
  return kEventNames;
}

void write_payload(JsonWriter& w, const EventPayload& payload) {
  wire::write_alternative(w, payload);
}

void serialize_to(std::string& out, const Event& event) {
  JsonWriter w(out);
  w.begin_object();
  w.field("format", kEventFormat);
  w.key("seq");
  w.uinteger(event.seq);
  w.field("run", event.run);
  if (event.at) w.field("at", *event.at);
  if (event.recorded_at) w.field("recorded_at", *event.recorded_at);
  w.field("event", event_name(event.payload));
  write_payload(w, event.payload);
  if (!event.cut.empty()) {
    w.key("cut");
    wire::write_value(w, event.cut);
  }
  w.end_object();
}

bool read_cut_fields(const json::object& line, std::vector<CutField>& out, std::string& error) {
  out.clear();
  const json::value* v = line.if_contains("cut");
  if (!v || v->is_null()) return true;
  if (!v->is_array()) {
    error = "field \"cut\" is " + describe_json(*v) + ", expected an array";
    return false;
  }
  FieldReader f(line, "");
  out = wire::read_list<CutField>(f, "cut").value_or(std::vector<CutField>{});
  if (!f.ok()) {
    error = f.error();
    return false;
  }
  return true;
}

std::string serialize(const Event& event) {
  std::string out;
  out.reserve(256);
  serialize_to(out, event);
  return out;
}

boost::system::result<EventPayload, LineRefusal> read_event_payload(std::string_view name, const json::object& object) {
  for (std::size_t i = 0; i < kEventNames.size(); ++i) {
    if (kEventNames[i] != name) continue;
    FieldReader f(object, "");
    EventPayload payload = wire::kReaders<EventPayload>[i](f);
    if (!f.ok())
      return LineRefusal{LineRefusalKind::Malformed, "malformed " + std::string(name) + ": " + f.error(), std::nullopt};
    return payload;
  }
  return LineRefusal{LineRefusalKind::UnknownName,
                     "unknown event \"" + excerpt(name, 60) + "\"; the vocabulary is " + event_vocabulary(),
                     std::nullopt};
}

}  // namespace mh::protocol
