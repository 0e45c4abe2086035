// SHA-256 as the wire uses it: lowercase hex, 64 characters.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace mh::protocol {

std::string sha256_hex(std::string_view bytes);

// Incremental form, for digests of lines too long to hold in memory (an oversized vendor line
// still gets an exact `opaque` digest) and of files.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  void update(std::string_view bytes);
  // Finishes and resets, so the object can digest the next input.
  std::string finish_hex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

bool is_digest(std::string_view text);  // 64 lowercase hex characters

// OpenSSL loads and resolves its SHA-256 provider on first use (about a millisecond). Programs
// call this once at start so no request ever pays for it.
void warm_up_digests();

}  // namespace mh::protocol
