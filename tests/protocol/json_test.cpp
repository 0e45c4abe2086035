#include <gtest/gtest.h>
TEST(Placeholder_json, Builds) { SUCCEED(); }
