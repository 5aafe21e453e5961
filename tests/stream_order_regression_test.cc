// The exact sequences the stream-ordering oracle found
// (tests/stream_order_property_test.cc), each a deterministic regression
// test: memory a stream took by waiting on another stream's work must not
// reach a third stream through a record the taker made before that wait.
//
// Streams A, B, C. A frees X while its work still runs (held). B allocates:
// the resource makes B wait on A's event and gives B memory of X. C
// allocates: if it gets bytes of X it must be ordered after A's work
// (rmm#2489 is this defect in RMM; vmm and vmm_pages' small path had it).
#include <gtest/gtest.h>

#include <string>

#include "gmr/device.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

struct Sizes {
  const char *spec;
  size_t x_bytes; // freed on A while A runs
  size_t y_bytes; // B's request: a part of X
  size_t z_bytes; // C's request: fits in the rest of X
  int x_count;    // X is this many allocations of x_bytes
  size_t b_fill_bytes; // B keeps this much live first (fills the small path's first chunk)
};

bool Overlaps(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// Whether [p, p + bytes) shares physical memory with [q, q + q_bytes) (a VMM
// pool may map X's pages at new addresses).
bool SharesMemory(const void *p, size_t bytes, const void *q, size_t q_bytes) {
  if (Overlaps(p, bytes, q, q_bytes)) return true;
  for (size_t i = 0; i < bytes; i += 4096) {
    gmr_cuda_sim_vmm_mapping m{}, n{};
    if (gmr_cuda_sim_vmm_query(static_cast<const char *>(p) + i, &m) != GMR_OK || !m.mapped) {
      continue;
    }
    for (size_t j = 0; j < q_bytes; j += 4096) {
      if (gmr_cuda_sim_vmm_query(static_cast<const char *>(q) + j, &n) != GMR_OK || !n.mapped) {
        continue;
      }
      uintptr_t po = reinterpret_cast<uintptr_t>(p) + i - reinterpret_cast<uintptr_t>(m.base);
      uintptr_t qo = reinterpret_cast<uintptr_t>(q) + j - reinterpret_cast<uintptr_t>(n.base);
      if (m.physical_id == n.physical_id && po / 4096 == qo / 4096) return true;
    }
  }
  return false;
}

class ThreeStreams : public gmr_test::SimTest, public ::testing::WithParamInterface<Sizes> {};

TEST_P(ThreeStreams, ThirdStreamNeverTakesMemoryTheTakerGotByWaiting) {
  const Sizes &s = GetParam();
  gmr_stack *stack = nullptr;
  gmr_spec_error err = {};
  ASSERT_EQ(GMR_OK, gmr_stack_create(s.spec, &stack, &err)) << err.message;
  gmr_resource *r = gmr_stack_as_resource(stack);
  gmr_stream a = nullptr, b = nullptr, c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&c));

  // B freed something before: it has a record, complete long ago.
  void *old = nullptr, *fill = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 256, 0, b, &old));
  if (s.b_fill_bytes > 0) {
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, s.b_fill_bytes, 0, b, &fill));
  }
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, old, 256, 0, b));

  // A frees X while its work still runs.
  void *x[4] = {};
  for (int i = 0; i < s.x_count; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, s.x_bytes, 0, a, &x[i]));
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a, true));
  gmr_cuda_sim_mark a_use = 0;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(a, &a_use));
  for (int i = 0; i < s.x_count; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x[i], s.x_bytes, 0, a));
  }
  auto in_x = [&](const void *p, size_t bytes) {
    for (int i = 0; i < s.x_count; ++i) {
      if (SharesMemory(p, bytes, x[i], s.x_bytes)) return true;
    }
    return false;
  };

  // B gets part of X by waiting on A (the sequence under test).
  uint64_t b_waits = gmr_cuda_sim_get_stream_wait_count(b);
  void *y = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, s.y_bytes, 0, b, &y));
  ASSERT_TRUE(in_x(y, s.y_bytes))
      << "the sequence no longer reaches the step under test: B did not get memory of X";
  ASSERT_GT(gmr_cuda_sim_get_stream_wait_count(b), b_waits) << "B got X without waiting on A";
  bool ordered = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_ordered_before(a_use, b, &ordered));
  EXPECT_TRUE(ordered);

  // C: the rest of X only after A's work.
  void *z = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, s.z_bytes, 0, c, &z));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_ordered_before(a_use, c, &ordered));
  EXPECT_TRUE(!in_x(z, s.z_bytes) || ordered)
      << s.spec << ": C got bytes of X while A's work on them may still run, with no order";

  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a, false));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, y, s.y_bytes, 0, b));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, z, s.z_bytes, 0, c));
  if (fill != nullptr) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, fill, s.b_fill_bytes, 0, b));
  }
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(a_use));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(c));
}

