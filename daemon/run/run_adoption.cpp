// The adoption of a supervised run a previous daemon left: its supervisor attached to again (a
// SupervisedBody), the journal replayed into a fresh core, reconciled with what the supervisor
// says happened meanwhile, and the run then goes on live; or, when it cannot be taken over, ended
// through its cgroup and closed, saying why. While it is rebuilt, what arrives from outside waits
// (InputHold, released by main once adopt returns).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "daemon/log.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/run/replay_effects.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/run_impl.hpp"
#include "daemon/run/supervised_body.hpp"

namespace mh::daemon {

namespace {

constexpr std::string_view kJournalFile = "core-inputs.jsonl";

std::string seconds_text(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

void Run::Impl::give_up_adoption(const std::string& why) {
  effects.point_at_live();  // a replay that was under way is over
  daemon::log(LogPriority::warning, "run " + log->run_id() + ": not adopted: " + why);
  emit(protocol::ev::Warning{"RECOVERED_AFTER_RESTART", "metaharness restarted and could not take this run over (" +
                                                            why + "): its processes are killed and it is closed"},
       std::nullopt);
}

// A run that cannot be taken over is ended through its cgroup and closed, saying why.
asio::awaitable<void> Run::Impl::end_unadoptable(SupervisedBody& supervised, std::string why) {
  give_up_adoption(why);
  co_await supervised.end_vendor();
  supervised.send(supervisor::Release{});
  finish(protocol::CloseReason::error, supervised.hello().exited.value_or(protocol::ProcessTermination{}));
}

// Takes the run over (main's way up for a run made by Run::adopt): true when it is live, false
// when it was closed instead.
asio::awaitable<bool> Run::Impl::adopt() {
  auto made = std::make_unique<SupervisedBody>(*this);
  SupervisedBody& supervised = *made;
  body = std::move(made);
  if (auto failed = co_await supervised.attach()) {
    give_up_adoption(*failed);
    co_await supervised.end_body(std::nullopt);
    finish(protocol::CloseReason::error, protocol::ProcessTermination{});
    co_return false;  // what waited is answered by the closed run
  }
  const Instant hello_at = Clock::now();
  const supervisor::Hello hello = supervised.hello();

  auto replayed = replay_journal(supervised);
  if (!replayed) {
    co_await end_unadoptable(supervised, replayed.error());
    co_return false;
  }
  ReplayEffects& replay = **replayed;
  reconcile_after_replay(supervised, replay, hello_at, Clock::now());
  if (replay.diverged()) {
    std::string why = *replay.diverged();
    co_await end_unadoptable(supervised, why);
    co_return false;
  }
  // The previous daemon died between spawning the supervisor and recording the run's start (the
  // journal holds no Start): the vendor was spawned and waits for what the start sends it. The
  // start is made here, as the launch would have made it; without it the core stayed `launching`
  // and no halt or shutdown could end the run (issue 24).
  if (core->phase() == RunCore::Phase::created || core->phase() == RunCore::Phase::launching) {
    if (hello.spawn_error) {
      supervised.send(supervisor::Release{});
      refuse("LAUNCH_FAILED", *hello.spawn_error, {});
      co_return false;
    }
    input(journal::Start{}, Clock::now());
    after_core();
  }
  // The vendor output written while no daemon was there, then its end if it came.
  co_await supervised.read_transcript_to(hello.stdout_bytes);
  if (hello.stdout_ended && !supervised.stdout_ended()) {
    supervised.set_stdout_ended();
    input(journal::VendorEnd{}, Clock::now());
    after_core();
  }
  co_return true;  // live: what arrived meanwhile is handled now, in order (main)
}

// Rebuilds the core from the journal: every entry handed to apply() as the live run handed it,
// with what the core does checked against the record and collected for the reconciliation.
// nullopt, or why the run cannot be adopted.
boost::system::result<std::unique_ptr<ReplayEffects>, std::string> Run::Impl::replay_journal(
    SupervisedBody& supervised) {
  using Result = boost::system::result<std::unique_ptr<ReplayEffects>, std::string>;
  auto fail = [](std::string why) { return Result(boost::system::in_place_error, std::move(why)); };
  const RunDir dir(options.run_dir);
  auto read = read_journal(options.run_dir / kJournalFile);
  if (!read) return fail(read.error());
  if (!supervised.transcript().open(std::get<adapters::LaunchPlan>(planned).transcript_path))
    return fail("its transcript cannot be read: " + std::string(std::strerror(errno)));
  // The record's event types, by seq: the replay must make the same events in the same order.
  const std::uint64_t recorded_last = log->last_seq();
  std::vector<std::string> recorded_types;
  {
    UniqueFd events(::open(dir.events().c_str(), O_RDONLY | O_CLOEXEC));
    if (!events) return fail("its stream cannot be read");
    std::string all;
    char chunk[64 * 1024];
    for (ssize_t n; (n = ::read(events.get(), chunk, sizeof chunk)) > 0;)
      all.append(chunk, static_cast<std::size_t>(n));
    std::size_t at = 0;
    while (recorded_types.size() < recorded_last) {
      std::size_t nl = all.find('\n', at);
      if (nl == std::string::npos) return fail("its stream holds fewer lines than its last seq");
      auto event = protocol::read_event_line(std::string_view(all).substr(at, nl - at));
      if (!event) return fail("line " + std::to_string(recorded_types.size() + 1) + " of its stream cannot be read");
      recorded_types.emplace_back(protocol::event_name(event->payload));
      at = nl + 1;
    }
  }
  auto replay = std::make_unique<ReplayEffects>(*this, std::move(recorded_types), options.exit_grace);
  effects.point_at(*replay);  // until the reconciliation (or the adoption is given up)
  for (const journal::Entry& entry : read->entries) {
    replay->at(entry.now);
    InputExtras extras;
    // A chunk of vendor stdout the live run read: its bytes are in the transcript, where the
    // supervisor wrote them.
    std::string bytes;
    if (auto* out = std::get_if<journal::VendorOut>(&entry.input); out && out->to != stdout_fed) {
      bytes.assign(out->to > stdout_fed ? out->to - stdout_fed : 0, '\0');
      ssize_t n = bytes.empty() ? 0
                                : ::pread(supervised.transcript().fd(), bytes.data(), bytes.size(),
                                          static_cast<off_t>(stdout_fed));
      if (n != static_cast<ssize_t>(bytes.size()))
        replay->diverge("the transcript holds fewer bytes than the journal says were read");
      extras.bytes = bytes;
    }
    apply(entry.input, entry.now, extras);
    after_core();
    if (replay->diverged()) break;
  }
  // Appending goes on after the journal's last entry (a torn line was never handed in).
  auto reopened = InputJournal::open_append(options.run_dir / kJournalFile, read->complete_bytes);
  if (!reopened) {
    effects.point_at_live();  // the adoption is given up: the replay is over
    return fail(reopened.error());
  }
  journal.emplace(std::move(*reopened));
  return Result(std::move(replay));
}

// After the replay: what the core did that the supervisor has not seen yet is done now (the rest
// of its stdin, the replies to hooks still waiting, closing stdin), the timers are armed where
// they were (a deadline or a grace that ran out while no daemon was there applies now), the gap
// is stated where it was (RUN_ADOPTED), and the vendor output written meanwhile is read.
void Run::Impl::reconcile_after_replay(SupervisedBody& supervised, ReplayEffects& done, Instant hello_at, Instant now) {
  const supervisor::Hello& hello = supervised.hello();
  if (done.seq() < done.recorded_last())
    done.diverge("the replay made " + std::to_string(done.seq()) + " of the stream's " +
                 std::to_string(done.recorded_last()) + " events");
  // The vendor was sent a prefix of what the core wrote, byte for byte (the supervisor's copy).
  if (!done.diverged() && hello.stdin_bytes > done.stdin_bytes().size())
    done.diverge("the vendor was sent " + std::to_string(hello.stdin_bytes) + " bytes, the replay made " +
                 std::to_string(done.stdin_bytes().size()));
  if (!done.diverged() && hello.stdin_bytes > 0) {
    const auto& plan = std::get<adapters::LaunchPlan>(planned);
    UniqueFd sent(::open(plan.stdin_log_path.c_str(), O_RDONLY | O_CLOEXEC));
    std::string prefix(hello.stdin_bytes, '\0');
    if (!sent || ::pread(sent.get(), prefix.data(), prefix.size(), 0) != static_cast<ssize_t>(prefix.size()) ||
        done.stdin_bytes().compare(0, prefix.size(), prefix) != 0)
      done.diverge("what the vendor was sent is not what the replay made");
  }
  if (done.diverged()) return;

  effects.point_at_live();  // live from here on
  if (options.on_spend_replayed) options.on_spend_replayed(core->spend());
  // The gap is the supervisor's to measure: from when its previous daemon's connection dropped to
  // its hello, plus this daemon's replay since. (The time since the run's last input is not it: a
  // quiet run's last input may be minutes older than the daemon's death.)
  std::string gap;
  if (hello.ungoverned_ms)
    gap = "no daemon governed it for " +
          seconds_text(std::chrono::milliseconds(*hello.ungoverned_ms) + (now - hello_at)) +
          " (from its previous daemon's going to this adoption)";
  else
    gap = "its supervisor does not say how long no daemon governed it (an older supervisor); its last input was " +
          seconds_text(now - done.now()) + " ago";
  // Journaled like every shell warning: a later adoption states it again in its place.
  input(
      journal::ShellWarning{"RUN_ADOPTED",
                            "metaharness restarted and took this run over: " + gap + "; " +
                                std::to_string(hello.stdout_bytes > stdout_fed ? hello.stdout_bytes - stdout_fed : 0) +
                                " bytes of vendor output written meanwhile follow"},
      now);
  after_core();

  for (std::size_t at = hello.stdin_bytes; at < done.stdin_bytes().size();) {
    std::size_t nl = done.stdin_bytes().find('\n', at);
    supervised.send(supervisor::In{done.stdin_bytes().substr(at, nl - at)});
    at = nl + 1;
  }
  if (done.stdin_closed() && !hello.stdin_closed) supervised.send(supervisor::CloseStdin{});
  std::set<std::uint64_t> waiting;
  for (const auto& hook : hello.hooks_open) {
    waiting.insert(hook.connection);
    if (auto reply = done.hook_replies().find(hook.connection); reply != done.hook_replies().end()) {
      log_hook(hook.connection, "out", json::value(reply->second));
      supervised.send(supervisor::HookReply{hook.connection, reply->second});
    }
  }
  // Timers where they were; what ran out meanwhile applies now, in the order it ran out.
  std::vector<std::pair<Instant, std::string>> due;
  for (const auto& [call_id, when] : done.deadlines())
    due.emplace_back(when, call_id);
  std::sort(due.begin(), due.end());
  for (const auto& [when, call_id] : due) {
    if (when <= now) {
      input(journal::Deadline{call_id}, now);
      after_core();
    } else {
      arm_deadline(call_id, when);
    }
  }
  if (done.wall()) arm_wall_budget(*done.wall());
  if (done.kill_at()) supervised.arm_grace_at(*done.kill_at());
  after_core();

  // What happened while no daemon was there: hooks that arrived or went, the exit (the output
  // written meanwhile is read by adopt_main, before the supervisor's next messages).
  for (const auto& hook : hello.hooks_open) {
    if (hooks_handed.count(hook.connection)) continue;  // handed in before: answered above, or pending
    auto parsed = protocol::parse_json(hook.line);
    if (!parsed) {
      supervised.send(supervisor::HookReply{hook.connection, "refused: the request is not JSON"});
      continue;
    }
    InputExtras extras;
    extras.hook_request = std::move(*parsed);
    input(journal::HookRequest{hook.connection, hook.line}, now, std::move(extras));
    after_core();
  }
  for (std::uint64_t gone : hello.hooks_gone)
    if (hooks_handed.count(gone) && !hooks_gone_handed.count(gone) && !waiting.count(gone)) {
      input(journal::HookGone{gone}, now);
      after_core();
    }
  supervised.take_hello_ends();
}

}  // namespace mh::daemon
