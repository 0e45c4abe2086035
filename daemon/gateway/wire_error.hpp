// The answers the gateway gives itself (a refused token, route or budget, an upstream it cannot
// reach), in the wire's own error shape so the vendor surfaces them as it would its provider's.
#pragma once

#include <string>
#include <string_view>

#include "daemon/gateway/gateway.hpp"

namespace mh::gateway {

// Anthropic: {"type":"error","error":{"type":TYPE,"message":MESSAGE}}
// OpenAI:    {"error":{"message":MESSAGE,"type":TYPE,"param":null,"code":CODE}} (code null when empty)
// Gemini:    {"error":{"code":STATUS,"message":MESSAGE,"status":RPC_STATUS,"details":[{"@type":
//            "type.googleapis.com/google.rpc.ErrorInfo","reason":CODE,"domain":"metaharness"}]}}
//            (RPC_STATUS from the HTTP status: 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 429
//            RESOURCE_EXHAUSTED, 5xx INTERNAL/UNAVAILABLE, else INVALID_ARGUMENT; TYPE unused)
std::string wire_error_body(Wire wire, std::string_view type, std::string_view message, std::string_view code = {},
                            unsigned status = 400);

}  // namespace mh::gateway
