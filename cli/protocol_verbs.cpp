// Offline verbs over the wire's documents: check-stream, frame seal, frame verify.
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <variant>

#include "cli/verbs.hpp"
#include "protocol/completeness.hpp"
#include "protocol/frame.hpp"

namespace mh::cli {

namespace {

int check_stream(const std::string& path) {
  protocol::StreamChecker checker;
  if (path == "-") {
    char buf[1 << 16];
    while (std::cin.read(buf, sizeof buf) || std::cin.gcount() > 0)
      checker.feed(std::string_view(buf, static_cast<std::size_t>(std::cin.gcount())));
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "metaharness check-stream: cannot read " << path << "\n";
      return 2;
    }
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0)
      checker.feed(std::string_view(buf, static_cast<std::size_t>(in.gcount())));
  }
  protocol::StreamVerdict v = checker.finish();
  std::cout << v.summary() << "\n";
  if (v.first_bad_line) std::cout << "first bad line: " << *v.first_bad_line << ": " << v.first_bad_reason << "\n";
  return v.complete_and_well_formed() ? 0 : 1;
}

// The frame document at `path` (or -), loaded; or, once `unreadable` (exit status 2) or
// `refused` (1) has said why, the exit status.
std::variant<protocol::Frame, int> load_frame_at(const std::string& path, bool require_sealed,
                                                 const std::function<void(const std::string&)>& unreadable,
                                                 const std::function<void(const protocol::FrameRefusal&)>& refused) {
  std::string error;
  auto text = read_input(path, error);
  if (!text) {
    unreadable(error);
    return 2;
  }
  auto frame = protocol::load_frame(*text, require_sealed);
  if (!frame) {
    refused(frame.error());
    return 1;
  }
  return std::move(*frame);
}

int frame_seal(const std::string& in_path, const std::string& out_path) {
  auto loaded = load_frame_at(
      in_path, /*require_sealed=*/false,
      [](const std::string& error) { std::cerr << "metaharness frame seal: " << error << "\n"; },
      [](const protocol::FrameRefusal& r) {
        std::cerr << "metaharness frame seal: refused (" << protocol::to_string(r.kind) << "): " << r.message << "\n";
      });
  auto* frame = std::get_if<protocol::Frame>(&loaded);
  if (!frame) return std::get<int>(loaded);
  protocol::seal(*frame);
  std::string doc = protocol::frame_document(*frame);
  if (out_path == "-") {
    std::cout << doc;
  } else {
    std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
    if (!(out << doc)) {
      std::cerr << "metaharness frame seal: cannot write " << out_path << "\n";
      return 2;
    }
  }
  std::cerr << "sealed " << frame->digest << "\n";
  return 0;
}

int frame_verify(const std::string& path) {
  auto loaded = load_frame_at(
      path, /*require_sealed=*/true, [](const std::string& error) { std::cout << "Unreadable: " << error << "\n"; },
      [](const protocol::FrameRefusal& r) { std::cout << protocol::to_string(r.kind) << ": " << r.message << "\n"; });
  auto* frame = std::get_if<protocol::Frame>(&loaded);
  if (!frame) return std::get<int>(loaded);
  std::cout << "sealed: " << frame->digest << "\n";
  return 0;
}

}  // namespace

void register_protocol_verbs(CLI::App& app, Context& ctx) {
  // Option storage is shared with the callbacks, which the App keeps alive.
  struct Options {
    std::string check_path, seal_in, seal_out, verify_path;
  };
  auto opts = std::make_shared<Options>();

  auto* check =
      app.add_subcommand("check-stream",
                         "Judge an event stream: Complete, Truncated or Inconsistent, and name the first line that "
                         "is not a well-formed event in sequence. Exit 0 only for a complete, well-formed stream.");
  check->add_option("FILE", opts->check_path, "events.jsonl, or - for standard input")->required();
  check->callback([&ctx, opts] { ctx.exit_code = check_stream(opts->check_path); });

  auto* frame = app.add_subcommand("frame", "Seal and verify metaharness.frame/1 documents");
  frame->require_subcommand(1);
  auto* seal_cmd = frame->add_subcommand("seal", "Validate a frame, compute its digest, write it sealed");
  seal_cmd->add_option("IN", opts->seal_in, "frame document (or -)")->required();
  seal_cmd->add_option("OUT", opts->seal_out, "where to write the sealed document (or -)")->required();
  seal_cmd->callback([&ctx, opts] { ctx.exit_code = frame_seal(opts->seal_in, opts->seal_out); });

  auto* verify_cmd = frame->add_subcommand(
      "verify", "Check a frame document: readable, tagged, well-shaped, and unedited since sealing");
  verify_cmd->add_option("FILE", opts->verify_path, "frame document (or -)")->required();
  verify_cmd->callback([&ctx, opts] { ctx.exit_code = frame_verify(opts->verify_path); });
}

}  // namespace mh::cli
