// A throwaway certificate authority for tests that need HTTPS on loopback (the model gateway's
// upstream, real vendor CLIs trusting it through NODE_EXTRA_CA_CERTS / SSL_CERT_FILE): a CA and
// one leaf for 127.0.0.1, ::1 and localhost, made with the OpenSSL library (no openssl binary)
// and written as PEM files into a directory the test owns.
//
//   mh::testing::TestCa ca(dir);
//   ASSERT_TRUE(ca.ok()) << ca.error();
//   serve with ca.cert_file() + ca.key_file(); trust ca.ca_file().
#pragma once

#include <filesystem>
#include <string>

namespace mh::testing {

class TestCa {
 public:
  // Generates a fresh CA (P-256, valid from an hour ago for a day) and the leaf it signs.
  explicit TestCa(const std::filesystem::path& directory);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }  // why generation failed

  std::filesystem::path ca_file() const { return directory_ / "ca.pem"; }      // the CA certificate
  std::filesystem::path cert_file() const { return directory_ / "leaf.pem"; }  // the leaf, then the CA
  std::filesystem::path key_file() const { return directory_ / "leaf.key"; }   // the leaf's key

 private:
  std::filesystem::path directory_;
  std::string error_;
};

}  // namespace mh::testing
