#include "tests/support/nkeys.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace mh::test {

namespace {

// The nkeys prefixes: a seed's first 5 bits say "seed" (S), a user's "user" (U).
constexpr std::uint8_t kPrefixSeed = 18 << 3;
constexpr std::uint8_t kPrefixUser = 20 << 3;

// CRC-16/XMODEM (polynomial 0x1021, initial 0), as nkeys checks it.
std::uint16_t crc16(const std::vector<std::uint8_t>& bytes) {
  std::uint16_t crc = 0;
  for (std::uint8_t b : bytes) {
    crc ^= static_cast<std::uint16_t>(b << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc =
          (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021) : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

// RFC 4648 base32, no padding.
std::string base32(const std::vector<std::uint8_t>& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (std::uint8_t b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += kAlphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kAlphabet[(buffer << (5 - bits)) & 31];
  return out;
}

// The prefix bytes, the key, and the CRC of both (little-endian), in base32.
std::string encode(std::vector<std::uint8_t> raw, const std::array<std::uint8_t, 32>& key) {
  raw.insert(raw.end(), key.begin(), key.end());
  std::uint16_t crc = crc16(raw);
  raw.push_back(static_cast<std::uint8_t>(crc & 0xff));
  raw.push_back(static_cast<std::uint8_t>(crc >> 8));
  return base32(raw);
}

}  // namespace

UserNKey new_user_nkey() {
  std::array<std::uint8_t, 32> seed{}, pub{};
  if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) throw std::runtime_error("RAND_bytes failed");
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()), &EVP_PKEY_free);
  std::size_t len = pub.size();
  if (!key || EVP_PKEY_get_raw_public_key(key.get(), pub.data(), &len) != 1 || len != pub.size())
    throw std::runtime_error("OpenSSL made no Ed25519 key");
  // A seed carries its key's type in the bits after its own prefix.
  const std::uint8_t seed_b1 = kPrefixSeed | (kPrefixUser >> 5);
  const std::uint8_t seed_b2 = static_cast<std::uint8_t>((kPrefixUser & 31) << 3);
  return UserNKey{encode({seed_b1, seed_b2}, seed), encode({kPrefixUser}, pub)};
}

}  // namespace mh::test
