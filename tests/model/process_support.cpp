#include "tests/model/process_support.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "daemon/asio/process_v2.hpp"

namespace mh::model::testing {

namespace net = boost::asio;
namespace bp = boost::process::v2;
using Clock = std::chrono::steady_clock;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TempDir::TempDir(std::string_view label) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("mh-" + std::string(label) + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
  path_ = pattern;
}

TempDir::~TempDir() {
  if (::testing::Test::HasFailure()) {
    std::cerr << "kept for inspection: " << path_ << "\n";
    return;
  }
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

// Waits for `process` to exit within `timeout`; kills it (and reaps it) otherwise.
std::optional<int> wait_bounded(net::io_context& io, bp::process& process, std::chrono::milliseconds timeout) {
  bool done = false;
  int exit_code = -1;
  process.async_wait([&](boost::system::error_code ec, int code) {
    done = true;
    exit_code = ec ? -1 : code;
  });
  io.restart();
  io.run_for(timeout);
  if (done) return exit_code;
  boost::system::error_code ignored;
  process.terminate(ignored);  // SIGKILL
  io.restart();
  io.run_for(std::chrono::seconds(5));
  return std::nullopt;
}

}  // namespace

ProcessResult run_process(const ProcessSpec& spec, std::chrono::milliseconds timeout) {
  ProcessResult result;
  const auto out_path = spec.output_dir / "stdout.txt";
  const auto err_path = spec.output_dir / "stderr.txt";
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  net::io_context io;
  const auto start = Clock::now();
  bp::process process(io, spec.executable, spec.args, bp::process_stdio{nullptr, out_path, err_path},
                      bp::process_environment(spec.environment), bp::process_start_dir(spec.working_dir));
  std::optional<int> code = wait_bounded(io, process, timeout);
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  result.finished = code.has_value();
  result.exit_code = code.value_or(-1);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

struct LiveProcess::Impl {
  explicit Impl(const ProcessSpec& spec)
      : out(io), in(io), err_path(spec.output_dir / "stderr.txt"), process(start(spec)) {}

  bp::process start(const ProcessSpec& spec) {
    if (spec.pipe_stdin)
      return bp::process(io, spec.executable, spec.args, bp::process_stdio{in, out, err_path},
                         bp::process_environment(spec.environment), bp::process_start_dir(spec.working_dir));
    return bp::process(io, spec.executable, spec.args, bp::process_stdio{nullptr, out, err_path},
                       bp::process_environment(spec.environment), bp::process_start_dir(spec.working_dir));
  }

  net::io_context io;
  net::readable_pipe out;
  net::writable_pipe in;
  std::filesystem::path err_path;
  bp::process process;
  net::streambuf buffer;
  bool reaped = false;
};

LiveProcess::LiveProcess(const ProcessSpec& spec) : impl_(std::make_unique<Impl>(spec)) {}

LiveProcess::~LiveProcess() {
  if (!impl_->reaped) wait(std::chrono::milliseconds(0));
}

std::optional<std::string> LiveProcess::read_line(std::chrono::milliseconds timeout) {
  bool done = false;
  boost::system::error_code result;
  net::async_read_until(impl_->out, impl_->buffer, '\n', [&](boost::system::error_code ec, std::size_t) {
    result = ec;
    done = true;
  });
  impl_->io.restart();
  impl_->io.run_for(timeout);
  if (!done) {
    impl_->out.cancel();
    impl_->io.restart();
    impl_->io.run();
    return std::nullopt;
  }
  if (result) return std::nullopt;
  std::istream in(&impl_->buffer);
  std::string line;
  std::getline(in, line);
  return line;
}

bool LiveProcess::write_line(std::string_view line) {
  if (!impl_->in.is_open()) return false;
  std::string text(line);
  text.push_back('\n');
  boost::system::error_code ec;
  net::write(impl_->in, net::buffer(text), ec);
  return !ec;
}

void LiveProcess::close_stdin() {
  boost::system::error_code ignored;
  impl_->in.close(ignored);
}

void LiveProcess::signal(int signal_number) {
  ::kill(impl_->process.id(), signal_number);
}

std::optional<int> LiveProcess::wait(std::chrono::milliseconds timeout) {
  impl_->reaped = true;
  return wait_bounded(impl_->io, impl_->process, timeout);
}

std::string LiveProcess::stderr_text() const {
  return read_file(impl_->err_path);
}

}  // namespace mh::model::testing
