#include "protocol/vendor_line.hpp"

#include "protocol/digest.hpp"

namespace mh::protocol {

ClassifiedLine classify_vendor_line(const FramedLine& line) {
  if (line.too_long) return ev::Opaque{std::nullopt, std::nullopt, line.digest, line.number};
  if (line.text.find_first_not_of(" \t\r") == std::string_view::npos) return BlankLine{};
  auto value = parse_json(line.text);
  if (!value || !value->is_object()) return ev::Opaque{std::nullopt, std::nullopt, sha256_hex(line.text), line.number};
  return std::move(value->get_object());
}

}  // namespace mh::protocol
