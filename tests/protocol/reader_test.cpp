#include <gtest/gtest.h>
TEST(Placeholder_reader, Builds) { SUCCEED(); }
