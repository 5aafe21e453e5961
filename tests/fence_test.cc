// util/fence.h: the asymmetric Dekker handshake the limiting adaptor's switch
// from counting to enforcing relies on (tests/fence_probe.c runs it from C).
// Round after round, a hot side (store, light fence, load) and a cold side
// (store, heavy fence, load) race; in no round may both miss the other's
// store. Without a fence x86 lets a load pass an earlier store, and such
// rounds appear.
#include <gtest/gtest.h>

#include "tests/fence_probe.h"

namespace {

TEST(Fence, SymmetricFencesNeverLetBothSidesMissEachOther) {
  EXPECT_EQ(0, fence_probe_both_missed(false, 100000));
}

TEST(Fence, AsymmetricFencesNeverLetBothSidesMissEachOther) {
  if (!fence_probe_asymmetric()) GTEST_SKIP() << "membarrier is not available on this kernel";
  EXPECT_TRUE(fence_probe_asymmetric());  // asked once, the answer stays
  EXPECT_EQ(0, fence_probe_both_missed(true, 20000));
}

}  // namespace
