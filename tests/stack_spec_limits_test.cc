// Spec values checked against what the layers accept, before any layer is
// created: the depth of a spec, sizes that are not whole bytes, timeouts that
// overflow, device ordinals past the device count, option values outside a
// layer's range and options that contradict each other. Every refusal names
// what was asked, the limit and the option.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gmr/sim/cuda_sim.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/host_resource.h"
#include "gmr/pool_resource.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

class SpecLimits : public gmr_test::SimTest {
 protected:
  gmr_stack *Build(const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec.c_str(), &s, &e)) << spec << ": " << e.message;
    return s;
  }
  void BuildAndDestroy(const std::string &spec) {
    gmr_stack *s = Build(spec);
    EXPECT_NE(nullptr, s);
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  }
  // The message of a spec that must fail with `status`; gmr_stack_check must
  // refuse it the same way when `check_too`.
  std::string Error(const std::string &spec, gmr_status status = GMR_ERR_INVALID_ARGUMENT,
                    bool check_too = true) {
    gmr_stack *s = reinterpret_cast<gmr_stack *>(0x1);
    gmr_spec_error e;
    EXPECT_EQ(status, gmr_stack_create(spec.c_str(), &s, &e)) << spec;
    EXPECT_EQ(nullptr, s);
    if (check_too) {
      gmr_spec_error c;
      EXPECT_EQ(status, gmr_stack_check(spec.c_str(), &c)) << spec;
      EXPECT_STREQ(e.message, c.message) << spec;
    }
    return e.message;
  }
};

// What gmr_stack_print_components() prints ("" if it fails).
std::string Listing() {
  FILE *f = tmpfile();
  if (f == nullptr) return "";
  std::string text;
  if (gmr_stack_print_components(f) == GMR_OK) {
    rewind(f);
    char buf[256];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  }
  fclose(f);
  return text;
}

std::string Layers(size_t adaptors) {
  std::string spec;
  for (size_t i = 0; i < adaptors; ++i) spec += "tracking > ";
  return spec + "host";
}

TEST_F(SpecLimits, ASpecHasAtMost64Layers) {
  EXPECT_EQ(64, GMR_STACK_MAX_DEPTH);
  gmr_stack *s = Build(Layers(GMR_STACK_MAX_DEPTH - 1));
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(size_t{GMR_STACK_MAX_DEPTH}, gmr_stack_get_depth(s));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 64, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  // Layer 65 starts at byte 64 * 11 ("tracking > " is 11 bytes).
  EXPECT_EQ("spec:1:705: too many layers: a spec may have at most 64 (GMR_STACK_MAX_DEPTH); "
            "this is layer 65",
            Error(Layers(GMR_STACK_MAX_DEPTH)));
  // The 20,000 layers: refused at layer 65, nothing is created.
  EXPECT_EQ(0u, Error(Layers(20000)).find("spec:1:705: too many layers"));
}

TEST_F(SpecLimits, WaitTimeoutsThatOverflowNanosecondsAreRefused) {
  // 18446744073709 ms is the most that fits in 64 bits of nanoseconds.
  BuildAndDestroy("oom(policy=wait, wait_timeout_ms=18446744073709) > host");
  BuildAndDestroy("limiting(on_oom=wait, wait_timeout_ms=18446744073709) > host");
  EXPECT_EQ("spec:1:34: invalid value '18446744073710' for oom option 'wait_timeout_ms': at most "
            "18446744073709",
            Error("oom(policy=wait, wait_timeout_ms=18446744073710) > host"));
  EXPECT_EQ("spec:1:39: invalid value '9223372036854775807' for limiting option "
            "'wait_timeout_ms': at most 18446744073709",
            Error("limiting(on_oom=wait, wait_timeout_ms=9223372036854775807) > host"));
}

