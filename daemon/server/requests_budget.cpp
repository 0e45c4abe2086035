// `budget`: each owner's spend today (UTC) against the daemon's daily budgets ([budgets.daily]),
// as the registry's ledger has it (docs/socket-api.md, `metaharness budget`).
#include <ctime>

#include "daemon/server/requests.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"

namespace mh::daemon {

namespace json = boost::json;

namespace {

std::string utc_date(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&s, &utc);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &utc);
  return buf;
}

}  // namespace

boost::asio::awaitable<void> handle_budget(Session& s, const SocketRequest& r) {
  auto server = s.server_ptr();
  const auto now = std::chrono::system_clock::now();
  auto read = [server, now] { return server->registry.spend_today(now); };
  std::vector<RunRegistry::OwnerSpend> owners = co_await server->on_registry(std::move(read));
  json::array list;
  for (const auto& o : owners)
    list.push_back(json::object{
        {"uid", o.uid},
        {"input_tokens", o.spent.input_tokens},
        {"output_tokens", o.spent.output_tokens},
        {"usd", o.spent.usd ? json::value(*o.spent.usd) : json::value(nullptr)},
        // What the owner's runs' gateways hold reserved for requests in flight (their worst
        // cases, and costs settled but not yet reported): counted against the daily budget now.
        {"reserved", json::object{{"usd", o.reserved_usd}, {"requests", o.reservations}}},
    });
  json::object fields;
  fields["day"] = utc_date(now);
  fields["metered"] = server->registry.meters_spend();
  fields["daily"] = adapters::budgets_to_json(server->config.daily_budget);
  fields["owners"] = std::move(list);
  s.reply("budget", r.id, fields);
}

}  // namespace mh::daemon
