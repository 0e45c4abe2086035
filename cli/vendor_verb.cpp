// `metaharness vendor install [--dir DIR]`: the pinned vendor CLIs (vendor/pins, compiled in as
// build_info::vendor_pins) installed with npm where the daemon finds them, and the sha256 of each
// binary an adapter runs recorded in <dir>/installed.json (what `audit` holds a run's attested
// binary to, H9). Idempotent: a folder already on every pin, whose record names every pin, is
// left untouched (not even read-write), so it may be read-only.
// `metaharness vendor list [--helpers | --json]`: the registered vendors' ids, one a line, in registration
// order (the list scripts loop over instead of naming vendors); with --helpers, the file names of
// the helper programs their runs execute (VendorHelper: what packaging installs); with --json, what
// drivers read of each vendor (vendor_list_json).
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <set>

#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "cli/verbs.hpp"
#include "daemon/asio/process_v2.hpp"
#include "daemon/model/scenario.hpp"
#include "daemon/process/vendor_install_record.hpp"
#include "daemon/process/vendor_provenance.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/json.hpp"
#include "protocol/time_text.hpp"

namespace mh::cli {

namespace {

namespace asio = boost::asio;
namespace bp2 = boost::process::v2;
namespace fs = std::filesystem;

// What is in DIR for one pin: the npm package's manifest version and the native binary the
// adapter runs (the CLI's platform package, an optional npm dependency that may be missing).
struct PinState {
  const build_info::VendorPin* pin;
  std::optional<std::string> version;  // nullopt: no readable manifest
  fs::path binary;
  bool binary_ok = false;

