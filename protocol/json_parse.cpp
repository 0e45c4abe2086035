// parse_json: JSON text to a value, with number handling that matches the reference
// implementation (serde_json). Kept apart from the writer and the field reader because it is the
// one piece built on Boost.JSON's parser internals (basic_parser_impl, detail::handler).
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/detail/handler.hpp>
#include <boost/json/detail/impl/handler.ipp>
#include <boost/json/error.hpp>
#include <boost/json/value_stack.hpp>
#include <charconv>
#include <cmath>
#include <string>

#include "protocol/json.hpp"

namespace mh::protocol {

namespace {

// Boost.JSON 1.81 converts decimal text to a double with a fast algorithm that is one ulp off
// for roughly one number in ten (e.g. 949.3012028926441 reads as 949.30120289264403). Since
// vendor JSON is re-serialised rather than copied, that would silently alter numbers on the
// wire. This handler is Boost's own value-building handler (detail::handler, whose callbacks it
// inherits) with the number callbacks replaced (hidden: the parser calls them by name) to match
// serde_json, the reference implementation's parser:
//   * a double is converted from its text by std::from_chars, which rounds correctly;
//   * a number too large for a double is an error ("number out of range" in serde_json), not
//     an infinity that could only be written back as null;
//   * "-0" reads as the float -0.0, not the integer 0.
struct PreciseHandler : json::detail::handler {
  // Text of a number split across input buffers. One whole text is parsed in one call, so
  // this stays empty in practice; it is kept so the handler is correct whatever the parser does.
  std::string number_head;

  PreciseHandler(json::storage_ptr sp, unsigned char* buffer, std::size_t size)
      : json::detail::handler(std::move(sp), buffer, size) {}

  bool on_number_part(json::string_view s, boost::system::error_code&) {
    number_head.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, json::string_view s, boost::system::error_code&) {
    bool negative_zero = i == 0 && (number_head.empty() ? (!s.empty() && s[0] == '-') : number_head[0] == '-');
    number_head.clear();
    if (negative_zero)
      st.push_double(-0.0);
    else
      st.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, boost::system::error_code&) {
    number_head.clear();
    st.push_uint64(u);
    return true;
  }
  bool on_double(double approximate, json::string_view s, boost::system::error_code& ec) {
    std::string_view text(s.data(), s.size());
    if (!number_head.empty()) {
      number_head.append(s.data(), s.size());
      text = number_head;
    }
    double exact = 0;
    auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), exact);
    number_head.clear();
    if (status == std::errc::result_out_of_range) {
      if (std::isinf(approximate)) {
        ec = json::error::exponent_overflow;  // no double can hold it
        return false;
      }
      exact = approximate;  // underflow: Boost and serde_json both read it as zero
    } else if (status != std::errc() || end != text.data() + text.size()) {
      exact = approximate;  // cannot happen for JSON number grammar; keep Boost's reading
    }
    st.push_double(exact);
    return true;
  }
};

}  // namespace

std::optional<json::value> parse_json(std::string_view text, std::string* error) {
  json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  // The same small-document stack buffer json::parse uses, so typical lines build their value
  // without a temporary heap allocation.
  unsigned char temp[4096];
  json::basic_parser<PreciseHandler> parser(options, json::storage_ptr(), temp, sizeof temp);
  boost::system::error_code ec;
  std::size_t used = parser.write_some(false, text.data(), text.size(), ec);
  if (!ec && used < text.size()) ec = json::error::extra_data;
  if (ec) {
    if (error) *error = ec.message();
    return std::nullopt;
  }
  return parser.handler().st.release();
}

}  // namespace mh::protocol