TEST_F(SpecLimits, SizesAreWholeBytes) {
  EXPECT_EQ("spec:1:16: invalid value '0.5' for limiting option 'limit': '0.5' is less than one "
            "byte",
            Error("limiting(limit=0.5) > host"));
  EXPECT_EQ("spec:1:16: invalid value '1.5' for limiting option 'limit': '1.5' is not a whole "
            "number of bytes",
            Error("limiting(limit=1.5) > host"));
  EXPECT_EQ("spec:1:16: invalid value '1.1KiB' for limiting option 'limit': '1.1KiB' is not a "
            "whole number of bytes",
            Error("limiting(limit=1.1KiB) > host"));
  EXPECT_EQ("spec:1:16: invalid value '0.000000001%' for limiting option 'limit': "
            "'0.000000001%' is less than one byte",
            Error("limiting(limit=0.000000001%) > host", GMR_ERR_INVALID_ARGUMENT,
                  /*check_too=*/false));
  // Fractions that are whole bytes stay exact, however many digits.
  for (const char *ok : {"0", "0.0", "0.5KiB", "1.5GiB", "1.1KB", "0.001KB", "2.25MiB",
                         "0.0009765625KiB", "16777216.000000000000000000B"}) {
    gmr_spec_error e;
    EXPECT_EQ(GMR_OK, gmr_stack_check((std::string("limiting(limit=") + ok + ") > host").c_str(),
                                      &e))
        << ok << ": " << e.message;
  }
  gmr_stack *s = Build("limiting(limit=0.0009765625KiB, stream_limit=2.25MiB, per_stream=true) > "
                       "host");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(SpecLimits, ADeviceOrdinalPastTheDeviceCountNamesTheCount) {
  EXPECT_EQ("spec:1:13: invalid value '99' for cuda option 'device': there is 1 CUDA device "
            "(ordinals 0 to 0)",
            Error("cuda(device=99)", GMR_ERR_INVALID_ARGUMENT, /*check_too=*/false));
  EXPECT_EQ("spec:1:13: invalid value '99999999999' for cuda option 'device': '99999999999' is "
            "too large for a device ordinal",
            Error("cuda(device=99999999999)"));
  // The check makes no CUDA call, so it cannot know the device count.
  gmr_spec_error e;
  EXPECT_EQ(GMR_OK, gmr_stack_check("cuda(device=99)", &e)) << e.message;
}

class SpecLimitsTwoDevices : public SpecLimits {
 protected:
  SpecLimitsTwoDevices() { sim_config_.device_count = 2; }
};

TEST_F(SpecLimitsTwoDevices, TheCountIsTheMachines) {
  BuildAndDestroy("cuda(device=1)");
  EXPECT_EQ("spec:1:13: invalid value '2' for cuda option 'device': there are 2 CUDA devices "
            "(ordinals 0 to 1)",
            Error("cuda(device=2)", GMR_ERR_INVALID_ARGUMENT, /*check_too=*/false));
}

TEST_F(SpecLimits, ValuesOutsideALayersRangeAreRefusedWithTheRange) {
  EXPECT_EQ("spec:1:13: invalid value '65' for pool option 'arenas': at most 64",
            Error("pool(arenas=65) > host"));
  EXPECT_EQ("spec:1:19: invalid value '33' for pool option 'recent_frees': at most 32",
            Error("pool(recent_frees=33) > host"));
  EXPECT_EQ("spec:1:23: invalid value '8198552921648689606' for tracking option 'recent_frees': "
            "at most 4294967296",
            Error("tracking(recent_frees=8198552921648689606) > host"));
  EXPECT_EQ("spec:1:21: invalid value '1001' for pool option 'growth_percent': at most 1000",
            Error("pool(growth_percent=1001) > host"));
  EXPECT_EQ("spec:1:21: invalid value '4294967297' for pool option 'growth_percent': at most "
            "1000",
            Error("pool(growth_percent=4294967297) > host"));
  EXPECT_EQ("spec:1:18: invalid value '1000' for pool option 'granularity': not a power of two "
            "(512 bytes and 1KiB are)",
            Error("pool(granularity=1000) > host"));
  EXPECT_EQ("spec:1:18: invalid value '128' for pool option 'granularity': at least 256 bytes",
            Error("pool(granularity=128) > host"));
  EXPECT_EQ("spec:1:18: invalid value '2TiB' for pool option 'granularity': at most 1TiB",
            Error("pool(granularity=2TiB) > host"));
  EXPECT_EQ("spec:1:17: invalid value '0' for pool option 'min_growth': at least 1 byte",
            Error("pool(min_growth=0) > host"));
  EXPECT_EQ("spec:1:19: invalid value '1000' for fixed_block option 'block': not a multiple of "
            "256 bytes (768 bytes and 1KiB are)",
            Error("fixed_block(block=1000) > host"));
  EXPECT_EQ("spec:1:19: invalid value '0' for fixed_block option 'block': at least 256 bytes",
            Error("fixed_block(block=0) > host"));
  EXPECT_EQ("spec:1:30: invalid value '0' for fixed_block option 'blocks_per_chunk': at least 1",
            Error("fixed_block(blocks_per_chunk=0) > host"));
  EXPECT_EQ("spec:1:23: invalid value '384' for graph_arena option 'alignment': not a power of "
            "two (256 bytes and 512 bytes are)",
            Error("graph_arena(alignment=384) > host"));
  EXPECT_EQ("spec:1:28: invalid value '65' for oom option 'attempts': at most 64",
            Error("oom(policy=retry, attempts=65) > host"));
  EXPECT_EQ("spec:1:23: invalid value '100' for limiting option 'oom_attempts': at most 64",
            Error("limiting(oom_attempts=100) > host"));
  EXPECT_EQ("spec:1:27: invalid value '100' for limiting option 'charge_alignment': not a power "
            "of two (64 bytes and 128 bytes are)",
            Error("limiting(charge_alignment=100) > host"));
  EXPECT_EQ("spec:1:37: invalid value '0.5' for limiting option 'padding': at least 1",
            Error("limiting(on_limit=increase, padding=0.5) > host"));
  EXPECT_EQ("spec:1:37: invalid value '1e6' for limiting option 'padding': below 1000000",
            Error("limiting(on_limit=increase, padding=1e6) > host"));
}

TEST_F(SpecLimits, TheEdgesOfTheRangesAreAccepted) {
  // What the spec accepts, the layers accept: the limits are the layers'.
  BuildAndDestroy("pool(arenas=64, recent_frees=32, growth_percent=1000, granularity=1TiB, "
                  "min_growth=1, max_growth=1TiB) > host");
  BuildAndDestroy("fixed_block(block=256, blocks_per_chunk=1) > host");
  BuildAndDestroy("graph_arena(alignment=256) > host");
  BuildAndDestroy("oom(policy=retry, attempts=64) > host");
  BuildAndDestroy("limiting(on_limit=increase, padding=1, oom_attempts=64, charge_alignment=1) > "
                  "host");
  BuildAndDestroy("limiting(on_limit=increase, padding=999999.9) > host");
}

TEST_F(SpecLimits, TheLayersRefuseWhatIsPastTheEdges) {
  // The same limits through the C API, so that the spec's cannot drift apart.
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_resource *h = gmr_host_resource_as_resource(host);
  gmr_pool_resource *pool = nullptr;
  gmr_pool_resource_config pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  pc.arena_count = 65;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(h, &pc, &pool));
  pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  pc.recent_free_count = 33;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(h, &pc, &pool));
  pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  pc.growth_percent = 1001;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(h, &pc, &pool));
  pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  pc.chunk_granularity_bytes = size_t{2} << 40;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(h, &pc, &pool));
  gmr_fixed_block_resource *fb = nullptr;
  gmr_fixed_block_resource_config fc = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  fc.block_bytes = 128;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_create(h, &fc, &fb));
  gmr_graph_arena_resource *arena = nullptr;
  gmr_graph_arena_resource_config ac = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  ac.alignment = 128;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(h, &ac, &arena));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(h));
}