const size_t kMiB = static_cast<size_t>(1) << 20;
const size_t kKiB = static_cast<size_t>(1) << 10;

INSTANTIATE_TEST_SUITE_P(
    Resources, ThreeStreams,
    ::testing::Values(
        // vmm: regions moved to B after its wait (vmm_fine_alloc.c, wait_for_other).
        Sizes{"vmm", 8 * kMiB, 2 * kMiB, 4 * kMiB, 1, 0},
        // vmm_pages' small path: the same engine over page chunks.
        Sizes{"vmm_pages", 1 * kMiB, 256 * kKiB, 512 * kKiB, 1, 0},
        // vmm_pages' small path: a chunk the page pool made of X's pages by
        // waiting on A (vmm_fine_chunks.c): its rest reaches C. B's first
        // chunk (2 MiB) is full, so B's request needs a new one.
        Sizes{"vmm_pages", 4 * kMiB, 64 * kKiB, 512 * kKiB, 1, 2 * kMiB - 512},
        // The pool and fixed_block did this step right: the reference.
        Sizes{"pool > cuda", 8 * kMiB, 2 * kMiB, 4 * kMiB, 1, 0},
        Sizes{"fixed_block(block=64KiB) > cuda", 64 * kKiB, 64 * kKiB, 64 * kKiB, 2, 0}),
    [](const ::testing::TestParamInfo<Sizes> &info) { return std::to_string(info.index); });

}  // namespace

namespace {

// A stream destroyed while its work runs, whose handle a new stream gets: the
// memory it freed with record_stream uses (held back, then filed as its
// frees once those uses are done) must not go to the new stream in stream
// order when the resource asks stream ids (stream_ids=true promises it).
class DestroyedStreamHandle : public gmr_test::SimTest,
                              public ::testing::WithParamInterface<const char *> {};

TEST_P(DestroyedStreamHandle, RecordStreamBlockOfTheOldStreamWaitsForItsWork) {
  gmr_stack *stack = nullptr;
  gmr_spec_error err = {};
  ASSERT_EQ(GMR_OK, gmr_stack_create(GetParam(), &stack, &err)) << err.message;
  gmr_resource *r = gmr_stack_as_resource(stack);
  gmr_stream old_stream = nullptr, user = nullptr, fresh = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&old_stream));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&user));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, old_stream, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, user));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(old_stream, true));
  gmr_cuda_sim_mark old_use = 0;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(old_stream, &old_use));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, old_stream));
  // The old stream dies with its work pending; the new one gets its handle.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(old_stream));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(true));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(old_stream));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&fresh));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(false));
  ASSERT_EQ(fresh, old_stream) << "the simulation did not reuse the handle";
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, fresh, &q));
  bool ordered = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_ordered_before(old_use, fresh, &ordered));
  EXPECT_TRUE(q != p || ordered)
      << GetParam() << ": the new stream got the old stream's block while its work may run";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 4096, 0, fresh));
  EXPECT_EQ(GMR_OK, gmr_device_synchronize());
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(old_use));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(fresh));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(user));
}

INSTANTIATE_TEST_SUITE_P(StreamIds, DestroyedStreamHandle,
                         ::testing::Values("fixed_block(block=64KiB, blocks_per_chunk=1, shards=1, stream_ids=true) > cuda",
                                           "pool(arenas=1, stream_ids=true) > cuda"));

}  // namespace
