#include "tests/metrics/metrics_support.hpp"

namespace mh::test {

std::string metrics_daemon_config(const std::string& more) {
  // The stand-in reads its script inside the run's sandbox: the scripts are shown to it. It speaks
  // to no model: its runs keep the host's network (no gateway), so the usage it reports is what
  // the metrics count (a run behind a gateway counts the gateway's figures: docs/gateway.md).
  return std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN +
         "\"\n[runs]\nnetwork = \"host\"\nsandbox_read_only = [\"" + MH_TEST_STANDIN_SCRIPTS +
         "\"]\n[http]\nlisten = \"127.0.0.1:0\"\n" + more;
}

std::string standin_run_fields(const std::string& script, const std::string& extra) {
  return R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
         R"("vendor_env":{"MH_STANDIN_SCRIPT":")" +
         (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / script).string() + "\"}" +
         (extra.empty() ? "" : "," + extra) + "}";
}

std::string http_address(const DaemonUnderTest& daemon) {
  auto path = daemon.state_dir() / "http.addr";
  if (!std::filesystem::exists(path)) return "";
  std::string text = read_file(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

std::map<std::string, std::string> scrape(const std::string& address, std::string* failure) {
  auto answer = http_get(address, "/metrics");
  if (!answer || answer->status != 200) {
    if (failure) *failure = answer ? "status " + std::to_string(answer->status) + ": " + answer->body : "no answer";
    return {};
  }
  return parse_samples(answer->body);
}

}  // namespace mh::test