TEST_F(SpecLimits, OptionsThatContradictEachOtherAreNamedTogether) {
  EXPECT_EQ("spec:1:6: pool option 'min_growth' (256MiB) is above option 'max_growth' (128MiB, "
            "the default): lower min_growth or raise max_growth",
            Error("pool(min_growth=256MiB) > host"));
  EXPECT_EQ("spec:1:6: pool option 'initial' (2GiB) is above option 'max' (1GiB): lower initial "
            "or raise max",
            Error("pool(initial=2GiB, max=1GiB) > host"));
  // Found by fuzz/spec_fuzz.c: the pool takes whole 256-byte units, so an
  // initial of 2 bytes is 256 against a max of 252.
  EXPECT_EQ("spec:1:7: pool option 'initial' (2 bytes, 256 bytes once rounded up to the pool's "
            "256-byte unit) is above option 'max' (252 bytes): lower initial or raise max",
            Error("\tpool(initial=2., max=252) > cuda"));
  EXPECT_EQ("spec:1:13: fixed_block option 'initial_chunks' (5) is above option 'max_chunks' "
            "(2): lower initial_chunks or raise max_chunks",
            Error("fixed_block(initial_chunks=5, max_chunks=2) > host"));
  EXPECT_EQ("spec:1:13: fixed_block option 'block' (1048576TiB) times option 'blocks_per_chunk' "
            "(128, the default) is past the largest allocation (4611686018427387903 bytes): lower "
            "either",
            Error("fixed_block(block=1048576TiB) > host"));
  // The arena rounds initial up to its alignment before comparing with max.
  EXPECT_EQ("spec:1:13: graph_arena option 'initial' (1000 bytes, 1KiB once aligned to option "
            "'alignment') is above option 'max' (1000 bytes): lower initial or raise max",
            Error("graph_arena(initial=1000, max=1000, alignment=1KiB) > host"));
  EXPECT_EQ("spec:1:13: graph_arena option 'initial' (2KiB) is above option 'max' (1KiB): lower "
            "initial or raise max",
            Error("graph_arena(initial=2KiB, max=1KiB) > host"));
}

