// `metaharness audit RUN_DIR|events.jsonl [--json]`: the hermetic floor's verdicts (reference
// §10.4) for a run after the fact. A run directory gives the launch's facts (spec.json,
// plan.json); a bare events.jsonl gives only what the stream says, so more rows are unk.
#include <cstring>
#include <fstream>
#include <iostream>

#include "adapters/registry.hpp"
#include "cli/verbs.hpp"
#include "daemon/process/vendor_install_record.hpp"
#include "protocol/wire_codec.hpp"

namespace mh::cli {

namespace {

namespace json = boost::json;
using Result = boost::system::result<protocol::AuditReport, std::string>;

// A small JSON document of the run directory; null when absent or unreadable (its facts are then
// unknown, which the rows say).
json::value read_json_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return nullptr;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return protocol::parse_json(text).value_or(nullptr);
}

bool read_stream(const std::filesystem::path& p, protocol::StreamRecordReader& reader, std::string& error) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    error = "cannot open " + p.string() + ": " + std::strerror(errno);
    return false;
  }
  char buffer[64 * 1024];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0)
    reader.feed(std::string_view(buffer, static_cast<std::size_t>(in.gcount())));
  if (in.bad()) {
    error = "reading " + p.string() + " failed";
    return false;
  }
  return true;
}

// What the run's session.started attested of its network and its model credential (issue 25,
// docs/hermetic.md): a fact beside the rows, not a row. Null each when not said (an older run).
struct NetworkFacts {
  std::optional<std::string> network, model_credential;
  std::optional<protocol::VendorBinary> vendor_binary;  // issue 27 section 6
};
NetworkFacts attested_network(const std::filesystem::path& path) {
  std::error_code ec;
  std::ifstream in(std::filesystem::is_directory(path, ec) ? path / "events.jsonl" : path, std::ios::binary);
  std::optional<protocol::ev::SessionStarted> started;
  for (std::string line; !started && std::getline(in, line);)
    started = protocol::session_started_in(line);
  if (!started) return {};
  return {started->hermetic.network, started->hermetic.model_credential, started->hermetic.vendor_binary};
}

// What the attestation says of the binary that ran, for the report: one line, or "not attested".
std::string vendor_binary_line(const std::optional<protocol::VendorBinary>& b) {
  if (!b) return "vendor binary: not attested\n";
  std::string out = "vendor binary: " + b->path;
  if (b->package || b->version)
    out += " (" + b->package.value_or("package unknown") + " " + b->version.value_or("version unknown") + ")";
  out += b->sha256 ? ", sha256 " + *b->sha256 : ", not digested: " + b->refused.value_or("no reason given");
  return out + "\n";
}

}  // namespace

