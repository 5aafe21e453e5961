// The sub-allocating resources are nameable in specs: pool, fixed_block and
// graph_arena, with their options reaching the resources, their errors
// explained, and the graph pool stack of docs/graph_pool.md buildable; so are
// the nvtx_logging and log adaptors, with text options.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmr/fixed_block_resource.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/pool_resource.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/log_stats.h"
#include "tests/support/sim_fixture.h"

namespace {

class StackComponents : public gmr_test::SimTest {
 protected:
  gmr_stack *Build(const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec.c_str(), &s, &e)) << e.message;
    return s;
  }
  std::string Error(const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_create(spec.c_str(), &s, &e)) << spec;
    EXPECT_EQ(nullptr, s);
    return e.message;
  }
};

TEST_F(StackComponents, PoolOptionsReachThePool) {
  gmr_stack *s = Build("pool(initial=64MiB, arenas=2, min_growth=4MiB) > cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  gmr_pool_resource *pool =
      gmr_pool_resource_from_resource(gmr_resource_find(gmr_stack_as_resource(s), "pool_resource"));
  ASSERT_NE(nullptr, pool);
  EXPECT_EQ(2u, gmr_pool_resource_get_arena_count(pool));
  gmr_pool_resource_stats st = GMR_POOL_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &st));
  EXPECT_EQ(size_t{64} << 20, st.held_bytes);  // initial= was taken at create
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 1 << 20, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &st));
  EXPECT_EQ(size_t{64} << 20, st.held_bytes);  // served from the initial chunk
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 1 << 20, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(StackComponents, StreamsOutliveMakesFreesRecordNothing) {
  for (bool outlive : {false, true}) {
    gmr_stack *s = Build(std::string("pool(arenas=1, streams_outlive=") +
                         (outlive ? "true" : "false") + ") > cuda(kind=async)");
    ASSERT_NE(nullptr, s);
    gmr_pool_resource *pool = gmr_pool_resource_from_resource(
        gmr_resource_find(gmr_stack_as_resource(s), "pool_resource"));
    gmr_stream stream = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 4096, 0, stream, &p));
    gmr_pool_resource_stats before = GMR_POOL_RESOURCE_STATS_INIT;
    ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &before));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 4096, 0, stream));
    gmr_pool_resource_stats after = GMR_POOL_RESOURCE_STATS_INIT;
    ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &after));
    EXPECT_EQ(before.event_record_count + (outlive ? 0u : 1u), after.event_record_count);
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));  // before the stream, as promised
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
  }
}

TEST_F(StackComponents, FixedBlockOptionsReachTheResource) {
  gmr_stack *s = Build("fixed_block(block=64KiB, blocks_per_chunk=4, oversize=refuse) > "
                       "cuda(kind=device)");
  ASSERT_NE(nullptr, s);
  gmr_fixed_block_resource *fb = gmr_fixed_block_resource_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s), "fixed_block_resource"));
  ASSERT_NE(nullptr, fb);
  EXPECT_EQ(size_t{64} << 10, gmr_fixed_block_resource_get_block_bytes(fb));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED,
            gmr_resource_allocate(gmr_stack_as_resource(s), (64 << 10) + 1, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 1000, 0, nullptr, &p));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));  // one chunk of 4 blocks
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(StackComponents, TheGraphPoolStackBuildsAndServesACapture) {
  gmr_stack *s = Build(
      "tracking(per=stream) > limiting(limit=1GiB) > "
      "graph_arena(uncaptured=forward, policy=ordered_reuse, initial=8MiB) > pool > "
      "cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(5u, gmr_stack_get_depth(s));
  gmr_graph_arena_resource *arena = gmr_graph_arena_resource_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s), "graph_arena_resource"));
  ASSERT_NE(nullptr, arena);
  EXPECT_EQ(GMR_GRAPH_ARENA_ORDERED_REUSE,
            gmr_graph_arena_resource_get_config(arena).capture_policy);

  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(stream));
  uint64_t mallocs_before = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 1 << 20, 0, stream, &p));
  EXPECT_EQ(mallocs_before, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 1 << 20, 0, stream));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(stream, &graph));  // nothing broke the capture
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  // The session was opened automatically (the arena saw the stream capture);
  // claiming it gives the graph's memory to the caller, who releases it once
  // the graph is gone.
  gmr_graph_memory *memory = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena, stream, &memory));
  ASSERT_NE(nullptr, memory);
  gmr_graph_arena_resource_stats as = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(arena, &as));
  EXPECT_EQ(1u, as.capture_allocation_count);
  EXPECT_EQ(0u, as.upstream_call_during_capture_count);
  EXPECT_EQ(0u, as.upstream_call_in_session_count);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_stack_destroy(s));  // the graph memory is not released yet
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, memory));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

