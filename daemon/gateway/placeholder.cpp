// The run's placeholder token: worth nothing but at its own gateway, so it may sit in the run's
// environment. Random from the CSPRNG so one run cannot guess another's.
#include <openssl/rand.h>

#include <array>
#include <stdexcept>

#include "daemon/gateway/gateway.hpp"

namespace mh::gateway {

std::string placeholder_token(std::string_view run_id) {
  std::array<unsigned char, 16> random{};
  // RAND_bytes fails only when the CSPRNG cannot be seeded: no token is better than a guessable one.
  if (RAND_bytes(random.data(), static_cast<int>(random.size())) != 1)
    throw std::runtime_error("placeholder_token: the CSPRNG is not available");
  static constexpr char hex[] = "0123456789abcdef";
  std::string token = "mh-run-";
  token.append(run_id).push_back('-');
  for (unsigned char byte : random) {
    token.push_back(hex[byte >> 4]);
    token.push_back(hex[byte & 0xF]);
  }
  return token;
}

}  // namespace mh::gateway
