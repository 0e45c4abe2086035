// The gateway as its host sees it: prepare (the credential, the TLS context), serve acceptors,
// stop. One connection's conversation is gateway_session.cpp.
#include "daemon/gateway/gateway.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <cstdlib>

#include "daemon/gateway/gateway_impl.hpp"
#include "daemon/gateway/serve_acceptor.hpp"

namespace mh::gateway {

namespace {

// The system's trust store for a TLS upstream, as OpenSSL's default verify paths name it, but
// its directory (/etc/ssl/certs: one file per CA, named by the hash of its subject) looked up per
// issuer at verification instead of the whole bundle (cert.pem, ~140 CAs) parsed up front, which
// costs ~19 ms of CPU and ~1 MiB in every run's gateway (bench/RESULTS.md, round 13). Debian's
// update-ca-certificates writes both from the same CAs. A bundle the environment names
// ($SSL_CERT_FILE) is still loaded whole, as OpenSSL's defaults would.
void use_system_trust(asio::ssl::context& context, boost::system::error_code& ec) {
  SSL_CTX* handle = context.native_handle();
  if (::SSL_CTX_set_default_verify_dir(handle) != 1) {
    ec = boost::system::error_code(static_cast<int>(::ERR_get_error()), boost::asio::error::get_ssl_category());
    return;
  }
  const char* bundle = std::getenv(::X509_get_default_cert_file_env());
  if (bundle && *bundle && ::SSL_CTX_set_default_verify_file(handle) != 1)
    ec = boost::system::error_code(static_cast<int>(::ERR_get_error()), boost::asio::error::get_ssl_category());
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <class Acceptor>
void serve_on(const std::shared_ptr<Gateway::State>& state, Acceptor acceptor) {
  serve_acceptor(
      state, std::move(acceptor),
      [](const std::shared_ptr<Gateway::State>& s, typename Acceptor::protocol_type::socket socket) {
        spawn_session(s, std::move(socket));
      },
      [](Gateway::State& s) -> std::optional<std::string> {
        if (s.prepared) return std::nullopt;
        s.log("gateway: serve() before a successful prepare(): not serving");
        return "not prepared";
      });
}

}  // namespace

std::string Gateway::State::key_for_request() {
  if (credential) {
    credential->refresh(hooks.log);
    std::lock_guard lock(key_mutex);
    key = credential->key();
  }
  std::lock_guard lock(key_mutex);
  return key;
}

void Gateway::State::refused(const std::string& method, const std::string& path) {
  if (routes_told.size() >= kMaxRoutesTold) return;
  if (!routes_told.emplace(method, path).second) return;
  if (hooks.refused_route) hooks.refused_route(method, path);
  if (routes_told.size() == kMaxRoutesTold)
    log("gateway: " + std::to_string(kMaxRoutesTold) + " refused routes told; further ones are refused untold");
}

bool Gateway::State::adopt(const std::shared_ptr<SessionBase>& session) {
  if (stopped) return false;
  std::erase_if(sessions, [](const std::weak_ptr<SessionBase>& s) { return s.expired(); });
  if (sessions.size() >= options.max_connections) {
    if (!told_connection_limit)
      log("gateway: " + std::to_string(options.max_connections) +
          " connections already open; further ones are closed until some end");
    told_connection_limit = true;
    return false;
  }
  sessions.push_back(session);
  return true;
}

void Gateway::State::stop_now() {
  if (stopped) return;
  stopped = true;
  for (auto& close : acceptor_closers)
    close();
  acceptor_closers.clear();
  for (auto& weak : sessions)
    if (auto s = weak.lock()) s->close_now();
  sessions.clear();
}

Gateway::Gateway(asio::io_context& io, GatewayOptions options, GatewayHooks hooks)
    : state_(std::make_shared<State>(io, std::move(options), std::move(hooks))) {}

Gateway::~Gateway() {
  stop();
}

std::optional<std::string> Gateway::prepare() {
  State& s = *state_;
  if (s.prepared) return std::nullopt;
  if (s.options.token.empty()) return "gateway: no placeholder token to accept";
  auto parsed = parse_upstream_url(s.options.upstream.url);
  if (!parsed.url) return "gateway: upstream '" + s.options.upstream.name + "': " + parsed.error;
  s.url = std::move(*parsed.url);
  s.key_header = lower(s.options.upstream.header.empty() ? default_key_header(s.options.upstream.wire)
                                                         : std::string_view(s.options.upstream.header));
  if (s.options.upstream.key) {
    // Empty: an endpoint that takes no key (a run's raw model_endpoint named none); the vendor's
    // placeholder is still checked and stripped, and no key header is added.
    s.key = *s.options.upstream.key;
  } else {
    if (s.options.upstream.credential.empty())
      return "gateway: upstream '" + s.options.upstream.name + "' names no credential";
    CredentialFile file(s.options.upstream.credential);
    if (auto refused = file.load()) return "gateway: upstream '" + s.options.upstream.name + "': " + *refused;
    s.key = file.key();
    s.credential.emplace(std::move(file));
  }
  // A TLS context even for a plain upstream: the upstream stream type is one (see the session).
  // Its trust is loaded only when the upstream speaks TLS: a plain upstream's context never
  // verifies anything.
  asio::ssl::context context(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  context.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                      ec);
  if (!ec) context.set_verify_mode(asio::ssl::verify_peer, ec);
  if (!ec && s.url.tls) {
    if (s.options.upstream.ca_file)
      context.load_verify_file(s.options.upstream.ca_file->string(), ec);
    else
      use_system_trust(context, ec);
  }
  if (ec)
    return "gateway: upstream '" + s.options.upstream.name + "': cannot use " +
           (s.options.upstream.ca_file ? "ca_file " + s.options.upstream.ca_file->string() : "the system's CA store") +
           ": " + ec.message();
  s.tls.emplace(std::move(context));
  s.prepared = true;
  return std::nullopt;
}

void Gateway::serve(asio::local::stream_protocol::acceptor acceptor) {
  serve_on(state_, std::move(acceptor));
}

void Gateway::serve(asio::ip::tcp::acceptor acceptor) {
  serve_on(state_, std::move(acceptor));
}

void Gateway::stop() {
  asio::post(state_->io, [state = state_] { state->stop_now(); });
}

std::string Gateway::current_key() const {
  return state_->current_key();
}

}  // namespace mh::gateway
