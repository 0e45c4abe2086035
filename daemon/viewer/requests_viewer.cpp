// The `viewer` request: a token for the viewer page on the [http] listener (viewer_routes.hpp,
// docs/viewer.md), with at most the asking peer's own role, and the page's address carrying it.
#include "daemon/log.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_summary.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"

namespace mh::daemon {

namespace {

constexpr std::chrono::seconds kDefaultTtl{12 * 3600};

std::optional<Role> role_named(std::string_view name) {
  for (Role r : {Role::observe, Role::control, Role::admin})
    if (to_string(r) == name) return r;
  return std::nullopt;
}

}  // namespace

boost::asio::awaitable<void> handle_viewer(Session& s, const SocketRequest& r) {
  Server& server = s.server();
  if (server.http_address.empty()) {
    s.refuse("NOT_CONFIGURED",
             "the viewer is served on the [http] listener, and this daemon's config sets no [http] listen", r.id);
    co_return;
  }
  Role role = s.role();
  if (const json::value* v = r.body.if_contains("role"); v && !v->is_null()) {
    auto named = v->is_string() ? role_named(v->get_string()) : std::nullopt;
    if (!named) {
      s.refuse("MALFORMED", "\"role\" is observe, control or admin", r.id);
      co_return;
    }
    if (*named > s.role()) {
      s.forbid("a viewer token carries at most the asking peer's role (" + std::string(to_string(s.role())) +
                   "), not " + std::string(to_string(*named)),
               r.id);
      co_return;
    }
    role = *named;
  }
  std::chrono::seconds ttl = kDefaultTtl;
  if (const json::value* v = r.body.if_contains("ttl_s"); v && !v->is_null()) {
    if (!v->is_int64() && !v->is_uint64()) {
      s.refuse("MALFORMED", "\"ttl_s\" is a whole number of seconds", r.id);
      co_return;
    }
    ttl = std::chrono::seconds(v->is_int64() ? v->get_int64() : static_cast<std::int64_t>(v->get_uint64()));
  }
  std::string why_not;
  auto minted = server.viewer_tokens.mint(role, s.peer().identity(), ttl, std::chrono::system_clock::now(), why_not);
  if (!minted) {
    s.refuse("REFUSED", why_not, r.id);
    co_return;
  }
  log(LogPriority::info, "viewer: a " + std::string(to_string(role)) + " token for uid " +
                             std::to_string(s.peer().uid) + ", until " + rfc3339(minted->expires_at));
  json::object fields;
  fields["token"] = minted->token;
  fields["role"] = to_string(role);
  fields["expires_at"] = rfc3339(minted->expires_at);
  fields["url"] = "http://" + server.http_address + "/viewer#token=" + minted->token;
  s.reply("viewer", r.id, fields);
}

}  // namespace mh::daemon
