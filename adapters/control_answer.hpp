// The answers of a control request (part of the session seam's vocabulary, session.hpp): the
// vendor's own answer to one metaharness sent (ControlReply), and how a session handled a
// command right away (ControlAck).
#pragma once

#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <utility>

#include "protocol/events.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

// The vendor's answer to a control request metaharness sent.
struct ControlReply {
  std::string control_id;
  bool ok = true;
  std::string vendor_error;  // the vendor's own words when !ok
  // The refusal code a vendor error maps to (e.g. a vendor's "no active turn" is TOO_LATE).
  proto::RefusalCode refusal_code = proto::RefusalCode::UNSUPPORTED_CONTROL;
  json::value response;
};

// How a controller handled a command right away.
struct ControlAck {
  enum class Kind { done, pending_vendor, refused } kind = Kind::done;
  proto::CommandOutcome outcome;  // for done / refused; for pending_vendor, the ok it becomes
  std::string control_id;         // pending_vendor: resolve when the vendor answers this id

  static ControlAck done(std::optional<std::string> applies_at = std::nullopt) {
    return {Kind::done, proto::CommandOutcome::ok(std::move(applies_at)), {}};
  }
  static ControlAck pending(std::string control_id, std::optional<std::string> applies_at = std::nullopt) {
    return {Kind::pending_vendor, proto::CommandOutcome::ok(std::move(applies_at)), std::move(control_id)};
  }
  static ControlAck refused(proto::RefusalCode code, std::string reason) {
    return {Kind::refused, proto::CommandOutcome::refused(code, std::move(reason)), {}};
  }
};

}  // namespace mh::adapters
