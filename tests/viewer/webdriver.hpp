// A real headless Chromium driven over the W3C WebDriver protocol (Debian's chromium-driver):
// chromedriver on a loopback port it picks itself, one browser session, and the handful of
// commands the viewer tests need. Every wait is bounded; a wait for the page polls a condition
// the page exposes, it does not sleep to order anything.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "protocol/json.hpp"
#include "testkit/subprocess.hpp"
#include "tests/http/http_test_client.hpp"

namespace mh::test {

class Browser {
 public:
  // Starts chromedriver and a headless Chromium with a profile in `profile_dir`. `error()` says
  // why when started() is false.
  explicit Browser(const std::filesystem::path& profile_dir);
  ~Browser();  // ends the session (the browser quits), then chromedriver
  Browser(const Browser&) = delete;
  Browser& operator=(const Browser&) = delete;

  bool started() const { return !session_.empty(); }
  const std::string& error() const { return error_; }

  bool navigate(const std::string& url);
  // Runs `body` as a function body in the page (W3C execute/sync); its return value, or nullopt
  // (error() says why).
  std::optional<boost::json::value> script(const std::string& body);
  // Polls `body` (a function body returning true when done) until it returns true; false after
  // `timeout`.
  bool wait_until(const std::string& body, std::chrono::milliseconds timeout);
  // The first element matching a CSS selector: its WebDriver id.
  std::optional<std::string> find(const std::string& css);
  bool click(const std::string& element);
  bool type(const std::string& element, const std::string& text);
  std::string text(const std::string& element);
  // A PNG of the viewport.
  std::optional<std::string> screenshot();

 private:
  std::optional<boost::json::value> call(const std::string& method, const std::string& path,
                                         const boost::json::object& body = {});

  testkit::Subprocess driver_;
  std::unique_ptr<HttpTestClient> http_;
  std::string session_;
  std::string error_;
};

// Writes `bytes` to `path`, making its directory; false on failure.
bool write_artefact(const std::filesystem::path& path, const std::string& bytes);

}  // namespace mh::test
