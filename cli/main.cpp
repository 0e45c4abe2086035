// metaharness: one binary, many verbs.
#include <csignal>
#include <iostream>

#include "cli/verbs.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/digest.hpp"

int main(int argc, char** argv) {
  // A reader that goes away must be an error value on write, not a signal that kills us.
  std::signal(SIGPIPE, SIG_IGN);
  mh::protocol::warm_up_digests();
  CLI::App app{"metaharness: governs headless coding-agent runs (observe, control, keep the record)"};
  app.set_version_flag("--version", std::string(mh::build_info::version));
  app.require_subcommand(1);
  mh::cli::Context ctx;
  mh::cli::register_protocol_verbs(app, ctx);
  mh::cli::register_model_verbs(app, ctx);
  mh::cli::register_adapter_verbs(app, ctx);
  mh::cli::register_run_verb(app, ctx);
  mh::cli::register_daemon_verbs(app, ctx);
  mh::cli::register_audit_verb(app, ctx);
  mh::cli::register_export_verb(app, ctx);
  mh::cli::register_vendor_verb(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error (an unknown option, a missing or invalid
    // value) exits 2, as docs/cli.md says, not with CLI11's own codes (105-109).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "metaharness: " << e.what() << "\n";
    return 2;
  }
  return ctx.exit_code;
}
