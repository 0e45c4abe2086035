// Adoption (adoption.hpp).
#include "daemon/run/adoption.hpp"

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

using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kJournalFile = "core-inputs.jsonl";

std::string seconds_text(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

void Adoption::give_up(const std::string& why) {
  run_.effects.point_at_live();  // a replay that was under way is over
  run_.timers.cancel_idle();     // armed by the replay's after_core: this run is not to go on
  daemon::log(LogPriority::warning, "run " + run_.log->run_id() + ": not adopted: " + why);
  run_.emit(
      protocol::ev::Warning{"RECOVERED_AFTER_RESTART", "metaharness restarted and could not take this run over (" +
                                                           why + "): its processes are killed and it is closed"},
      std::nullopt);
}

// A run that cannot be taken over is ended through its cgroup and closed, saying why.
asio::awaitable<void> Adoption::end_unadoptable(std::string why) {
  SupervisedBody& supervised = supervised_;
  give_up(why);
  co_await supervised.end_vendor();
  supervised.send(supervisor::Release{});
  run_.finish(protocol::CloseReason::error, supervised.hello().exited.value_or(protocol::ProcessTermination{}));
}

Adoption::Adoption(Run::Impl& run, SupervisedBody& body) : run_(run), supervised_(body) {}

asio::awaitable<bool> Adoption::take_over() {
  SupervisedBody& supervised = supervised_;
  if (auto failed = co_await supervised.attach()) {
    give_up(*failed);
    co_await supervised.end_body(std::nullopt);
    run_.finish(protocol::CloseReason::error, protocol::ProcessTermination{});
    co_return false;  // what waited is answered by the closed run
  }
  hello_at_ = Clock::now();
  const supervisor::Hello hello = supervised.hello();

  auto replayed = replay_journal();
  if (!replayed) {
    co_await end_unadoptable(replayed.error());
    co_return false;
  }
  ReplayEffects& replay = **replayed;
  reconcile(replay, Clock::now());
  if (replay.diverged()) {
    std::string why = *replay.diverged();
    co_await end_unadoptable(why);
    co_return false;
  }
  // The previous daemon died between spawning the supervisor and recording the run's start (the
  // journal holds no Start): the vendor was spawned and waits for what the start sends it. The
  // start is made here, as the launch would have made it; without it the core stayed `launching`
  // and no halt or shutdown could end the run (issue 24).
  if (run_.core->phase() == RunCore::Phase::created || run_.core->phase() == RunCore::Phase::launching) {
    if (hello.spawn_error) {
      supervised.send(supervisor::Release{});
      run_.refuse("LAUNCH_FAILED", *hello.spawn_error, {});
      co_return false;
    }
    run_.input(journal::Start{}, Clock::now());
    run_.after_core();
  }
  // The vendor output written while no daemon was there, then its end if it came.
  co_await supervised.read_transcript_to(hello.stdout_bytes);
  if (hello.stdout_ended && !supervised.stdout_ended()) {
    supervised.set_stdout_ended();
    run_.input(journal::VendorEnd{}, Clock::now());
    run_.after_core();
  }
  co_return true;  // live: what arrived meanwhile is handled now, in order (main)
}

// Rebuilds the core from the journal: every entry handed to apply() as the live run handed it,
// with what the core does checked against the record and collected for the reconciliation.
// nullopt, or why the run cannot be adopted.
boost::system::result<std::unique_ptr<ReplayEffects>, std::string> Adoption::replay_journal() {
  SupervisedBody& supervised = supervised_;
  using Result = boost::system::result<std::unique_ptr<ReplayEffects>, std::string>;
  auto fail = [](std::string why) { return Result(boost::system::in_place_error, std::move(why)); };
  const RunDir dir(run_.options.run_dir);
  auto read = read_journal(run_.options.run_dir / kJournalFile);
  if (!read) return fail(read.error());
  if (!supervised.transcript().open(std::get<adapters::LaunchPlan>(run_.planned).transcript_path))
    return fail("its transcript cannot be read: " + std::string(std::strerror(errno)));
  // The record's event types, by seq: the replay must make the same events in the same order.
  const std::uint64_t recorded_last = run_.log->last_seq();
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
  auto replay = std::make_unique<ReplayEffects>(run_, std::move(recorded_types), run_.options.exit_grace);
  run_.effects.point_at(*replay);  // until the reconciliation (or the adoption is given up)
  for (const journal::Entry& entry : read->entries) {
    replay->at(entry.now);
    Run::Impl::InputExtras extras;
    // A chunk of vendor stdout the live run read: its bytes are in the transcript, where the
    // supervisor wrote them.
    std::string bytes;
    if (auto* out = std::get_if<journal::VendorOut>(&entry.input); out && out->to != run_.stdout_fed) {
      bytes.assign(out->to > run_.stdout_fed ? out->to - run_.stdout_fed : 0, '\0');
      ssize_t n = bytes.empty() ? 0
                                : ::pread(supervised.transcript().fd(), bytes.data(), bytes.size(),
                                          static_cast<off_t>(run_.stdout_fed));
      if (n != static_cast<ssize_t>(bytes.size()))
        replay->diverge("the transcript holds fewer bytes than the journal says were read");
      extras.bytes = bytes;
    }
    run_.apply(entry.input, entry.now, extras);
    run_.after_core();
    if (replay->diverged()) break;
  }
  // Appending goes on after the journal's last entry (a torn line was never handed in).
  auto reopened = InputJournal::open_append(run_.options.run_dir / kJournalFile, read->complete_bytes);
  if (!reopened) {
    run_.effects.point_at_live();  // the adoption is given up: the replay is over
    return fail(reopened.error());
  }
  run_.journal.emplace(std::move(*reopened));
  return Result(std::move(replay));
}

// After the replay: what the core did that the supervisor has not seen yet is done now (the rest
// of its stdin, the replies to hooks still waiting, closing stdin), the timers are armed where
// they were (a deadline or a grace that ran out while no daemon was there applies now), the gap
// is stated where it was (RUN_ADOPTED), and the vendor output written meanwhile is read.
void Adoption::reconcile(ReplayEffects& done, Instant now) {
  SupervisedBody& supervised = supervised_;
  const supervisor::Hello& hello = supervised.hello();
  if (done.seq() < done.recorded_last())
    done.diverge("the replay made " + std::to_string(done.seq()) + " of the stream's " +
                 std::to_string(done.recorded_last()) + " events");
  // The vendor was sent a prefix of what the core wrote, byte for byte (the supervisor's copy).
  if (!done.diverged() && hello.stdin_bytes > done.stdin_bytes().size())
    done.diverge("the vendor was sent " + std::to_string(hello.stdin_bytes) + " bytes, the replay made " +
                 std::to_string(done.stdin_bytes().size()));
  if (!done.diverged() && hello.stdin_bytes > 0) {
    const auto& plan = std::get<adapters::LaunchPlan>(run_.planned);
    UniqueFd sent(::open(plan.stdin_log_path.c_str(), O_RDONLY | O_CLOEXEC));
    std::string prefix(hello.stdin_bytes, '\0');
    if (!sent || ::pread(sent.get(), prefix.data(), prefix.size(), 0) != static_cast<ssize_t>(prefix.size()) ||
        done.stdin_bytes().compare(0, prefix.size(), prefix) != 0)
      done.diverge("what the vendor was sent is not what the replay made");
  }
  if (done.diverged()) return;

  run_.effects.point_at_live();  // live from here on
  if (run_.options.on_spend_replayed) run_.options.on_spend_replayed(run_.core->spend());
  // The gap is the supervisor's to measure: from when its previous daemon's connection dropped to
  // its hello, plus this daemon's replay since. (The time since the run's last input is not it: a
  // quiet run's last input may be minutes older than the daemon's death.)
  std::string gap;
  if (hello.ungoverned_ms)
    gap = "no daemon governed it for " +
          seconds_text(std::chrono::milliseconds(*hello.ungoverned_ms) + (now - hello_at_)) +
          " (from its previous daemon's going to this adoption)";
  else
    gap = "its supervisor does not say how long no daemon governed it (an older supervisor); its last input was " +
          seconds_text(now - done.now()) + " ago";
  // Journaled like every shell warning: a later adoption states it again in its place.
  run_.input(journal::ShellWarning{"RUN_ADOPTED", "metaharness restarted and took this run over: " + gap + "; " +
                                                      std::to_string(hello.stdout_bytes > run_.stdout_fed
                                                                         ? hello.stdout_bytes - run_.stdout_fed
                                                                         : 0) +
                                                      " bytes of vendor output written meanwhile follow"},
             now);
  run_.after_core();

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
      run_.hook_log.append(hook.connection, "out", json::value(reply->second));
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
      run_.input(journal::Deadline{call_id}, now);
      run_.after_core();
    } else {
      run_.arm_deadline(call_id, when);
    }
  }
  if (done.wall()) run_.arm_wall_budget(*done.wall());
  // The core believes its stall timer set as the replay left it; it runs once the output written
  // meanwhile has been read (Run::Impl::arm_stall holds it until the run is live).
  if (done.stall() && *done.stall()) run_.arm_stall(**done.stall());
  // The park timer where the rebuilt core left it (issue 27 §5); run out meanwhile, it applies now.
  if (const auto& park = done.park()) {
    if (park->second <= now) {
      run_.input(journal::ParkTimeout{park->first}, now);
      run_.after_core();
    } else {
      run_.arm_park(park->first, park->second);
    }
  }
  if (done.kill_at()) supervised.arm_grace_at(*done.kill_at());
  run_.after_core();

  // What happened while no daemon was there: hooks that arrived or went, the exit (the output
  // written meanwhile is read by take_over, before the supervisor's next messages).
  for (const auto& hook : hello.hooks_open) {
    if (run_.hooks_handed.count(hook.connection)) continue;  // handed in before: answered above, or pending
    auto parsed = protocol::parse_json(hook.line);
    if (!parsed) {
      supervised.send(supervisor::HookReply{hook.connection, "refused: the request is not JSON"});
      continue;
    }
    Run::Impl::InputExtras extras;
    extras.hook_request = std::move(*parsed);
    run_.input(journal::HookRequest{hook.connection, hook.line}, now, std::move(extras));
    run_.after_core();
  }
  for (std::uint64_t gone : hello.hooks_gone)
    if (run_.hooks_handed.count(gone) && !run_.hooks_gone_handed.count(gone) && !waiting.count(gone)) {
      run_.input(journal::HookGone{gone}, now);
      run_.after_core();
    }
  supervised.take_hello_ends();
}

}  // namespace mh::daemon
