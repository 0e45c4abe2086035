// The answers the gateway gives itself (a refused token, route or budget, an upstream it cannot
// reach), in the wire's own error shape so the vendor surfaces them as it would its provider's.
#pragma once

#include <string>
#include <string_view>

#include "daemon/gateway/gateway.hpp"

namespace mh::gateway {

// Anthropic: {"type":"error","error":{"type":TYPE,"message":MESSAGE}}
// OpenAI:    {"error":{"message":MESSAGE,"type":TYPE,"param":null,"code":CODE}} (code null when empty)
std::string wire_error_body(Wire wire, std::string_view type, std::string_view message, std::string_view code = {});

}  // namespace mh::gateway