TEST_F(SpecLimits, AnInitialReservationThatDoesNotFitNamesTheBytesAndWhatIsFree) {
  // The simulated device has 80 GiB; the cuda layer is created, then undone.
  EXPECT_EQ("spec:1:1: cannot create pool: GMR_ERR_OUT_OF_MEMORY: taking the 107374182400 bytes "
            "of option 'initial' (100GiB) from the layer below failed; the device has "
            "85899345920 bytes free of 85899345920: lower initial, or 0 to take nothing at "
            "create",
            Error("pool(initial=100GiB) > cuda(kind=async)", GMR_ERR_OUT_OF_MEMORY,
                  /*check_too=*/false));
  EXPECT_EQ("spec:1:1: cannot create graph_arena: GMR_ERR_OUT_OF_MEMORY: taking the "
            "107374182400 bytes of option 'initial' (100GiB) from the layer below failed; the "
            "device has 85899345920 bytes free of 85899345920: lower initial, or 0 to take "
            "nothing at create",
            Error("graph_arena(initial=100GiB) > cuda(kind=device)", GMR_ERR_OUT_OF_MEMORY,
                  /*check_too=*/false));
  EXPECT_EQ("spec:1:1: cannot create fixed_block: GMR_ERR_OUT_OF_MEMORY: taking the 100 chunks "
            "of option 'initial_chunks' (1073741824 bytes each: block 8MiB times "
            "blocks_per_chunk 128) from the layer below failed; the device has 85899345920 "
            "bytes free of 85899345920: lower initial_chunks, or 0 to take nothing at create",
            Error("fixed_block(block=8MiB, initial_chunks=100) > cuda(kind=device)",
                  GMR_ERR_OUT_OF_MEMORY, /*check_too=*/false));
  // Over host memory there is no device to report on; a limit below says so itself.
  EXPECT_EQ("spec:1:1: cannot create pool: GMR_ERR_LIMIT_EXCEEDED: taking the 2097152 bytes of "
            "option 'initial' (2MiB) from the layer below failed: lower initial, or 0 to take "
            "nothing at create",
            Error("pool(initial=2MiB) > limiting(limit=1MiB) > host", GMR_ERR_LIMIT_EXCEEDED,
                  /*check_too=*/false));
}

