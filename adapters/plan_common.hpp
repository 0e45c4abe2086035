// What every adapter's launch plan has in common, written once: the refusals before anything
// spawns, the scratch layout, the constructed environment, the run marker and the attestation
// rows whose evidence is the same for every vendor. An adapter's plan() states its VendorRules,
// calls common_plan, adds only what is its own (argv, config file, its own environment, its own
// rows) and ends with finish_plan.
#pragma once

#include <span>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters {

class AdapterSession;  // adapters/session.hpp

// What differs between vendors in the common part of a plan.
struct VendorRules {
  std::filesystem::path binary;  // the vendor CLI, absolute (configured_binary)
  // The variable naming the vendor's scratch config home, and where it is under the scratch.
  std::string_view config_env;        // the vendor's config-home variable (<VENDOR>_CONFIG_DIR...)
  std::filesystem::path config_home;  // relative to the scratch (home/.<vendor>, <vendor>-home...)
  // Variables the plan sets beyond HOME, PATH, TMPDIR, the config home and the run marker: a run
  // may not declare them (vendor_env) either.
  std::span<const std::string_view> owned_env;
  // Declared variables that would take the call seam away, and what they do (for the refusal).
  std::span<const std::string_view> seam_breakers;
  std::string_view seam_breaker_effect;
  // The vendor_options keys the vendor takes, each a non-negative integer; any other key refuses
  // the run by name.
  std::span<const std::string_view> vendor_options;
  // Attestation wording: what the vendor's own environment carries (H3, after "TMPDIR, "), how
  // its per-run credential reaches it (H4, appended when set), where the version is read (H9).
  std::string_view own_env_summary;
  std::string_view credential_detail;
  std::string_view version_source;
};

// The scratch paths of a plan, absolute (the vendor's cwd differs from ours).
struct ScratchLayout {
  std::filesystem::path home;
  std::filesystem::path config_home;
  std::filesystem::path tmp;
  std::filesystem::path work;  // the operator's --cwd, else inside the scratch
};

// A plan with its common part done: program, cwd, directories, transcript and stdin log, run
// marker, the environment up to the vendor's own variables, the shared attestation rows (H3, H4,
// H6, H7, H9, H10; mode, deny_only, decisions). The adapter appends to it, then finish_plan.
struct PlanDraft {
  LaunchPlan plan;
  ScratchLayout scratch;
};

// Why a declared vendor variable is refused whatever the adapter, or nullopt: a name that is not
// [A-Za-z_][A-Za-z0-9_]*, or a variable that makes a loader, runtime, shell or interpreter load or
// run code of the caller's choosing (LD_*, GCONV_PATH, NODE_*, BUN_*, BASH_ENV, PYTHONPATH, …).
// The one list of them is kCodeLoadingEnv in plan_common.cpp (docs/adapters.md, "Declared
// environment"). Every vendor of a run starts a node launcher, a JavaScript runtime or a native
// binary that runs shells and interpreters, so the list holds for all of them.
std::optional<std::string> code_loading_vendor_env(std::string_view name);
// The first refused declared variable of `vendor_env`, as the refusal's text ("declared vendor
// environment refused: LD_PRELOAD …"); nullopt when every one passes. Checked where every submit
// passes (the socket's and the fleet's) and again by every plan (common_plan).
std::optional<std::string> refuse_declared_vendor_env(const std::map<std::string, std::string>& vendor_env);

// The shared refusals, in order: commands the adapter cannot honour, observe mode with a frame,
// no prompt, a deadline the seam cannot hold, no model endpoint, a declared variable that loads
// code or that the vendor rules deny, an unknown or malformed vendor option, no vendor binary.
// Otherwise the draft.
std::variant<PlanDraft, LaunchRefusal> common_plan(const Adapter& adapter, const RunSpec& spec, const RunPaths& paths,
                                                   const VendorRules& rules);

// Appends the run marker and the declared vendor environment (after the vendor's own variables)
// and sorts the attestation rows, once.
LaunchPlan finish_plan(PlanDraft draft, const RunSpec& spec);

// Observe mode's line among a plan's ambient inputs: it answers every call with allow, which the
// deny-only policy delivers as abstain (`under_deny_only` says who then decides) and which
// otherwise grants (`granting` says what that lets through). Nothing outside observe mode.
void note_observe_mode(const RunSpec& spec, std::vector<std::string>& ambient_inputs, std::string under_deny_only,
                       std::string granting);

// The vendor CLI for `adapter`: the host's override if it names one, else `fallback`.
std::filesystem::path configured_binary(const HostConfig& config, std::string_view adapter,
                                        std::filesystem::path fallback);
// The program a plan of `adapter` execs on this host (configured_binary of its descriptor's
// default), known before any spec: the daemon digests it before it creates the run
// (daemon/process/vendor_provenance.hpp). nullopt for an adapter no vendor descriptor names.
std::optional<std::filesystem::path> vendor_program(const HostConfig& config, std::string_view adapter);

// The installed vendor version (`metaharness doctor`): the `version` of the npm package manifest
// at `manifest` under the host's vendor dir; unknown, saying why, when the host overrides the
// adapter's binary (its manifest is then unknown) or the manifest is unreadable.
std::optional<std::string> installed_package_version(const HostConfig& config, std::string_view adapter,
                                                     const std::filesystem::path& manifest, std::string& error);
// The `version` string of one package.json; nullopt when the file is missing or says none.
std::optional<std::string> read_package_version(const std::filesystem::path& manifest);

// The longest decision deadline a seam program can wait out with a signed 32-bit millisecond
// timer (poll(2), setTimeout) when it gives up `margin_s` seconds after the deadline.
constexpr std::uint64_t deadline_bound_of_int_ms_timer(std::uint64_t margin_s) {
  constexpr std::uint64_t kTimerMaxMs = 2'147'483'647;
  return (kTimerMaxMs / 1000 - margin_s) * 1000;
}

// `metaharness translate` for an adapter whose session is also its offline reader (a JSON-RPC or
// ACP session): every line of the transcript through `session`, folded offline, then its end.
std::vector<proto::Event> translate_with_session(const Adapter& adapter, AdapterSession& session,
                                                 std::string_view transcript, const std::string& run_id);

// What the adapter of a vendor CLI installed from npm holds whatever the vendor: the host's
// config, its id and capability table, and its installed version from the package's manifest.
class NpmCliAdapter : public Adapter {
 public:
  struct Identity {
    std::string_view id;
    const proto::CapabilityTable& capabilities;
    std::string_view manifest;    // package.json under the vendor dir
    std::string_view model_wire;  // "anthropic" | "openai-responses"
  };
  NpmCliAdapter(Identity identity, HostConfig config) : config_(std::move(config)), identity_(identity) {}

  std::string_view id() const override { return identity_.id; }
  const proto::CapabilityTable& capabilities() const override { return identity_.capabilities; }
  std::string_view model_wire() const override { return identity_.model_wire; }
  std::optional<std::string> installed_version(std::string& error) const override {
    return installed_package_version(config_, identity_.id, identity_.manifest, error);
  }

 protected:
  HostConfig config_;

 private:
  Identity identity_;
};

}  // namespace mh::adapters
