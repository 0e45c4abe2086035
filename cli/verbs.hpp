// Each family of command-line verbs lives in its own file and registers itself here, so the
// families can grow independently. A verb's callback stores the process exit status in
// `exit_code`; main returns it.
#pragma once

#include <CLI/CLI.hpp>
#include <boost/system/result.hpp>
#include <filesystem>
#include <optional>
#include <string>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"
#include "protocol/hermetic_floor.hpp"

namespace mh::cli {

struct Context {
  int exit_code = 0;
};

void register_protocol_verbs(CLI::App& app, Context& ctx);  // check-stream, frame
void register_model_verbs(CLI::App& app, Context& ctx);     // model serve
void register_adapter_verbs(CLI::App& app, Context& ctx);   // plan, capabilities, doctor, translate
void register_run_verb(CLI::App& app, Context& ctx);        // run
void register_daemon_verbs(CLI::App& app, Context& ctx);    // daemon, submit, attach, tail, ls, halt, decide, status
void register_audit_verb(CLI::App& app, Context& ctx);      // audit
void register_export_verb(CLI::App& app, Context& ctx);     // export (ATIF trajectories)
void register_vendor_verb(CLI::App& app, Context& ctx);     // vendor install

// A file's bytes, whole; nullopt with "cannot read <path>" in `error` when it cannot be opened.
std::optional<std::string> read_file_bytes(const std::string& path, std::string& error);
// The same, where "-" is stdin.
std::optional<std::string> read_input(const std::string& path, std::string& error);

// The hermetic audit of a run directory (the stream and the launch's facts from spec.json and
// plan.json) or of a bare events.jsonl (the stream alone). The error says why it cannot be read.
// H9 holds the attested vendor binary to `install_record` (`vendor install`'s record; default:
// installed.json in the host's vendor dir).
boost::system::result<protocol::AuditReport, std::string> audit_path(
    const std::filesystem::path& path, const adapters::AdapterRegistry& registry,
    const std::optional<std::filesystem::path>& install_record = std::nullopt);

}  // namespace mh::cli
