// The options that describe a run, shared by `run`, `plan` and (later) `submit`, so the same
// flags mean the same thing everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <boost/system/result.hpp>

#include "adapters/adapter.hpp"
#include "daemon/run/run_dir.hpp"

namespace mh::cli {

struct RunSpecOptions {
  std::string adapter;
  std::string prompt;
  std::string frame_path;
  std::string decisions = "frame";
  std::uint64_t decision_deadline_ms = 55'000;
  std::string stall_after;  // a duration (90s, 10m, 1500ms; 0: never); "": the host's default
  std::string on_stall;     // warn | halt; "": the host's default
  std::string park_after;   // a duration (10m, 90s; 0: never); "": the host's default (unset: never)
  std::string model_scenario;
  std::string model_endpoint;
  std::string model_token_env;
  std::string upstream;             // [upstreams.NAME] of the daemon's config (docs/gateway.md)
  std::vector<std::string> egress;  // HOST:PORT a tool call may reach through the run's egress proxy
  std::string model;
  std::string cwd;
  std::vector<std::string> vendor_env;      // KEY=VALUE
  std::vector<std::string> vendor_options;  // KEY=VALUE
  std::vector<std::string> requires_commands;
  std::vector<std::string> labels;  // KEY=VALUE
  bool keep_open = false;
  bool deny_only = false;
  std::string hermetic = "on";
  std::vector<std::string> budgets;  // KEY=VALUE
  std::vector<std::string> limits;   // KEY=VALUE
};

// What a verb's ADAPTER may be, for its help ("a, b or c"): the adapters the build
// pins a vendor CLI for, so a new adapter's pin is all the help needs.
std::string adapter_choices();

// Adds the options (and the ADAPTER positional) to a subcommand.
void add_run_spec_options(CLI::App* app, RunSpecOptions& o);

// Builds the spec: loads and verifies the frame file, parses KEY=VALUE lists, checks names.
// The model endpoint is left empty when a scenario is given (the host starts one and fills it).
boost::system::result<adapters::RunSpec, std::string> build_spec(const RunSpecOptions& o, std::string run_id);

// --stall-after's DURATION: a whole number with its unit (ms, s, m or h), or 0 for never; in ms.
boost::system::result<std::uint64_t, std::string> parse_stall_after(const std::string& text,
                                                                    std::string_view flag = "--stall-after");
// The two stall flags, as a spec holds them (unset when the flag was not given).
boost::system::result<void, std::string> apply_stall_options(const RunSpecOptions& o, adapters::RunSpec& spec);

// A fresh run id, the daemon's own (daemon/run/run_dir.hpp): `run` and `plan` name their runs as
// the daemon does.
using daemon::new_run_id;

}  // namespace mh::cli