  bool on_pin() const { return version == pin->version && binary_ok; }
  std::string describe() const {
    std::string what = std::string(pin->npm_package) + " ";
    if (!version) return what + "not installed";
    if (*version != pin->version) return what + *version + " (the pin is " + std::string(pin->version) + ")";
    if (!binary_ok) return what + *version + ", but its binary " + binary.string() + " is missing or not executable";
    return what + *version;
  }
};

std::optional<std::string> manifest_version(const fs::path& dir, std::string_view package) {
  std::ifstream in(dir / "node_modules" / package / "package.json", std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto parsed = protocol::parse_json(text);
  if (!parsed || !parsed->is_object()) return std::nullopt;
  const auto* version = parsed->as_object().if_contains("version");
  if (!version || !version->is_string()) return std::nullopt;
  return std::string(version->as_string());
}

fs::path native_binary(std::string_view adapter, const fs::path& dir) {
  const auto* vendor = adapters::find_vendor(adapter);
  return vendor ? vendor->default_binary(dir) : fs::path();
}

PinState inspect(const build_info::VendorPin& pin, const fs::path& dir) {
  PinState s{&pin, manifest_version(dir, pin.npm_package), native_binary(pin.adapter, dir)};
  s.binary_ok = !s.binary.empty() && ::access(s.binary.c_str(), X_OK) == 0;
  return s;
}

// npm install of `wanted` in `dir`, its output on our stderr (our stdout says what we did).
// Returns npm's exit status, or -1 with `error` when it could not be started.
int run_npm(const fs::path& npm, const fs::path& dir, const std::vector<std::string>& wanted, std::string& error) {
  std::vector<std::string> args = {"install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact"};
  args.insert(args.end(), wanted.begin(), wanted.end());
  try {
    asio::io_context io;
    bp2::process proc(io, npm, args, bp2::process_stdio{nullptr, STDERR_FILENO, {}}, bp2::process_start_dir{dir});
    return proc.wait();
  } catch (const std::exception& e) {
    error = e.what();
    return -1;
  }
}

// A vendor whose seam plugin needs an npm package (vendor/pins' fourth field) gets it at the
// CLI's own version in a folder of its own (package.json, package-lock.json, node_modules/),
// which every run of that vendor links into its config dir (VendorDescriptor::seam_package_dir).
struct PluginState {
  const build_info::VendorPin* pin;
  fs::path dir;
  std::optional<std::string> installed;

  bool wanted() const { return installed != pin->version || !fs::exists(dir / "package-lock.json"); }
  std::string package() const { return std::string(pin->seam_package) + "@" + std::string(pin->version); }
  std::string title() const { return std::string(pin->adapter) + " seam plugin: "; }
};

// One for each pin that names a seam package.
std::vector<PluginState> inspect_plugins(const fs::path& dir) {
  std::vector<PluginState> out;
  for (const auto& pin : build_info::vendor_pins) {
    if (pin.seam_package.empty()) continue;
    PluginState s{&pin, adapters::seam_package_dir(pin.adapter, dir), {}};
    s.installed = manifest_version(s.dir, pin.seam_package);
    out.push_back(std::move(s));
  }
  return out;
}

bool any_wanted(const std::vector<PluginState>& plugins) {
  for (const auto& p : plugins)
    if (p.wanted()) return true;
  return false;
}

// A folder npm installs into and nowhere else: a private manifest of its own, so npm does not
// climb to some enclosing project.
bool ensure_npm_folder(const fs::path& dir, std::string_view name) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "metaharness vendor install: cannot create " << dir.string() << ": " << ec.message() << "\n";
    return false;
  }
  if (fs::exists(dir / "package.json")) return true;
  std::ofstream manifest(dir / "package.json");
  manifest << "{\"name\":\"" << name << "\",\"private\":true}\n";
  if (!manifest.flush()) {
    std::cerr << "metaharness vendor install: cannot write " << (dir / "package.json").string() << "\n";
    return false;
  }
  return true;
}

// The binary each pin's adapter runs, as the record states it: resolved, and digested. Nullopt
// with `error` when it cannot be (named by file).
std::optional<protocol::InstalledBinary> installed_binary(const build_info::VendorPin& pin, const fs::path& dir,
                                                          std::string& error) {
  PinState state = inspect(pin, dir);
  std::error_code ec;
  fs::path resolved = fs::canonical(state.binary, ec);
  if (ec) {
    error = "cannot resolve " + state.binary.string() + ": " + ec.message();
    return std::nullopt;
  }
  auto sha = daemon::VendorProvenance::file_sha256(resolved);
  if (!sha) {
    error = sha.error();
    return std::nullopt;
  }
  return protocol::InstalledBinary{std::string(pin.adapter), std::string(pin.npm_package), state.version.value_or(""),
                                   resolved.string(), std::move(*sha)};
}

// Records the digests of what is installed (<dir>/installed.json, what `audit` holds a run's
// binary to): the pins in `fresh` (what npm just installed) anew, the others kept as recorded
// when the record has them, recorded now when it has not. An unreadable record is refused, never
// overwritten: it may be the one thing that says a binary was changed. A record that names every
// pin and has nothing fresh is left untouched. False when the record could not be written.
bool record_installed(const fs::path& dir, const std::set<std::string>& fresh) {
  const fs::path file = daemon::InstallRecord::path_in(dir);
  bool absent = false;
  auto existing = daemon::InstallRecord::read(file, &absent);
  if (!existing && !absent) {
    std::cerr << "metaharness vendor install: " << existing.error()
              << "; it is left as it is (remove it to record the binaries now in place)\n";
    return false;
  }
  daemon::InstallRecord record;
  std::vector<std::string> recorded_now;
  for (const auto& pin : build_info::vendor_pins) {
    const std::string adapter(pin.adapter);
    const protocol::InstalledBinary* kept = nullptr;
    if (existing && !fresh.count(adapter))
      for (const auto& b : existing->binaries)
        if (b.adapter == adapter) kept = &b;
    if (kept) {
      record.binaries.push_back(*kept);
      continue;
    }
    std::string error;
    auto entry = installed_binary(pin, dir, error);
    if (!entry) {
      std::cerr << "metaharness vendor install: cannot record the " << adapter << " binary: " << error << "\n";
      return false;
    }
    record.binaries.push_back(std::move(*entry));
    recorded_now.push_back(adapter);
  }
  if (recorded_now.empty()) return true;
  const auto now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  record.recorded_at = protocol::rfc3339_millis(now.count()).value_or("");
  if (auto problem = record.write(file)) {
    std::cerr << "metaharness vendor install: cannot record the installed binaries' digests: " << *problem
              << " (`audit` holds H9 unknown without the record)\n";
    return false;
  }
  std::string names;
  for (const auto& a : recorded_now)
    names += (names.empty() ? "" : ", ") + a;
  std::cout << "vendor install: recorded the sha256 of the " << names << " binar"
            << (recorded_now.size() == 1 ? "y" : "ies") << " in " << file.string()
            << (fresh.empty() ? " (as found in place: no record named them)" : "") << "\n";
  return true;
}

int vendor_install(const std::string& dir_option) {
  fs::path dir = dir_option.empty() ? adapters::host_config_from_environment().vendor_dir : fs::path(dir_option);
  dir = fs::absolute(dir);
  std::vector<PinState> before;
  std::vector<std::string> wanted;
  for (const auto& pin : build_info::vendor_pins) {
    before.push_back(inspect(pin, dir));
    if (!before.back().on_pin()) wanted.push_back(std::string(pin.npm_package) + "@" + std::string(pin.version));
  }
  std::vector<PluginState> plugins = inspect_plugins(dir);
  if (wanted.empty() && !any_wanted(plugins)) {
    for (const auto& s : before)
      std::cout << s.pin->adapter << ": " << s.describe() << " already in " << dir.string() << " (on pin)\n";
    for (const auto& plugin : plugins)
      std::cout << plugin.title() << plugin.package() << " already in " << plugin.dir.string() << "\n";
    std::cout << "vendor install: nothing to do\n";
    // The binaries in place are recorded once when no record names them yet; a record that
    // cannot be written (a read-only folder) is said, and does not undo what is installed.
    record_installed(dir, {});
    return 0;
  }
  for (const auto& s : before)
    if (!s.on_pin()) std::cout << s.pin->adapter << ": " << s.describe() << "\n";

  fs::path npm = bp2::environment::find_executable("npm");
  if (npm.empty()) {
    std::cerr
        << "metaharness vendor install: npm is not on PATH (Debian: apt-get install npm); nothing was installed\n";
    return 2;
  }
  // The daemon's user reads what root installs here: never let a tight umask hide it.
  ::umask(022);
  if (!ensure_npm_folder(dir, "metaharness-vendor-clis")) return 2;
  auto install = [&npm](const fs::path& into, const std::vector<std::string>& packages) {
    std::string joined;
    for (const auto& w : packages)
      joined += " " + w;
    std::cout << "vendor install: " << npm.string() << " install" << joined << " in " << into.string() << std::endl;
    std::string error;
    int status = run_npm(npm, into, packages, error);
    if (status != 0)
      std::cerr << "metaharness vendor install: "
                << (status < 0 ? "npm could not be started: " + error
                               : "npm failed with exit status " + std::to_string(status) + " (its output is above)")
                << "\n";
    return status == 0;
  };
  if (!wanted.empty() && !install(dir, wanted)) return 2;
  for (const auto& plugin : plugins) {
    if (!plugin.wanted()) continue;
    if (!ensure_npm_folder(plugin.dir, "metaharness-" + std::string(plugin.pin->adapter) + "-seam") ||
        !install(plugin.dir, {plugin.package()}))
      return 2;
  }
  int result = 0;
  for (const auto& pin : build_info::vendor_pins) {
    PinState after = inspect(pin, dir);
    if (after.on_pin()) {
      std::cout << pin.adapter << ": " << after.describe() << " installed in " << dir.string() << " (binary "
                << after.binary.string() << ")\n";
    } else {
      std::cerr << "metaharness vendor install: after npm, " << pin.adapter << " is " << after.describe() << "\n";
      result = 2;
    }
  }
  if (result == 0) {
    std::set<std::string> fresh;
    for (const auto& s : before)
      if (!s.on_pin()) fresh.insert(std::string(s.pin->adapter));
    if (!record_installed(dir, fresh)) result = 2;
  }
  for (const auto& after : inspect_plugins(dir)) {
    if (after.wanted()) {
      std::cerr << "metaharness vendor install: after npm, " << after.package() << " is not in " << after.dir.string()
                << "\n";
      result = 2;
    } else {
      std::cout << after.title() << after.package() << " installed in " << after.dir.string() << "\n";
    }
  }
  return result;
}

// `vendor list --json`: what a driver that plays each vendor on the scripted endpoint needs (the
// soak, scripts/make_seam_scenario.sh), so that none of them keeps a table of vendors.
boost::json::array vendor_list_json() {
  const adapters::HostConfig config = adapters::host_config_from_environment();
  boost::json::array out;
  for (const adapters::VendorDescriptor* v : adapters::vendor_descriptors()) {
    const std::unique_ptr<adapters::Adapter> adapter = v->make(config);
    boost::json::array process_names, helpers;
    for (std::string_view name : v->process_names)
      process_names.emplace_back(name);
    for (const adapters::VendorHelper& h : v->helpers)
      helpers.emplace_back(h.file_name);
    const adapters::ScriptedShell& shell = v->scripted_shell;
    const std::optional<model::Wire> scenario_wire = model::wire_of_model_api(adapter->model_wire());
    out.push_back(
        boost::json::object{{"id", v->id},
                            {"model_wire", adapter->model_wire()},
                            {"scenario_wire", scenario_wire ? boost::json::value(model::to_string(*scenario_wire))
                                                            : boost::json::value(nullptr)},
                            {"process_names", std::move(process_names)},
                            {"over_acp", v->over_acp},
                            {"scripted_shell", boost::json::object{{"tool", shell.tool},
                                                                   {"command_key", shell.command_key},
                                                                   {"call_id_prefix", shell.call_id_prefix},
                                                                   {"reported_call_id", shell.reported_call_id},
                                                                   {"side_requests", shell.side_requests}}},
                            {"helpers", std::move(helpers)}});
  }
  return out;
}

}  // namespace

