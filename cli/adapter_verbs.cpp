// Verbs that ask an adapter something without starting a run: plan, capabilities, doctor,
// translate.
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "cli/run_spec_options.hpp"
#include "cli/verbs.hpp"
#include "daemon/asio/process_v2.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/events.hpp"
#include "protocol/line_cut.hpp"

namespace mh::cli {

namespace {

namespace asio = boost::asio;
namespace bp2 = boost::process::v2;
namespace json = boost::json;

const adapters::Adapter* require_adapter(const adapters::AdapterRegistry& registry, const std::string& id) {
  const adapters::Adapter* a = registry.find(id);
  if (!a) {
    std::string known;
    for (auto k : registry.ids())
      known += (known.empty() ? "" : ", ") + std::string(k);
    std::cerr << "metaharness: unknown adapter \"" << id << "\"; this binary has " << known << "\n";
  }
  return a;
}

int plan_verb(const RunSpecOptions& o, const std::string& run_dir) {
  adapters::AdapterRegistry registry(adapters::host_config_from_environment());
  const adapters::Adapter* adapter = require_adapter(registry, o.adapter);
  if (!adapter) return 2;
  auto spec = build_spec(o, new_run_id());
  if (!spec) {
    std::cerr << "metaharness plan: " << spec.error() << "\n";
    return 2;
  }
  if (!o.model_scenario.empty())
    spec->model_endpoint = adapters::ModelEndpoint{"http://127.0.0.1:<port chosen when the run starts>",
                                                   "(a per-run token generated when the run starts)"};
  std::filesystem::path dir =
      run_dir.empty() ? std::filesystem::path("metaharness-runs") / spec->run_id : std::filesystem::path(run_dir);
  auto planned = adapter->plan(*spec, adapters::RunPaths{dir, dir / "scratch"});
  if (auto* refusal = std::get_if<adapters::LaunchRefusal>(&planned)) {
    for (const auto& r : refusal->command_results) {
      std::string line;
      protocol::JsonWriter w(line);
      w.begin_object();
      w.field("id", r.id);
      w.key("outcome");
      protocol::write_outcome(w, r.outcome);
      w.end_object();
      std::cout << line << "\n";
    }
    std::cerr << "metaharness plan: refused: " << refusal->message << "\n";
    return 2;
  }
  std::cout << protocol::pretty_json(adapters::plan_to_json(std::get<adapters::LaunchPlan>(planned), *spec), false);
  return 0;
}

// The run's body is contained the same whichever adapter runs in it: a property of the host the
// daemon runs on, which its `status` reply states (`containment`). The table names it, and what
// each part falls back to, so a reader of either knows where to look (docs/containment.md).
json::object containment_row() {
  return json::object{
      {"property_of", "host"},
      {"reported_by", "status.containment"},
      {"end", json::object{{"cgroup", "a cgroup per run: everything the run starts is killed with it"},
                           {"marker-sweep",
                            "where no writable cgroup2 exists (warning CGROUP_UNAVAILABLE at run start): "
                            "processes found by their environment marker, which one that drops its "
                            "environment escapes"}}},
      {"sandbox", json::object{{"bwrap", "a filesystem of the run's own making"},
                               {"none", "where bwrap is absent or off (warning SANDBOX_UNAVAILABLE)"}}},
      {"identity", json::object{{"uid-per-run", "a root daemon's runs each get an unprivileged uid"},
                                {"runs.user", "a root daemon's runs run as the configured user"},
                                {"daemon-user", "a daemon that is not root runs its runs as itself"}}},
      // runs.network (docs/gateway.md): the run's model gateway is the only door, or the host's
      // network is open to it.
      {"network",
       json::object{{"gateway",
                     "a network namespace of the run's own, loopback only: its model gateway (the upstream's key "
                     "held there, a per-run placeholder in the run) and, for the destinations its spec lists, an "
                     "egress proxy are the only way out"},
                    {"host",
                     "the host's network, unconfined (runs.network = \"host\", or where the gateway cannot "
                     "be built: status.containment.unavailable.network says why)"}}}};
}

int capabilities_verb(const std::string& id, bool render) {
  adapters::AdapterRegistry registry(adapters::host_config_from_environment());
  const adapters::Adapter* adapter = require_adapter(registry, id);
  if (!adapter) return 2;
  if (render) {
    std::cout << protocol::render_rendering_table(adapter->capabilities());
    std::cout << "containment      -> a host property: the daemon's `status` (containment)\n";
    return 0;
  }
  json::value table = protocol::capabilities_to_json(adapter->capabilities());
  table.as_object()["containment"] = containment_row();
  // The model API the vendor speaks: an upstream of another wire is refused at submit.
  table.as_object()["model_wire"] = std::string(adapter->model_wire());
  std::cout << protocol::pretty_json(table, false);
  return 0;
}

// Runs `<binary> --version` and returns its first line.
std::optional<std::string> binary_version(const std::filesystem::path& binary, std::string& error) {
  try {
    asio::io_context io;
    asio::readable_pipe out(io);
    bp2::process proc(io, binary, {"--version"}, bp2::process_stdio{nullptr, out, nullptr});
    std::string text;
    boost::system::error_code ec;
    asio::read(out, asio::dynamic_buffer(text), ec);
    proc.wait();
    auto nl = text.find('\n');
    return text.substr(0, nl);
  } catch (const std::exception& e) {
    error = e.what();
    return std::nullopt;
  }
}

int doctor_verb(const std::string& id) {
  adapters::AdapterRegistry registry(adapters::host_config_from_environment());
  const adapters::Adapter* adapter = require_adapter(registry, id);
  if (!adapter) return 2;
  const auto& pins = adapter->capabilities().versions_pinned;
  std::string pin = pins.empty() ? "" : pins.front();
  std::string manifest_error;
  auto installed = adapter->installed_version(manifest_error);
  adapters::RunSpec probe;  // only to find the binary the plan would run
  probe.run_id = "doctor";
  probe.adapter = id;
  probe.prompt = "x";
  probe.model_endpoint = adapters::ModelEndpoint{"http://127.0.0.1:1", "t"};
  auto planned = adapter->plan(probe, adapters::RunPaths{"/tmp/doctor", "/tmp/doctor/scratch"});
  std::optional<std::string> reported;
  std::string binary_error;
  if (auto* plan = std::get_if<adapters::LaunchPlan>(&planned)) {
    std::cout << id << ": binary " << plan->program.string() << "\n";
    reported = binary_version(plan->program, binary_error);
  } else {
    binary_error = std::get<adapters::LaunchRefusal>(planned).message;
  }
  std::cout << id << ": pinned " << pin << "\n";
  std::cout << id << ": package manifest " << (installed ? *installed : "unknown (" + manifest_error + ")") << "\n";
  std::cout << id << ": binary reports " << (reported ? *reported : "nothing (" + binary_error + ")") << "\n";
  // The vendor's own programs its runs execute beside the CLI (a hook program): where this host
  // finds them (the environment, beside this binary, else the package's folder), and whether they
  // are there: a run whose helper is missing is refused at launch.
  if (const adapters::VendorDescriptor* vendor = adapters::find_vendor(id))
    for (const adapters::VendorHelper& helper : vendor->helpers) {
      const auto where = registry.config().binaries.find(std::string(helper.binary_key));
      if (where == registry.config().binaries.end()) continue;
      std::error_code ec;
      std::cout << id << ": helper " << helper.file_name << " " << where->second.string()
                << (std::filesystem::exists(where->second, ec) ? "" : " (MISSING: runs are refused at launch)") << "\n";
    }
  // The binary's own word is the evidence; the manifest is only a fallback.
  std::optional<bool> on_pin;
  if (reported)
    on_pin = reported->find(pin) != std::string::npos && !pin.empty();
  else if (installed)
    on_pin = *installed == pin;
  if (!on_pin) {
    std::cout << id << ": cannot tell whether the installed CLI is on the pin\n";
    return 2;
  }
  std::cout << id << ": " << (*on_pin ? "on pin" : "OFF PIN") << "\n";
  return *on_pin ? 0 : 1;
}

int translate_verb(const std::string& id, const std::string& path, const std::string& run_id) {
  adapters::AdapterRegistry registry(adapters::host_config_from_environment());
  const adapters::Adapter* adapter = require_adapter(registry, id);
  if (!adapter) return 2;
  std::string error;
  auto text = read_input(path, error);
  if (!text) {
    std::cerr << "metaharness translate: " << error << "\n";
    return 2;
  }
  std::string out;
  // The same line bound as a live run's stream (the default), so every reader takes every line.
  for (auto& e : adapter->translate(*text, run_id)) {
    protocol::serialize_within(out, e);
    out.push_back('\n');
  }
  std::cout << out;
  return 0;
}

}  // namespace

void register_adapter_verbs(CLI::App& app, Context& ctx) {
  struct Options {
    RunSpecOptions spec;
    std::string run_dir;
    std::string adapter;
    bool render = false;
    std::string translate_path = "-";
    std::string translate_run = "translated";
  };
  auto o = std::make_shared<Options>();

  auto* plan = app.add_subcommand("plan", "Print the launch plan a run would use, without spawning anything");
  add_run_spec_options(plan, o->spec);
  plan->add_option("--run-dir", o->run_dir, "the run directory the plan names (default metaharness-runs/<id>)");
  plan->callback([&ctx, o] { ctx.exit_code = plan_verb(o->spec, o->run_dir); });

  auto* caps = app.add_subcommand("capabilities", "Print an adapter's capability table");
  caps->add_option("ADAPTER", o->adapter, adapter_choices())->required();
  caps->add_flag("--render", o->render, "print the operation -> vendor tool rendering, one line each");
  caps->callback([&ctx, o] { ctx.exit_code = capabilities_verb(o->adapter, o->render); });

  auto* doctor = app.add_subcommand(
      "doctor", "Compare the installed vendor CLI with the pin (exit 0 on pin, 1 off pin, 2 cannot tell)");
  doctor->add_option("ADAPTER", o->adapter, adapter_choices())->required();
  doctor->callback([&ctx, o] { ctx.exit_code = doctor_verb(o->adapter); });

  auto* translate = app.add_subcommand(
      "translate", "The reader alone, offline: a retained vendor transcript in, events out (no decisions; seam none)");
  translate->add_option("ADAPTER", o->adapter, adapter_choices())->required();
  translate->add_option("FILE", o->translate_path, "the vendor transcript (default -: standard input)");
  translate->add_option("--run", o->translate_run, "the run id to stamp on the events");
  translate->callback([&ctx, o] { ctx.exit_code = translate_verb(o->adapter, o->translate_path, o->translate_run); });
}

}  // namespace mh::cli
