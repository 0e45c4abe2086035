#include <gtest/gtest.h>
TEST(Placeholder_capabilities, Builds) { SUCCEED(); }
