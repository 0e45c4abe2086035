// The Codex adapter (CLI 0.171.0), driven through `codex app-server` (JSON-RPC over stdio): the
// surface that delivers per-call approvals, injection between turns, mid-turn steering,
// interrupt and permission changes. Facts: ../shared/reference/codex-wire.md (§5, §9) and
// codex-gating.md.
//
// The call seam has two parts, each for the kinds it covers:
//   - approvals: under the per-thread approvalPolicy "untrusted" (the only policy under which
//     every command and patch asks) every shell command and every patch waits on an
//     item/commandExecution/requestApproval or item/fileChange/requestApproval request on our
//     own connection: tool.requested with seam control_request, answered accept / decline;
//   - a PreToolUse command hook (mh-codex-hook, trust bypassed per thread) for every other kind
//     (MCP, image view, sub-agent tools...): it asks the run over its hook channel and blocks
//     for the answer, and denies by itself on any failure, since Codex fails open on a hook
//     crash or timeout. For shell and patch calls the hook only announces the call (it answers
//     "no opinion" at once) and the approval decides.
// Kinds nothing can gate are switched off at launch: hosted web search (web_search =
// "disabled") and interactive TTY sessions, the only way write_stdin reaches a process
// (unified_exec_tty = false).
#pragma once

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters {

std::unique_ptr<Adapter> make_codex_adapter(const HostConfig& config);

struct VendorDescriptor;  // adapters/vendor_descriptor.hpp

namespace codex {
// This vendor as the host knows it before any run (codex_descriptor.cpp; vendor_descriptor.hpp).
const VendorDescriptor& descriptor();

const proto::CapabilityTable& capabilities();

// The native binary under the vendor dir (not the node launcher, so the pid is exact).
inline constexpr std::string_view kBinaryUnderVendor =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

// The native binary under a vendor dir.
inline std::filesystem::path default_binary(const std::filesystem::path& vendor_dir) {
  return vendor_dir / kBinaryUnderVendor;
}

// Codex's approval policies and sandbox modes, as permission.set postures.
bool is_known_posture(std::string_view posture);

// The settings a run may declare with vendor_options, and how they reach config.toml.
bool is_known_vendor_option(std::string_view key);

// What an apply_patch call touches (tool.requested.subjects): `file:<path>` for every file the
// patch names (Add / Update / Delete File and Move to), verbatim, from the call's `changes`
// (item/started, the approval) or else its patch text (the hook's `command`).
std::vector<std::string> patch_subjects(const json::value& input);

}  // namespace codex
}  // namespace mh::adapters
