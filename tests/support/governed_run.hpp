// A one-shot governed run under test (`metaharness run <adapter> ...`), shared by the suites of
// every adapter: the same helpers and the same closing checks, so the suites state the same
// behaviours in the same words.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>

#include "protocol/frame.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {

// metaharness.command/1 lines.
std::string decide_line(const std::string& id, const std::string& call, const std::string& decision_json);
std::string command_line(const std::string& id, const std::string& name, const std::string& fields = "");
// A sealed frame admitting these operations at `step` (its workflow and node are the step's).
protocol::Frame sealed_test_frame(std::vector<protocol::OpKind> ops,
                                  const protocol::StepRef& step = protocol::StepRef{"tests", "step", 1, 1});
// "ok", or the refusal code of a command.result.
std::string outcome_code(const EventLine& result);

// The request bodies the scripted endpoint logged for a run (kind "request", parsed body only).
std::vector<json::object> logged_request_bodies(const std::filesystem::path& run_dir);
// The request headers, in the same order.
std::vector<json::object> logged_request_headers(const std::filesystem::path& run_dir);

class GovernedRun : public ::testing::Test {
 protected:
  explicit GovernedRun(std::string adapter) : adapter_(std::move(adapter)) {}

  std::filesystem::path scenario(const std::string& name) const {
    return source_dir() / "tests/scenarios" / adapter_ / (name + ".json");
  }
  void start(const std::string& scenario_name, std::vector<std::string> extra = {});
  // The same, playing a scenario file of the test's own making.
  void start_with(const std::filesystem::path& scenario_file, std::vector<std::string> extra = {});

  std::filesystem::path run_dir() const { return dir.path() / "run"; }
  std::filesystem::path work() const { return run_dir() / "scratch/work"; }
  std::string run_id();

  // Every line after the marker arrives, then the exit status.
  int finish();
  // The command.result for a command id (waits for it).
  std::optional<EventLine> result_for(const std::string& id);
  // Its outcome_code, or a sentence saying none came (a failed check, not a crash).
  std::string result_code(const std::string& id);
  // A sealed frame admitting these operations, written into the test's directory.
  std::filesystem::path write_frame(std::vector<protocol::OpKind> ops);
  // Does any request the endpoint served from the `after`-th on carry `text` anywhere in its body?
  bool a_later_request_carries(const std::string& text, std::size_t after = 0) const;
  // Every opaque event cites a line of the retained transcript by its 1-based number and digest
  // (`check`, when given, looks at each with the line it cites): the values of `field` they carry.
  std::set<std::string> opaque_kinds_citing_their_lines(
      std::string_view field, const std::function<void(const EventLine&, const std::string&)>& check = {});
  // Sends a command line and remembers its id: every one must get exactly one command.result.
  void send(const std::string& id, const std::string& line);

  // Started in ask mode with a 1500 ms deadline (held open, for a vendor quick enough to end its
  // turn before the later commands arrive), one call pending: nobody answers, so the
  // deadline denies it; then a late answer (TOO_LATE), an unknown call (UNKNOWN_CALL), a blank
  // deny reason, a line that is not JSON and a command with no payload (MALFORMED) are each
  // answered once, by name; the run completes and the call's marker file was never made.
  void expect_deadline_denial_then_named_refusals(const std::string& call, const std::string& marker_file);

  // Started on "two_turns" with --keep-open: the first turn ends with `first_stop_reason`, a
  // message.inject starts turn 2 and is answered ok, `check_texts` looks at the run's text
  // events, a later model request carries the injected text, and the run completes.
  void expect_injected_message_is_the_next_turn(const std::string& first_stop_reason,
                                                const std::function<void(const std::vector<EventLine>&)>& check_texts);

  // Every stream is complete and well-formed, and every command sent got exactly one result.
  void TearDown() override;

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<CliProcess> process;
  std::vector<std::string> sent;

 private:
  std::string adapter_;
};

}  // namespace mh::test
