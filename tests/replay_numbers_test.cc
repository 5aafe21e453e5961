// tests/replay_numbers_test.cc: the strict number parsers every tool uses for
// its command line (tools/replay/numbers.h). What strtod would take as a
// number but a person did not mean (NaN, infinity, -0, hex floats,
// exponents, a fraction of a byte) is refused with a reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tools/replay/numbers.h"

namespace {

TEST(ReplayNumbersTest, ByteSizesWithBinaryUnits) {
  const struct {
    const char *text;
    size_t bytes;
  } good[] = {
      {"0", 0},
      {"4096", 4096},
      {"4096B", 4096},
      {"1K", 1024},
      {"1KiB", 1024},
      {"1kB", 1024},
      {"600MiB", (size_t)600 << 20},
      {"1.5G", (size_t)3 << 29},
      {"1.5GiB", (size_t)3 << 29},
      {"0.25K", 256},
      {"2T", (size_t)2 << 40},
  };
  for (const auto &g : good) {
    size_t out = 7;
    char why[96] = "";
    EXPECT_TRUE(replay_parse_bytes(g.text, &out, why, sizeof why)) << g.text << ": " << why;
    EXPECT_EQ(g.bytes, out) << g.text;
  }
}

TEST(ReplayNumbersTest, ByteSizesThatAreNotWholeBytesOrNotNumbersAreRefused) {
  const struct {
    const char *text;
    const char *why;
  } bad[] = {
      {"nan", "not a number of bytes"},     {"inf", "not a number of bytes"},
      {"-0", "not a number of bytes"},      {"-1", "not a number of bytes"},
      {"+5", "not a number of bytes"},      {"1e3", "not a number of bytes"},
      {"0x10", "not a number of bytes"},    {"", "not a number of bytes"},
      {"12x", "not a number of bytes"},     {" 5", "not a number of bytes"},
      {"5 ", "not a number of bytes"},      {".", "not a number of bytes"},
      {"5.", "not a number of bytes"},      {"1MiBB", "not a number of bytes"},
      {"0.5", "not a whole number of bytes"}, {"0.3K", "not a whole number of bytes"},
      {"20000000000T", "too large"},        {"99999999999999999999", "not a number of bytes"},
  };
  for (const auto &b : bad) {
    size_t out = 7;
    char why[96] = "";
    EXPECT_FALSE(replay_parse_bytes(b.text, &out, why, sizeof why)) << b.text;
    EXPECT_EQ(7u, out) << b.text << ": unchanged on failure";
    EXPECT_NE(std::string::npos, std::string(why).find(b.why)) << b.text << ": " << why;
  }
  size_t out = 0;
  EXPECT_FALSE(replay_parse_bytes(nullptr, &out, nullptr, 0));
}

TEST(ReplayNumbersTest, CountsInARange) {
  uint64_t out = 0;
  char why[96] = "";
  EXPECT_TRUE(replay_parse_count("3", 1, 1000, &out, why, sizeof why));
  EXPECT_EQ(3u, out);
  EXPECT_TRUE(replay_parse_count("1000", 1, 1000, &out, why, sizeof why));
  EXPECT_EQ(1000u, out);
  out = 42;
  EXPECT_FALSE(replay_parse_count("0", 1, 1000, &out, why, sizeof why));
  EXPECT_STREQ("below the smallest allowed, 1", why);
  EXPECT_FALSE(replay_parse_count("1001", 1, 1000, &out, why, sizeof why));
  EXPECT_STREQ("above the largest allowed, 1000", why);
  EXPECT_FALSE(replay_parse_count("18446744073709551616", 1, 1000, &out, why, sizeof why));
  EXPECT_FALSE(replay_parse_count("2.5", 1, 1000, &out, why, sizeof why));
  EXPECT_STREQ("not a whole number", why);
  for (const char *text : {"-1", "nan", "", "3x", "0x3", "1e2"}) {
    EXPECT_FALSE(replay_parse_count(text, 0, 1000, &out, why, sizeof why)) << text;
  }
  EXPECT_EQ(42u, out);
}

TEST(ReplayNumbersTest, DecimalsAreFiniteAndInRange) {
  double out = 0;
  char why[96] = "";
  EXPECT_TRUE(replay_parse_decimal("20", 0, 1e9, &out, why, sizeof why));
  EXPECT_EQ(20.0, out);
  EXPECT_TRUE(replay_parse_decimal("0.5", 0, 1e9, &out, why, sizeof why));
  EXPECT_EQ(0.5, out);
  EXPECT_TRUE(replay_parse_decimal("-2.5", -10, 10, &out, why, sizeof why));
  EXPECT_EQ(-2.5, out);
  out = 1;
  for (const char *text : {"nan", "NaN", "inf", "-inf", "1e400", "0x1p3", "", "-", "2.", " 1"}) {
    EXPECT_FALSE(replay_parse_decimal(text, -1e9, 1e9, &out, why, sizeof why)) << text;
    EXPECT_STREQ("not a decimal number", why) << text;
  }
  EXPECT_FALSE(replay_parse_decimal("-0", 0, 1e9, &out, why, sizeof why));
  EXPECT_STREQ("negative (also -0), and the value must be >= 0", why);
  EXPECT_FALSE(replay_parse_decimal("2000000000", 0, 1e9, &out, why, sizeof why));
  EXPECT_STREQ("above the largest allowed, 1e+09", why);
  EXPECT_EQ(1.0, out);
}

}  // namespace