TEST_F(SpecLimits, CudaFailuresSayWhatToChange) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_POOL_CREATE, 0, 1, 2));
  EXPECT_EQ("spec:1:1: cannot create cuda: GMR_ERR_OUT_OF_MEMORY: out of memory while creating "
            "it (kind=async creates a cudaMemPool_t on device 0): free device memory, or use "
            "kind=device",
            Error("cuda(kind=async)", GMR_ERR_OUT_OF_MEMORY, /*check_too=*/false));
  // 100 is cudaErrorNoDevice.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_GET_DEVICE_COUNT, 0, 1, 100));
  EXPECT_EQ("spec:1:1: cannot create cuda: GMR_ERR_CUDA: a CUDA call failed (cudaGetDeviceCount, "
            "cudaGetDevice, or for kind=async cudaMemPoolCreate): check that a GPU and its "
            "driver are there (nvidia-smi)",
            Error("cuda", GMR_ERR_CUDA, /*check_too=*/false));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_GET_INFO, 0, 1, 100));
  EXPECT_EQ("spec:1:16: invalid value '50%' for limiting option 'limit': cannot read the device's "
            "memory size for '50%' (GMR_ERR_CUDA): give the size in bytes instead",
            Error("limiting(limit=50%) > host", GMR_ERR_CUDA, /*check_too=*/false));
}

class SpecLimitsNoPools : public SpecLimits {
 protected:
  SpecLimitsNoPools() { sim_config_.memory_pools_supported = false; }
};

TEST_F(SpecLimitsNoPools, AsyncWithoutMemoryPoolsSaysSo) {
  EXPECT_EQ("spec:1:1: cannot create cuda: GMR_ERR_UNSUPPORTED: kind=async needs CUDA memory "
            "pools, which device 0 does not support (cudaDevAttrMemoryPoolsSupported is 0): use "
            "kind=device",
            Error("cuda(kind=async)", GMR_ERR_UNSUPPORTED, /*check_too=*/false));
}

TEST_F(SpecLimits, NumbersTooLargeOrTooLongSayTheLimit) {
  EXPECT_EQ("spec:1:16: invalid value '20000000T' for limiting option 'limit': '20000000T' is "
            "too large (a size is at most 18446744073709551615 bytes)",
            Error("limiting(limit=20000000T) > host"));
  EXPECT_EQ("spec:1:21: invalid value '9223372036854775808' for tracking option 'max_owners': "
            "'9223372036854775808' is too large (at most 9223372036854775807)",
            Error("tracking(max_owners=9223372036854775808) > host"));
  const std::string digits(64, '1');
  EXPECT_EQ("spec:1:16: invalid value '" + digits + "' for limiting option 'limit': '" + digits +
                "' is too long a number (at most 63 characters)",
            Error("limiting(limit=" + digits + ") > host"));
}

