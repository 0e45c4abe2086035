#include "tests/support/test_ca.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <functional>
#include <memory>

namespace mh::testing {

namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_NAME* p) const { X509_NAME_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
};
template <class T>
using Owned = std::unique_ptr<T, Free>;

std::string openssl_error(const std::string& what) {
  char text[256] = {};
  ERR_error_string_n(ERR_get_error(), text, sizeof text);
  return what + ": " + text;
}

Owned<EVP_PKEY> new_key() {
  return Owned<EVP_PKEY>(EVP_EC_gen("P-256"));
}

bool add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  Owned<X509_EXTENSION> extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value));
  return extension && X509_add_ext(cert, extension.get(), -1) == 1;
}

// A certificate for `key` named `common_name`, signed by `issuer_key` (issuer null: self-signed).
Owned<X509> make_certificate(EVP_PKEY* key, const char* common_name, X509* issuer, EVP_PKEY* issuer_key, bool ca) {
  Owned<X509> cert(X509_new());
  if (!cert) return nullptr;
  X509_set_version(cert.get(), 2);  // v3
  Owned<BIGNUM> serial(BN_new());
  if (!serial || !BN_rand(serial.get(), 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())))
    return nullptr;
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("metaharness tests"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  bool added = ca ? add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
                        add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
                        add_extension(cert.get(), signer, NID_subject_key_identifier, "hash")
                  : add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
                        add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature") &&
                        add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth") &&
                        add_extension(cert.get(), signer, NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost") &&
                        add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (!added) return nullptr;
  if (X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

bool write_pem(const std::filesystem::path& path, const std::function<int(BIO*)>& write, mode_t mode) {
  Owned<BIO> bio(BIO_new_file(path.c_str(), "w"));
  if (!bio) return false;
  const bool ok = write(bio.get()) == 1;
  bio.reset();
  return ok && ::chmod(path.c_str(), mode) == 0;
}

}  // namespace

TestCa::TestCa(const std::filesystem::path& directory) : directory_(directory) {
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  if (ec) {
    error_ = "cannot create " + directory_.string() + ": " + ec.message();
    return;
  }
  Owned<EVP_PKEY> ca_key = new_key();
  Owned<EVP_PKEY> leaf_key = new_key();
  if (!ca_key || !leaf_key) {
    error_ = openssl_error("key generation");
    return;
  }
  Owned<X509> ca = make_certificate(ca_key.get(), "metaharness test CA", nullptr, nullptr, true);
  if (!ca) {
    error_ = openssl_error("CA certificate");
    return;
  }
  Owned<X509> leaf = make_certificate(leaf_key.get(), "localhost", ca.get(), ca_key.get(), false);
  if (!leaf) {
    error_ = openssl_error("leaf certificate");
    return;
  }
  const bool written =
      write_pem(
          ca_file(), [&](BIO* b) { return PEM_write_bio_X509(b, ca.get()); }, 0644) &&
      write_pem(
          cert_file(),
          [&](BIO* b) { return PEM_write_bio_X509(b, leaf.get()) == 1 ? PEM_write_bio_X509(b, ca.get()) : 0; }, 0644) &&
      write_pem(
          key_file(),
          [&](BIO* b) { return PEM_write_bio_PrivateKey(b, leaf_key.get(), nullptr, nullptr, 0, nullptr, nullptr); },
          0600);
  if (!written) error_ = openssl_error("writing the PEM files into " + directory_.string());
}

}  // namespace mh::testing
