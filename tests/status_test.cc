// Status codes: names and sentences come from one X-macro and cover every code.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "gmr/status.h"
#include "gmr/version.h"

namespace {

const gmr_status kAll[] = {
#define GMR_TEST_STATUS_(name, value, sentence) GMR_##name,
    GMR_STATUS_MAP(GMR_TEST_STATUS_)
#undef GMR_TEST_STATUS_
};

TEST(Status, RequiredCodesExistWithStableValues) {
  EXPECT_EQ(0, GMR_OK);
  EXPECT_EQ(1, GMR_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(2, GMR_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(3, GMR_ERR_LIMIT_EXCEEDED);
  EXPECT_EQ(4, GMR_ERR_UNSUPPORTED);
  EXPECT_EQ(5, GMR_ERR_BUSY);
  EXPECT_EQ(6, GMR_ERR_CUDA);
  EXPECT_EQ(7, GMR_ERR_CAPTURE_UNSAFE);
  EXPECT_EQ(8, GMR_ERR_INTERNAL);
  EXPECT_EQ(9, GMR_ERR_UNKNOWN_POINTER);
  EXPECT_EQ(10, GMR_ERR_DOUBLE_FREE);
  EXPECT_EQ(11, GMR_ERR_FREE_MISMATCH);
}

TEST(Status, NamesMatchEnumerators) {
  EXPECT_STREQ("GMR_OK", gmr_status_name(GMR_OK));
  EXPECT_STREQ("GMR_ERR_OUT_OF_MEMORY", gmr_status_name(GMR_ERR_OUT_OF_MEMORY));
  EXPECT_STREQ("GMR_ERR_CAPTURE_UNSAFE", gmr_status_name(GMR_ERR_CAPTURE_UNSAFE));
}

TEST(Status, EveryCodeHasDistinctNameAndSentence) {
  std::set<std::string> names, sentences;
  for (gmr_status s : kAll) {
    const char *name = gmr_status_name(s);
    const char *sentence = gmr_status_string(s);
    ASSERT_NE(nullptr, name);
    ASSERT_NE(nullptr, sentence);
    EXPECT_STRNE("UNKNOWN", name);
    // A sentence: starts with a capital letter and ends with a full stop.
    EXPECT_TRUE(sentence[0] >= 'A' && sentence[0] <= 'Z') << sentence;
    EXPECT_EQ('.', sentence[std::strlen(sentence) - 1]) << sentence;
    names.insert(name);
    sentences.insert(sentence);
  }
  EXPECT_EQ(sizeof kAll / sizeof kAll[0], names.size());
  EXPECT_EQ(sizeof kAll / sizeof kAll[0], sentences.size());
}

TEST(Status, UnknownValuesAreReportedAsUnknown) {
  EXPECT_STREQ("UNKNOWN", gmr_status_name(static_cast<gmr_status>(1000)));
  EXPECT_STREQ("Unknown gmr status.", gmr_status_string(static_cast<gmr_status>(-1)));
}

TEST(Version, LibraryMatchesHeaders) {
  EXPECT_EQ(GMR_VERSION, gmr_version());
  EXPECT_EQ(GMR_VERSION_MAJOR * 10000 + GMR_VERSION_MINOR * 100 + GMR_VERSION_PATCH, GMR_VERSION);
}

}  // namespace
