#include <gtest/gtest.h>
TEST(Placeholder_commands, Builds) { SUCCEED(); }