TEST_F(StackComponents, BadOptionsAreExplained) {
  EXPECT_EQ("spec:1:6: unknown option 'intial' for pool (did you mean 'initial'?)",
            Error("pool(intial=1GiB) > cuda"));
  // The one rule broken, not every rule (issue 9); more in stack_spec_limits_test.
  EXPECT_EQ("spec:1:18: invalid value '1000' for pool option 'granularity': not a power of two "
            "(512 bytes and 1KiB are)",
            Error("pool(granularity=1000) > cuda"));
  EXPECT_EQ("spec:1:19: invalid value '1000' for fixed_block option 'block': not a multiple of "
            "256 bytes (768 bytes and 1KiB are)",
            Error("fixed_block(block=1000) > cuda"));
  EXPECT_EQ("spec:1:20: invalid value 'fifo' for graph_arena option 'policy': expected "
            "monotone or ordered_reuse",
            Error("graph_arena(policy=fifo) > cuda"));
}


// A file name in the test's private temporary directory.
std::string TempPath(const std::string &name) {
  const char *dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<std::string> ReadLines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

TEST_F(StackComponents, NvtxLoggingOverLogOverAnAnnotatedPoolBuildsAndLogsEveryCall) {
  const std::string path = TempPath("nvtx_log_pool.csv");
  gmr_stack *s = Build("nvtx_logging(domain=\"x\") > log(file=\"" + path +
                       "\") > pool(nvtx_annotate=true) > cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(4u, gmr_stack_get_depth(s));
  gmr_nvtx_logging_adaptor *nvtx = gmr_nvtx_logging_adaptor_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s), "nvtx_logging_adaptor"));
  ASSERT_NE(nullptr, nvtx);
  EXPECT_STREQ("x", gmr_nvtx_logging_adaptor_get_domain_name(nvtx));
  EXPECT_TRUE(gmr_nvtx_logging_adaptor_is_enabled(nvtx) || !gmr_nvtx_is_compiled_in());
  gmr_log_adaptor *log =
      gmr_log_adaptor_from_resource(gmr_resource_find(gmr_stack_as_resource(s), "log_adaptor"));
  ASSERT_NE(nullptr, log);

  gmr_resource *r = gmr_stack_as_resource(s);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 << 20, 0, nullptr, &b));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 1 << 20, 0, nullptr));
  EXPECT_EQ(4u, gmr_test::LogStats(log).row_count);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));

  std::vector<std::string> lines = ReadLines(path);
  ASSERT_EQ(5u, lines.size());
  EXPECT_EQ(GMR_LOG_ADAPTOR_HEADER, lines[0]);
  // Thread,Time,Action,Pointer,Size,Stream: the last four columns are exact.
  auto tail = [](const std::string &row) {
    size_t first = row.find(',');
    return row.substr(row.find(',', first + 1) + 1);
  };
  char want[4][96];
  std::snprintf(want[0], sizeof want[0], "allocate,%p,1000,0", a);
  std::snprintf(want[1], sizeof want[1], "allocate,%p,1048576,0", b);
  std::snprintf(want[2], sizeof want[2], "free,%p,1000,0", a);
  std::snprintf(want[3], sizeof want[3], "free,%p,1048576,0", b);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(want[i], tail(lines[i + 1])) << lines[i + 1];
  std::remove(path.c_str());
}

TEST_F(StackComponents, NvtxLoggingAndLogOptionsReachTheAdaptors) {
  const std::string path = TempPath("buffered.csv");
  gmr_stack *s = Build("nvtx_logging(enabled=false) > log(file=" + path +
                       ", flush=buffered) > host");
  ASSERT_NE(nullptr, s);
  gmr_nvtx_logging_adaptor *nvtx = gmr_nvtx_logging_adaptor_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s), "nvtx_logging_adaptor"));
  ASSERT_NE(nullptr, nvtx);
  EXPECT_STREQ("gmr", gmr_nvtx_logging_adaptor_get_domain_name(nvtx));  // the default
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_enabled(nvtx));
  gmr_resource *r = gmr_stack_as_resource(s);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64, 0, nullptr));
  // Buffered: the rows reach the file at the latest when the stack goes.
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  std::vector<std::string> lines = ReadLines(path);
  ASSERT_EQ(3u, lines.size());
  EXPECT_NE(std::string::npos, lines[1].find(",allocate,"));
  EXPECT_NE(std::string::npos, lines[2].find(",free,"));
  std::remove(path.c_str());
}

