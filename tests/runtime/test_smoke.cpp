#include <gtest/gtest.h>

#include "npugraph/npugraph.hpp"

TEST(Smoke, Builds) { SUCCEED(); }
