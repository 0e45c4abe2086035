// A run directory, in one place: the name of every file a run keeps (the daemon, `metaharness
// run` and the run itself all ask here), the one way to name a new run, and the readers and
// writers of the small JSON files beside the stream.
//
//   run.json              the daemon's record of the run: owner, adapter, labels, creation time
//   spec.json             the run spec as the run was given it (written by Run::create)
//   plan.json             the launch plan, written before anything spawns
//   scenario.json         a scripted-model scenario submitted inline (the daemon writes it)
//   events.jsonl          the event stream (daemon/stream/event_log.hpp)
//   vendor-stdout.jsonl   the vendor's stdout, byte for byte (the transcript)
//   vendor-stdin.jsonl    everything written to the vendor's stdin
//   vendor-stderr.log     the vendor's stderr
//   vendor-hooks.jsonl    the hook channel's traffic, both directions (Codex)
//   model-requests.jsonl  what the scripted endpoint was asked
//   body.json             a contained run's cgroup, uid/gid and sandboxing (RunContainment's record)
//   core-inputs.jsonl     a supervised run's input journal; supervisor*.json/.sock/.log: docs/supervisor.md
//   scratch/              the vendor's private world: HOME, TMPDIR, its default work dir
//
// The adapters compute the transcript paths of their plans from RunPaths; a test holds them to
// the names here (tests/server/run_dir_test.cpp).
#pragma once

#include <boost/system/result.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "adapters/adapter.hpp"
#include "daemon/file_modes.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

namespace json = boost::json;

// A fresh run id: the UTC second it was made, '-', then 48 random bits as 12 lowercase hex digits
// ("20261129T184844Z-3fa9c1d27b04"). Digits, capitals and '-' only: never a path, and nothing a
// client chooses. `metaharness run`, `plan` and the daemon all take their ids from here.
std::string new_run_id();

// Writes a whole file with `mode` (created or truncated). nullopt, or why it failed.
std::optional<std::string> write_file(const std::filesystem::path& path, std::string_view contents, unsigned mode);

// run.json: what the daemon keeps about who submitted a run.
struct RunMeta {
  std::uint32_t owner_uid = 0;
  std::int32_t owner_pid = 0;
  std::string adapter;
  std::map<std::string, std::string> labels;
  std::int64_t created_unix = 0;  // seconds
};

class RunDir {
 public:
  explicit RunDir(std::filesystem::path root) : root_(std::move(root)) {}
  // The run `id` under a daemon's state directory: <state_dir>/runs/<id>.
  static RunDir in_state_dir(const std::filesystem::path& state_dir, const std::string& id);
  // Where a daemon keeps its runs.
  static std::filesystem::path runs_of(const std::filesystem::path& state_dir);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path run_json() const { return root_ / "run.json"; }
  std::filesystem::path spec_json() const { return root_ / "spec.json"; }
  std::filesystem::path plan_json() const { return root_ / "plan.json"; }
  std::filesystem::path scenario_json() const { return root_ / "scenario.json"; }
  std::filesystem::path events() const { return root_ / "events.jsonl"; }
  std::filesystem::path vendor_stdout() const { return root_ / "vendor-stdout.jsonl"; }
  std::filesystem::path vendor_stdin() const { return root_ / "vendor-stdin.jsonl"; }
  std::filesystem::path vendor_stderr() const { return root_ / "vendor-stderr.log"; }
  std::filesystem::path vendor_hooks() const { return root_ / "vendor-hooks.jsonl"; }
  std::filesystem::path model_requests() const { return root_ / "model-requests.jsonl"; }
  std::filesystem::path scratch() const { return root_ / "scratch"; }
  // What an adapter's plan is computed against.
  adapters::RunPaths paths() const { return adapters::RunPaths{root_, scratch()}; }

  // Writers (mode 0640). nullopt, or why the file could not be written. The spec and the plan
  // are written with their secrets redacted (the model token, every vendor_env value): the
  // values reach the vendor through the supervisor's own spec file (0600), never these.
  std::optional<std::string> write_spec(const adapters::RunSpec& spec) const;
  std::optional<std::string> write_plan(const adapters::LaunchPlan& plan, const adapters::RunSpec& spec) const;
  std::optional<std::string> write_scenario(const json::value& scenario) const;
  std::optional<std::string> write_meta(const RunMeta& meta) const;

  // Readers: null when the file is missing or not JSON (a run refused early has no plan).
  json::value read_spec() const;
  json::value read_plan() const;
  // nullopt when run.json is missing or not an object; fields that do not fit are left default.
  std::optional<RunMeta> read_meta() const;

 private:
  std::filesystem::path root_;
};

}  // namespace mh::daemon