Result audit_path(const std::filesystem::path& path, const adapters::AdapterRegistry& registry,
                  const std::optional<std::filesystem::path>& install_record) {
  auto fail = [](std::string m) { return Result(boost::system::in_place_error, std::move(m)); };
  std::error_code ec;
  std::filesystem::path events;
  protocol::LaunchFacts facts;
  std::optional<protocol::HermeticMode> mode;
  if (std::filesystem::is_directory(path, ec)) {
    events = path / "events.jsonl";
    if (!std::filesystem::is_regular_file(events, ec))
      return fail(path.string() + " is not a run directory: it holds no events.jsonl");
    json::value spec = read_json_file(path / "spec.json");
    facts = protocol::launch_facts_from_run_files(spec, read_json_file(path / "plan.json"));
    mode = protocol::spec_mode(spec);
    // Claude reports getcwd(): the planned directory with its links resolved.
    if (facts.cwd) {
      auto resolved = std::filesystem::weakly_canonical(facts.cwd->planned, ec);
      if (!ec) facts.cwd->resolved = resolved.string();
    }
  } else if (std::filesystem::is_regular_file(path, ec)) {
    events = path;
    facts = protocol::launch_facts_from_stream_alone();
  } else {
    return fail("cannot audit " + path.string() + ": neither a run directory nor an events.jsonl");
  }
  protocol::StreamRecordReader reader;
  std::string error;
  if (!read_stream(events, reader, error)) return fail(error);
  protocol::StreamRecord record = reader.finish();
  // The pins are the adapter's, as this metaharness knows them: the standard the audit holds the
  // observed version to.
  std::optional<std::string> adapter = facts.adapter;
  if (!adapter && record.started) adapter = record.started->adapter;
  if (adapter)
    if (const adapters::Adapter* a = registry.find(*adapter)) facts.pins = a->capabilities().versions_pinned;
  // The binary that ran against the one `vendor install` recorded (H9): the host's record unless
  // another is named. An adapter nobody names leaves nothing to look up: unknown.
  const std::filesystem::path record_file =
      install_record ? *install_record
                     : daemon::InstallRecord::path_in(adapters::host_config_from_environment().vendor_dir);
  if (adapter) {
    facts.install_record = daemon::InstallRecord::fact_for(record_file, *adapter);
  } else {
    facts.install_record = protocol::InstallRecordFact{record_file.string(), std::nullopt,
                                                       "the run names no adapter to look up in the install record"};
  }
  return protocol::audit(std::move(record), std::move(facts), mode);
}

void register_audit_verb(CLI::App& app, Context& ctx) {
  struct Options {
    std::string path;
    bool json = false;
    std::string install_record;
  };
  auto o = std::make_shared<Options>();
  auto* audit = app.add_subcommand(
      "audit",
      "The hermetic floor's verdicts for a run: one line per row H1a..H11 (ok / gap / unk), the decision census, "
      "withheld, the stream's completeness. Exit status: 0 every gating row ok, 1 a gap, 3 an unk (or a stream "
      "that is not complete), 2 cannot read");
  audit->add_option("RUN", o->path, "a run directory (its launch facts are read too) or an events.jsonl")->required();
  audit->add_flag("--json", o->json, "one JSON document instead of the report");
  audit->add_option("--install-record", o->install_record,
                    "the record `vendor install` wrote, H9's standard for the binary that ran (default: "
                    "installed.json in $METAHARNESS_VENDOR_DIR, else the binary's default vendor folder)");
  audit->callback([&ctx, o] {
    adapters::AdapterRegistry registry(adapters::host_config_from_environment());
    auto report =
        audit_path(o->path, registry,
                   o->install_record.empty() ? std::nullopt : std::optional<std::filesystem::path>(o->install_record));
    if (!report) {
      std::cerr << "metaharness audit: " << report.error() << "\n";
      ctx.exit_code = 2;
      return;
    }
    const NetworkFacts network = attested_network(o->path);
    auto or_null = [](const std::optional<std::string>& v) { return v ? json::value(*v) : json::value(nullptr); };
    if (o->json) {
      json::value doc = protocol::audit_report_json(*report);
      if (json::object* top = doc.if_object()) {
        (*top)["network"] = or_null(network.network);
        (*top)["model_credential"] = or_null(network.model_credential);
        if (network.vendor_binary) {
          std::string text;
          protocol::JsonWriter w(text);
          protocol::wire::write_value(w, *network.vendor_binary);
          (*top)["vendor_binary"] = protocol::parse_json(text).value_or(nullptr);
        } else {
          (*top)["vendor_binary"] = nullptr;
        }
      }
      std::cout << protocol::pretty_json(doc, false);
    } else {
      std::cout << protocol::audit_report_text(*report);
      std::cout << "network: " << network.network.value_or("not attested")
                << "; model credential: " << network.model_credential.value_or("not attested") << "\n";
      std::cout << vendor_binary_line(network.vendor_binary);
    }
    std::cout.flush();
    ctx.exit_code = protocol::audit_exit_status(*report);
  });
}

}  // namespace mh::cli
