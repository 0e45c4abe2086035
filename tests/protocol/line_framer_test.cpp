#include <gtest/gtest.h>
TEST(Placeholder_line_framer, Builds) { SUCCEED(); }
