#include "protocol/digest.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace mh::protocol {

namespace {
// The method is fetched from the provider once (OpenSSL 3): EVP_sha256() would make every
// digest repeat an implicit fetch.
const EVP_MD* sha256_method() {
  static const EVP_MD* method = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched ? fetched : EVP_sha256();
  }();
  return method;
}

std::string to_hex(const unsigned char* bytes, unsigned int n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(static_cast<std::size_t>(n) * 2, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 0xF];
  }
  return out;
}
}  // namespace

struct Sha256::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  State() {
    if (!ctx || EVP_DigestInit_ex(ctx, sha256_method(), nullptr) != 1)
      throw std::runtime_error("OpenSSL could not initialise SHA-256");
  }
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(std::string_view bytes) {
  EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
}

std::string Sha256::finish_hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(state_->ctx, md, &n);
  EVP_DigestInit_ex(state_->ctx, sha256_method(), nullptr);
  return to_hex(md, n);
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, sha256_method(), nullptr);
  return to_hex(md, n);
}

bool is_digest(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace mh::protocol

namespace mh::protocol {
void warm_up_digests() {
  (void)sha256_hex("metaharness");
}
}  // namespace mh::protocol
