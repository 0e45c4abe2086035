#include <gtest/gtest.h>
TEST(Placeholder_events, Builds) { SUCCEED(); }
