// metaharness.socket/1 (docs/socket-api.md): request reading and reply writing, shared by the
// daemon and the client verbs. No I/O here.
#pragma once

#include <boost/system/result.hpp>
#include <optional>
#include <string>

#include "protocol/json.hpp"

namespace mh::daemon {

namespace json = boost::json;

inline constexpr std::string_view kSocketFormat = "metaharness.socket/1";

struct SocketRequest {
  std::string name;
  std::optional<std::string> id;
  json::object body;
};

struct SocketRefusal {
  std::string code;  // NOT_JSON, UNKNOWN_FORMAT, UNKNOWN_REQUEST, MALFORMED, ...
  std::string reason;
  std::optional<std::string> id;
};

// What a line on a connection is, by its format tag.
enum class LineKind { request, command, other };
LineKind classify_line(std::string_view line);

// A request line: refused by name when it is not one (NOT_JSON, UNKNOWN_FORMAT, MALFORMED), or
// names no request of the table (UNKNOWN_REQUEST, naming the vocabulary: requests.hpp).
boost::system::result<SocketRequest, SocketRefusal> read_request(std::string_view line);
// The request names, in table order: "submit, list, …".
std::string request_vocabulary();

// One reply line (no trailing newline): format, reply, id, then the fields in order.
std::string reply_line(std::string_view reply, const std::optional<std::string>& id, const json::object& fields = {});
std::string refusal_line(const SocketRefusal& refusal);
std::string refusal_line(std::string_view code, std::string reason, const std::optional<std::string>& id);

// A request line, for clients.
std::string request_line(std::string_view request, const std::optional<std::string>& id,
                         const json::object& fields = {});

}  // namespace mh::daemon
