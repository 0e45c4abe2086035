// A fresh NATS user NKey pair for tests, made at run time: an Ed25519 key from OpenSSL, written
// the way NATS writes keys (nkeys: a prefix byte, the 32 raw bytes, a CRC-16/XMODEM, base32
// without padding). The seed ("SU…") is what a client signs with (libnats'
// natsOptions_SetNKeyFromSeed); the public key ("U…") is what nats-server's config names.
// Only the encoding is ours; the key and its public half are OpenSSL's.
#pragma once

#include <string>

namespace mh::test {

struct UserNKey {
  std::string seed;        // SU…, 58 characters
  std::string public_key;  // U…, 56 characters
};

UserNKey new_user_nkey();  // throws std::runtime_error when OpenSSL cannot make a key

}  // namespace mh::test