void register_vendor_verb(CLI::App& app, Context& ctx) {
  auto dir = std::make_shared<std::string>();
  auto* vendor = app.add_subcommand("vendor", "The pinned vendor CLIs the daemon runs");
  vendor->require_subcommand(1);
  auto* install = vendor->add_subcommand(
      "install",
      "Install the pinned vendor CLIs with npm where the daemon finds them (idempotent; exit 0 when on pin, 2 when "
      "not)");
  install->add_option("--dir", *dir,
                      "the folder (holding node_modules/); default $METAHARNESS_VENDOR_DIR, else " +
                          std::string(build_info::default_vendor_dir));
  install->callback([&ctx, dir] { ctx.exit_code = vendor_install(*dir); });
  auto helpers = std::make_shared<bool>(false);
  auto as_json = std::make_shared<bool>(false);
  auto* list = vendor->add_subcommand("list", "The vendors this build governs, one id a line (registration order)");
  auto* helpers_flag =
      list->add_flag("--helpers", *helpers,
                     "instead, the helper programs their runs execute beside the CLI, one file name a line (what the "
                     "package installs beside the supervisor)");
  auto* json_flag =
      list->add_flag("--json", *as_json,
                     "instead, one JSON array: each vendor's id, model wire, process names, whether it speaks ACP, "
                     "how a scripted model asks it to run a shell command, and its helpers (what drivers read)");
  json_flag->excludes(helpers_flag);
  list->callback([&ctx, helpers, as_json] {
    if (*as_json) {
      std::cout << protocol::canonical_json(vendor_list_json()) << "\n";
    } else {
      for (const adapters::VendorDescriptor* v : adapters::vendor_descriptors()) {
        if (!*helpers) std::cout << v->id << "\n";
        for (const adapters::VendorHelper& h : *helpers ? v->helpers : std::vector<adapters::VendorHelper>{})
          std::cout << h.file_name << "\n";
      }
    }
    ctx.exit_code = 0;
  });
}

}  // namespace mh::cli