TEST_F(StackComponents, BadNvtxLoggingAndLogValuesAreExplained) {
  EXPECT_EQ("spec:1:21: invalid value '' for nvtx_logging option 'domain': expected a "
            "non-empty text",
            Error("nvtx_logging(domain=\"\") > host"));
  const std::string long_name(GMR_NVTX_DOMAIN_NAME_MAX_BYTES + 1, 'd');
  EXPECT_EQ("spec:1:21: invalid value '" + long_name +
                "' for nvtx_logging option 'domain': 64 bytes of text, at most 63 allowed",
            Error("nvtx_logging(domain=" + long_name + ") > host"));
  EXPECT_EQ("spec:1:22: invalid value 'maybe' for nvtx_logging option 'enabled': 'maybe' is not "
            "a boolean (true/false, yes/no, on/off, 1/0)",
            Error("nvtx_logging(enabled=maybe) > host"));
  EXPECT_EQ("spec:1:14: unknown option 'domian' for nvtx_logging (did you mean 'domain'?)",
            Error("nvtx_logging(domian=x) > host"));
  EXPECT_EQ("spec:1:1: missing option 'file' for log (the CSV file to create (or truncate))",
            Error("log > host"));
  EXPECT_EQ("spec:1:1: missing option 'file' for log (the CSV file to create (or truncate))",
            Error("log(flush=buffered) > host"));
  EXPECT_EQ("spec:1:10: invalid value '' for log option 'file': expected a non-empty text",
            Error("log(file=\"\") > host"));
  EXPECT_EQ("spec:1:19: invalid value 'sometimes' for log option 'flush': expected every_row or "
            "buffered",
            Error("log(file=x, flush=sometimes) > host"));
  EXPECT_EQ("spec:1:1: cannot create log: GMR_ERR_INVALID_ARGUMENT: cannot open "
            "'/nonexistent-gmr-dir/x.csv' for writing: No such file or directory",
            Error("log(file=\"/nonexistent-gmr-dir/x.csv\") > host"));
  EXPECT_EQ("spec:1:1: log is an adaptor and needs a layer below it: end the spec with a "
            "resource, e.g. '> cuda(kind=async)' or '> host'",
            Error("log(file=x)"));
  EXPECT_EQ("spec:1:20: invalid value 'maybe' for pool option 'nvtx_annotate': 'maybe' is not a "
            "boolean (true/false, yes/no, on/off, 1/0)",
            Error("pool(nvtx_annotate=maybe) > cuda"));
  // gmr_stack_check finds the same without creating anything (no file either).
  gmr_spec_error e;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_check("log(file=\"\") > host", &e));
  EXPECT_EQ(GMR_OK, gmr_stack_check("log(file=/nonexistent-gmr-dir/x.csv) > host", &e));
}

TEST_F(StackComponents, TextOptionsAreListedWithTheirDefaults) {
  FILE *f = tmpfile();
  ASSERT_NE(nullptr, f);
  ASSERT_EQ(GMR_OK, gmr_stack_print_components(f));
  rewind(f);
  std::string text;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  fclose(f);
  for (const char *want :
       {"nvtx_logging (adaptor): ", "  domain=<text> (default gmr): ",
        "  enabled=<bool> (default true): ", "log (adaptor): ", "  file=<text> (required): ",
        "  flush=<choice> (default every_row): ", "  nvtx_annotate=<bool> (default false): "}) {
    EXPECT_NE(std::string::npos, text.find(want)) << want;
  }
}

// The stream options (gmr/stream_ordered_options.h) are one table: pool and
// fixed_block list all five alike, together; vmm and vmm_pages list the one
// they read, streams_outlive, as the pools do.
TEST_F(StackComponents, StreamOptionsAreListedAlikeByEveryComponentThatTakesThem) {
  FILE *f = tmpfile();
  ASSERT_NE(nullptr, f);
  ASSERT_EQ(GMR_OK, gmr_stack_print_components(f));
  rewind(f);
  std::map<std::string, std::vector<std::string>> lines;  // component -> its option lines
  std::string component;
  char buf[1024];
  while (fgets(buf, sizeof buf, f) != nullptr) {
    std::string line(buf);
    if (line.rfind("  ", 0) != 0) {
      component = line.substr(0, line.find(' '));
    } else {
      lines[component].push_back(line);
    }
  }
  fclose(f);
  const char *const names[] = {"stream_ordered", "nvtx_annotate", "streams_outlive",
                               "record_every_free", "stream_ids"};
  auto option = [&](const std::string &comp, const std::string &name) {
    for (const std::string &l : lines[comp]) {
      if (l.rfind("  " + name + "=", 0) == 0) return l;
    }
    return std::string();
  };
  for (const char *name : names) {
    SCOPED_TRACE(name);
    std::string pool = option("pool", name);
    ASSERT_FALSE(pool.empty());
    EXPECT_EQ(pool, option("fixed_block", name));
  }
  EXPECT_EQ(option("pool", "streams_outlive"), option("vmm", "streams_outlive"));
  EXPECT_EQ(option("pool", "streams_outlive"), option("vmm_pages", "streams_outlive"));
  EXPECT_TRUE(option("vmm", "stream_ids").empty()) << "the VMM resources read streams_outlive only";
}

}  // namespace
