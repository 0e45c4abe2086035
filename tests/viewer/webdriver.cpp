#include "tests/viewer/webdriver.hpp"

#include <openssl/evp.h>

#include <fstream>
#include <regex>
#include <thread>

#include "testkit/line_reader.hpp"

namespace mh::test {

namespace json = boost::json;

namespace {

constexpr const char* kElementKey = "element-6066-11e4-a52e-4f735466cecf";  // W3C WebDriver §12

std::string base64_decode(const std::string& text) {
  std::string out(3 * (text.size() / 4) + 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return "";
  std::size_t padding = 0;
  for (auto it = text.rbegin(); it != text.rend() && *it == '='; ++it)
    ++padding;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

}  // namespace

Browser::Browser(const std::filesystem::path& profile_dir) {
  testkit::SpawnOptions options;
  options.program = MH_TEST_CHROMEDRIVER;
  options.args = {"--port=0"};  // it picks a free port and says which on stdout
  options.stderr_file = profile_dir.parent_path() / "chromedriver.log";
  if (auto problem = driver_.spawn(options); !problem.empty()) {
    error_ = "cannot start " + std::string(MH_TEST_CHROMEDRIVER) + ": " + problem;
    return;
  }
  testkit::LineReader lines(driver_.stdout_fd());
  const auto deadline = testkit::LineReader::Clock::now() + std::chrono::seconds(20);
  std::uint16_t port = 0;
  const std::regex started(R"(started successfully on port (\d+))");
  for (std::string line; port == 0;) {
    testkit::LineReader::Clock::time_point at;
    if (lines.next(line, at, deadline) != testkit::LineReader::Status::line) {
      error_ = "chromedriver said no port within 20 s";
      return;
    }
    std::smatch m;
    if (std::regex_search(line, m, started)) port = static_cast<std::uint16_t>(std::stoi(m[1]));
  }
  http_ = std::make_unique<HttpTestClient>("127.0.0.1", port, std::chrono::seconds(60));
  if (!http_->connected()) {
    error_ = "cannot reach chromedriver: " + http_->error();
    return;
  }
  json::array args{"--headless=new",
                   "--no-sandbox",  // the tests may run as root, where Chromium's sandbox will not start
                   "--disable-gpu",
                   "--disable-dev-shm-usage",
                   "--no-first-run",
                   "--no-default-browser-check",
                   "--window-size=1280,1100",
                   "--user-data-dir=" + profile_dir.string()};
  json::object chrome{{"binary", MH_TEST_CHROMIUM}, {"args", std::move(args)}};
  json::object always{{"browserName", "chrome"}, {"goog:chromeOptions", std::move(chrome)}};
  json::object caps{{"alwaysMatch", std::move(always)}};
  auto value = call("POST", "/session", json::object{{"capabilities", std::move(caps)}});
  if (!value || !value->is_object() || !value->as_object().contains("sessionId")) {
    error_ = "no browser session: " + error_;
    return;
  }
  session_ = std::string(value->as_object().at("sessionId").as_string());
}

Browser::~Browser() {
  if (!session_.empty()) call("DELETE", "/session/" + session_);
  http_.reset();
  if (driver_.running()) driver_.terminate(std::chrono::seconds(5));
}

std::optional<json::value> Browser::call(const std::string& method, const std::string& path, const json::object& body) {
  if (!http_) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> headers{{"Content-Type", "application/json"}};
  auto answer = http_->request(method, path, headers, method == "POST" ? protocol::canonical_json(body) : "");
  if (!answer) {
    error_ = method + " " + path + ": " + http_->error();
    return std::nullopt;
  }
  auto parsed = protocol::parse_json(answer->body);
  if (!parsed || !parsed->is_object() || !parsed->as_object().contains("value")) {
    error_ = method + " " + path + ": HTTP " + std::to_string(answer->status) + " " + answer->body.substr(0, 300);
    return std::nullopt;
  }
  json::value value = parsed->as_object().at("value");
  if (answer->status != 200) {
    error_ = method + " " + path + ": HTTP " + std::to_string(answer->status) + " " +
             protocol::canonical_json(value).substr(0, 500);
    return std::nullopt;
  }
  return value;
}

bool Browser::navigate(const std::string& url) {
  return call("POST", "/session/" + session_ + "/url", json::object{{"url", url}}).has_value();
}

std::optional<json::value> Browser::script(const std::string& body) {
  return call("POST", "/session/" + session_ + "/execute/sync",
              json::object{{"script", body}, {"args", json::array{}}});
}

bool Browser::wait_until(const std::string& body, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto value = script(body);
    if (value && value->is_bool() && value->as_bool()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // The page changes on its own (its fetches); this paces the polling, it orders nothing.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::optional<std::string> Browser::find(const std::string& css) {
  auto value =
      call("POST", "/session/" + session_ + "/element", json::object{{"using", "css selector"}, {"value", css}});
  if (!value) return std::nullopt;
  if (!value->is_object() || !value->as_object().contains(kElementKey)) {
    error_ = "no element for " + css + ": " + protocol::canonical_json(*value).substr(0, 300);
    return std::nullopt;
  }
  return std::string(value->as_object().at(kElementKey).as_string());
}

bool Browser::click(const std::string& element) {
  return call("POST", "/session/" + session_ + "/element/" + element + "/click").has_value();
}

bool Browser::type(const std::string& element, const std::string& text) {
  return call("POST", "/session/" + session_ + "/element/" + element + "/value", json::object{{"text", text}})
      .has_value();
}

std::string Browser::text(const std::string& element) {
  auto value = call("GET", "/session/" + session_ + "/element/" + element + "/text");
  return value && value->is_string() ? std::string(value->as_string()) : "";
}

std::optional<std::string> Browser::screenshot() {
  auto value = call("GET", "/session/" + session_ + "/screenshot");
  if (!value || !value->is_string()) return std::nullopt;
  return base64_decode(std::string(value->as_string()));
}

bool write_artefact(const std::filesystem::path& path, const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out.flush());
}

}  // namespace mh::test
