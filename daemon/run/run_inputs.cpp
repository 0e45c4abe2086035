// Every input to the run's core passes through one door: input() journals it (when the run keeps
// a journal: a supervised run does) and apply() hands it to the core. An adoption's replay hands
// the journal's entries to the same apply(), so what a live run did and what a replay rebuilds
// cannot drift apart. Separate from the I/O files: these are the run's inputs, not their sources.
#include "daemon/log.hpp"
#include "daemon/run/run_impl.hpp"
#include "protocol/overloaded.hpp"

namespace mh::daemon {

void Run::Impl::input(journal::Input in, Instant now) {
  input(std::move(in), now, InputExtras{});
}

void Run::Impl::input(journal::Input in, Instant now, InputExtras extras) {
  // Whether the gateway meters the run is stated with its start, so a replay meters alike.
  if (auto* start = std::get_if<journal::Start>(&in)) start->gateway = options.gateway.has_value();
  if (journal) {
    // The command's wire line is made only for a journal: an unsupervised run pays nothing.
    if (auto* c = std::get_if<journal::CommandLine>(&in); c && extras.command)
      c->line = protocol::serialize(*extras.command);
    bool failed_before = journal->failed();
    journal->append(journal::Entry{now, in});
    if (journal->failed() && !failed_before)
      daemon::log(LogPriority::error,
                  "run " + log->run_id() + ": its input journal cannot be written: a later daemon cannot adopt it");
  }
  // One input's events go to the log together, with one write(2) and one wake-up of the
  // readers (release_log): a decision's tool.decided and command.result are one write, as a
  // chunk's lines are. Nested inputs (a shutdown after a failed write) join the outer hold.
  const bool holds = !log->holding();
  if (holds) log->hold();
  apply(in, now, extras);
  if (holds) release_log();
}

void Run::Impl::apply(const journal::Input& in, Instant now, InputExtras& x) {
  if (replay) replay->now = now;
  std::visit(protocol::Overloaded{
                 [&](const journal::Start& s) {
                   if (s.gateway) core->meter_by_gateway();
                   core->start(now);
                 },
                 [&](const journal::VendorOut& v) {
                   if (!x.bytes.empty() || v.to == stdout_fed) {
                     feed_stdout(x.bytes, v.received_unix_ms, now);
                     stdout_fed = v.to;
                     return;
                   }
                   // A replay: the bytes are in the transcript, where the supervisor wrote them.
                   std::string bytes(v.to > stdout_fed ? v.to - stdout_fed : 0, '\0');
                   ssize_t n = bytes.empty() ? 0
                                             : ::pread(transcript_reader.fd(), bytes.data(), bytes.size(),
                                                       static_cast<off_t>(stdout_fed));
                   if (n != static_cast<ssize_t>(bytes.size()) && replay && !replay->diverged)
                     replay->diverged = "the transcript holds fewer bytes than the journal says were read";
                   feed_stdout(bytes, v.received_unix_ms, now);
                   stdout_fed = v.to;
                 },
                 [&](const journal::VendorEnd&) {
                   if (framer) {
                     auto on_line = [this, now](const protocol::FramedLine& line) {
                       core->on_vendor_line(line, now);
                       after_core();
                     };
                     framer->finish(on_line);
                   }
                   core->on_vendor_end(now);
                 },
                 [&](const journal::HookRequest& h) {
                   std::optional<json::value> request = std::move(x.hook_request);
                   if (!request) {
                     auto parsed = protocol::parse_json(h.line);
                     if (!parsed) return;  // live requests are parsed before they are journaled
                     request = std::move(*parsed);
                   }
                   hooks_handed.insert(h.connection);
                   log_hook(h.connection, "in", *request);
                   core->on_hook_request(h.connection, *request, now);
                 },
                 [&](const journal::HookGone& h) {
                   hooks_gone_handed.insert(h.connection);
                   core->on_hook_gone(h.connection, now);
                 },
                 [&](const journal::CommandLine& c) {
                   if (x.command) {
                     core->on_command(x.ticket, std::move(*x.command), c.peer, now);
                     return;
                   }
                   auto command = protocol::read_command_line(c.line);
                   if (command)
                     core->on_command(x.ticket, std::move(*command), c.peer, now);
                   else
                     core->on_unreadable_command(x.ticket, command.error(), now);
                 },
                 [&](const journal::Unreadable& u) { core->on_unreadable_command(x.ticket, u.refusal, now); },
                 [&](const journal::SourceClosed&) { core->on_command_source_closed(now); },
                 [&](const journal::BudgetExhausted& b) { core->on_budget_exhausted(b.message, now); },
                 [&](const journal::Shutdown&) { core->on_shutdown(now); },
                 [&](const journal::Deadline& d) { core->on_deadline(d.call_id, now); },
                 [&](const journal::IdleTimeout&) { core->on_idle_timeout(now); },
                 [&](const journal::WallBudget&) { core->on_wall_budget(now); },
                 [&](const journal::StallTimeout&) { core->on_stall_timeout(now); },
                 [&](const journal::ShellWarning& w) {
                   emit(protocol::ev::Warning{w.code, w.message}, std::nullopt);
                 },
                 [&](const journal::GatewayUsage& g) {
                   GatewayAnswer answer;
                   answer.request = g.request;
                   answer.status = g.status;
                   answer.model = g.model;
                   answer.usage.input_tokens = g.input_tokens;
                   answer.usage.output_tokens = g.output_tokens;
                   answer.usage.cache_read_input_tokens = g.cache_read_tokens;
                   answer.usage.cache_creation_input_tokens = g.cache_creation_tokens;
                   answer.complete = g.complete;
                   core->on_gateway_usage(answer, now);
                 },
                 [&](const journal::GatewayRefused& r) { core->on_gateway_refused(r.method, r.path, now); },
                 [&](const journal::Egress& e) { core->on_egress(e.destination, e.allowed, e.why, now); },
             },
             in);
}

// One chunk of the vendor's stdout, framed into lines for the core. Every line of a chunk is
// handed in with the chunk's `now` (they were read together), so a replay hands them in alike.
void Run::Impl::feed_stdout(std::string_view bytes, std::int64_t received_unix_ms, Instant now) {
  if (!framer) framer.emplace(options.max_vendor_line_bytes, /*digest_oversized=*/true);
  auto on_line = [this, now](const protocol::FramedLine& line) {
    core->on_vendor_line(line, now);
    after_core();
  };
  // One chunk's events go to the log in one write: a chatty vendor costs a write and a
  // readers' wake-up per chunk, not per line. Answers to the vendor are written as the lines
  // are handled, before the records (the effect goes out before its record).
  // A live chunk is held by input(); a replay's is held here.
  const bool holds = !log->holding();
  if (holds) log->hold();
  framer->set_received_at(received_unix_ms);
  framer->feed(bytes, on_line);
  if (holds) release_log();
}

}  // namespace mh::daemon
