// What arrives while an adopted run is rebuilt waits, in order, until the run is live
// (daemon/run/input_hold.hpp).
#include "daemon/run/input_hold.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mh::daemon {
namespace {

TEST(InputHold, WhatArrivesWhileHeldRunsInOrderOnReleaseAndNothingWaitsAfter) {
  InputHold hold;
  std::string ran;
  hold.hold();
  hold.run_or_hold([&] { ran += "a"; });
  hold.run_or_hold([&] { ran += "b"; });
  EXPECT_EQ(ran, "");
  hold.release();
  EXPECT_EQ(ran, "ab");
  hold.run_or_hold([&] { ran += "c"; });
  EXPECT_EQ(ran, "abc");
  hold.release();  // once more: nothing runs twice
  EXPECT_EQ(ran, "abc");
}

TEST(InputHold, ALaunchedRunNeverHolds) {
  InputHold hold;
  int ran = 0;
  hold.run_or_hold([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  hold.release();
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace mh::daemon