TEST_F(SpecLimits, TheListingShowsDefaultsFromTheCDefaultsAndTheRanges) {
  std::string text = Listing();
  ASSERT_FALSE(text.empty());
  for (const char *want :
       {"  min_growth=<size> (default 48MiB, at least 1 byte): ",
        "  max_growth=<size> (default 128MiB, from 1 byte to 4611686018427387903 bytes): ",
        "  granularity=<size> (default 2MiB, a power of two from 256 bytes to 1TiB): ",
        "  arenas=<integer> (default 0, at most 64): ",
        "  recent_frees=<integer> (default 8, at most 32): ",
        "  block=<size> (default 1MiB, a positive multiple of 256 bytes): ",
        "  padding=<number> (default 1.25, from 1 to below 1000000): ",
        "  oom_attempts=<integer> (default 3, at most 64): ",
        "  wait_timeout_ms=<integer> (default 1000, at most 18446744073709): ",
        "  release_threshold=<size|none> (default max): ",
        "  max_owners=<integer> (default 256, at least 1): ",
        "  charge_alignment=<size> (default 256, a power of two): ",
        "  device=<device> (default current): ",
        "  policy=<oom policy> (required): fail, retry, trim_retry, wait, a registered name, or "
        "plugin:PATH:SYMBOL",
        "OOM policies: fail, retry, trim_retry, wait, registered names, plugin:PATH:SYMBOL",
        "limit policies: fail, ignore, increase, increase_total, registered names, plugin:PATH:SYMBOL"}) {
    EXPECT_NE(std::string::npos, text.find(want)) << want << "\n" << text;
  }
}

// The component table of docs/stack_spec.md is prose written by hand: every
// default it gives must be the listing's (which reads the C defaults).
TEST_F(SpecLimits, TheDocsTableGivesTheListingsDefaults) {
  std::string listing = Listing();
  ASSERT_FALSE(listing.empty());
  // component -> option -> "X" (its default) or "required", from the listing.
  // (Plain string searches: std::regex trips GCC 12's -Wmaybe-uninitialized
  // under --config=asan.)
  std::map<std::string, std::map<std::string, std::string>> listed;
  std::istringstream lines(listing);
  std::string line, component;
  while (std::getline(lines, line)) {
    if (line.rfind("  ", 0) != 0) {
      component = line.substr(0, line.find(' '));
      continue;
    }
    size_t eq = line.find('='), open = line.find("> (");
    if (eq == std::string::npos || open == std::string::npos) continue;
    std::string option = line.substr(2, eq - 2), rest = line.substr(open + 3);
    if (rest.rfind("required", 0) == 0) {
      listed[component][option] = "required";
    } else if (rest.rfind("default ", 0) == 0) {
      listed[component][option] = rest.substr(8, rest.find_first_of(",)") - 8);
    }
  }
  const char *srcdir = std::getenv("TEST_SRCDIR");
  std::ifstream docs(std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/docs/stack_spec.md");
  ASSERT_TRUE(docs.good()) << "docs/stack_spec.md not found";
  size_t checked = 0;
  while (std::getline(docs, line)) {
    // Rows "| `component` | `option=VALUES` (default), ... |".
    if (line.rfind("| `", 0) != 0) continue;
    std::string name = line.substr(3, line.find('`', 3) - 3);
    if (listed.count(name) == 0) continue;  // the policy table, not a component
    for (size_t open = line.find('`', 3 + name.size() + 1); open != std::string::npos;) {
      size_t close = line.find('`', open + 1);
      if (close == std::string::npos) break;
      std::string cell = line.substr(open + 1, close - open - 1);
      size_t eq = cell.find('=');
      if (eq != std::string::npos && line.compare(close + 1, 2, " (") == 0) {
        std::string option = cell.substr(0, eq);
        size_t from = close + 3, to = line.find_first_of("):", from);
        std::string documented = line.substr(from, to - from);
        ASSERT_EQ(1u, listed[name].count(option)) << name << " option " << option;
        EXPECT_EQ(listed[name][option], documented) << name << " option " << option;
        checked++;
      }
      open = line.find('`', close + 1);
    }
  }
  EXPECT_EQ(85u, checked);  // every option of every component
}

}  // namespace
