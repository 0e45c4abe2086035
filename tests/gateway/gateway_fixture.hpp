// One run's world for the gateway's in-process tests (gateway_test.cpp, gateway_attack_test.cpp):
// a test CA, the scripted endpoint over HTTPS playing a scenario, a credential file holding the
// endpoint's token (the upstream's "real key"), and a gateway in front with the run's placeholder.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/gateway/gateway.hpp"
#include "tests/gateway/gateway_support.hpp"
#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"
#include "tests/support/test_ca.hpp"

namespace mh::gateway::testing {

// Written beside and renamed over, as a rotation does: a new inode the gateway must notice.
inline void write_file(const std::filesystem::path& path, std::string_view text) {
  const auto temporary = path.string() + ".new";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::filesystem::rename(temporary, path);
}

class GatewayOverTls : public ::testing::Test {
 protected:
  // `scenario`: what start_endpoint() plays when given none.
  GatewayOverTls(const std::string& name, std::string_view scenario)
      : dir_(name), ca_(dir_ / "ca"), default_scenario_(scenario) {}

  void start_endpoint(std::string_view scenario = {}, bool tls = true) {
    ASSERT_TRUE(ca_.ok()) << ca_.error();
    model::EndpointOptions options;
    if (tls) {
      options.tls_cert = ca_.cert_file();
      options.tls_key = ca_.key_file();
    }
    endpoint_ =
        std::make_unique<model::testing::RunningEndpoint>(scenario.empty() ? default_scenario_ : scenario, options);
    write_file(key_file(), endpoint_->token() + "\n");
  }
  RunningGateway::Setup setup(Wire wire = Wire::anthropic) {
    RunningGateway::Setup s;
    s.options.upstream.name = "test";
    s.options.upstream.wire = wire;
    s.options.upstream.url = endpoint_->base_url();
    s.options.upstream.credential = key_file();
    s.options.upstream.ca_file = ca_.ca_file();
    s.options.token = token_;
    return s;
  }
  void start_gateway(RunningGateway::Setup s) {
    gateway_ = std::make_unique<RunningGateway>(std::move(s));
    ASSERT_TRUE(gateway_->ok()) << gateway_->prepare_error();
  }
  std::filesystem::path key_file() const { return dir_ / "upstream.key"; }

  model::testing::TempDir dir_;
  mh::testing::TestCa ca_;
  const std::string token_ = placeholder_token("r1");
  std::unique_ptr<model::testing::RunningEndpoint> endpoint_;
  std::unique_ptr<RunningGateway> gateway_;

 private:
  std::string default_scenario_;
};

}  // namespace mh::gateway::testing
