// GatewayLedger (gateway_ledger.hpp).
#include "daemon/run/gateway_ledger.hpp"

#include "daemon/log.hpp"
#include "protocol/overloaded.hpp"

namespace mh::daemon {

void GatewayLedger::on_message(const supervisor::FromSupervisor& message, SupervisorLink& link) {
  // After stream.closed no line may follow: what the gateway says then is not the record's.
  const bool closed = run_.record_closed();
  std::visit(
      protocol::Overloaded{
          [&](const supervisor::Reserve& r) { on_reserve(r, link); },
          [&](const supervisor::GatewayUsage& u) {
            // The reservation is settled before the usage reaches the core: the ledger then
            // holds this request's actual cost from the moment its worst case is let go
            // until on_spend reports it (never a moment with neither on the books).
            if (auto it = reservations_.find(u.request); it != reservations_.end()) {
              if (it->second.daily && run_.run_options().settle_daily) {
                Spend actual;
                actual.gateway_metered = true;
                actual.input_tokens = u.input_tokens.value_or(0);
                actual.output_tokens = u.output_tokens.value_or(0);
                actual.cache_read_input_tokens = u.cache_read_tokens.value_or(0);
                actual.cache_creation_input_tokens = u.cache_creation_tokens.value_or(0);
                protocol::TokenUsage tokens;
                tokens.input_tokens = u.input_tokens;
                tokens.output_tokens = u.output_tokens;
                tokens.cache_read_input_tokens = u.cache_read_tokens;
                tokens.cache_creation_input_tokens = u.cache_creation_tokens;
                std::string model = !u.model.empty() ? u.model : run_.run_options().spec.model.value_or("");
                actual.usd = request_cost(tokens, model, &run_.run_options().prices);
                if (!actual.usd) actual.unpriced_model = model;
                run_.run_options().settle_daily(*it->second.daily, actual);
              }
              reservations_.erase(it);
            }
            if (closed) return;
            std::vector<journal::Input> inputs;
            // An upstream the gateway cannot reach is said in the stream, once per reason
            // (and at most kMaxUpstreamFailuresTold of them): the vendor only retries, and
            // the why would otherwise be in supervisor.log alone.
            if (!u.failure.empty() && upstream_failures_told_.size() < kMaxUpstreamFailuresTold &&
                upstream_failures_told_.insert(u.failure).second)
              inputs.push_back(journal::ShellWarning{"GATEWAY_UPSTREAM_UNREACHABLE",
                                                     "the run's model gateway cannot reach its upstream: " + u.failure +
                                                         " (the vendor is answered 502; it may retry)"});
            inputs.push_back(journal::GatewayUsage{u.request, u.status, u.model, u.input_tokens, u.output_tokens,
                                                   u.cache_read_tokens, u.cache_creation_tokens, u.complete});
            run_.gateway_inputs(std::move(inputs));
          },
          [&](const supervisor::GatewayRefused& r) {
            if (closed) return;  // the core warns once per route (the gateway reports once, too)
            run_.gateway_inputs({journal::GatewayRefused{r.method, r.path}});
          },
          [&](const supervisor::Egress& e) {
            if (closed) return;
            run_.gateway_inputs({journal::Egress{e.destination, e.allowed, e.why}});
          },
          [](const auto&) {},
      },
      message);
}

void GatewayLedger::on_reserve(const supervisor::Reserve& r, SupervisorLink& link) {
  auto answer = [&](bool allowed, std::string reason) {
    link.send(supervisor::Reserved{r.request, allowed, std::move(reason)});
  };
  if (run_.forwards_no_model_request()) {
    answer(false, "the run is ending: no further model request is forwarded");
    return;
  }
  // The supervisor asks again after every hello until it hears an answer (an adoption, a
  // reconnect): a request already holding its reservation is answered again, never reserved twice.
  if (reservations_.count(r.request)) {
    answer(true, {});
    return;
  }
  Spend worst = worst_case(r.model.empty() ? run_.run_options().spec.model.value_or("") : r.model, r.max_tokens,
                           r.input_bytes, &run_.run_options().prices);
  Spend held;
  for (const auto& [request, reservation] : reservations_) {
    if (!held.usd) break;
    if (!reservation.worst.usd)
      held.usd.reset();
    else
      *held.usd += *reservation.worst.usd;
  }
  // The refusal, its warning and the close `budget`: as a budget crossed by a usage record, but
  // before the spend (the request never reaches the upstream).
  auto refuse = [&](const std::string& message) {
    answer(false, message);
    run_.gateway_inputs(
        {journal::BudgetExhausted{message + " (the model request was refused before it was forwarded)"}});
  };
  if (auto crossing = run_.reserve_check(worst, held)) {
    refuse(crossing->message());
    return;
  }
  Reservation reservation{worst, std::nullopt};
  if (run_.run_options().reserve_daily) {
    auto daily = run_.run_options().reserve_daily(worst);
    if (!daily) {
      refuse(daily.error());
      return;
    }
    reservation.daily = *daily;
  }
  reservations_[r.request] = std::move(reservation);
  answer(true, {});
}

void GatewayLedger::release() {
  reservations_.clear();
  if (run_.run_options().release_daily) run_.run_options().release_daily();
}

}  // namespace mh::daemon
