// tests/replay_trace_test.cc: the trace reader of tools/replay (trace.h).
//
// Every trace here is written by hand into a temporary file, plain or
// gzip-compressed (through zlib, as a recorder would), so the expected counts
// can be worked out line by line in the comments.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tools/replay/trace.h"

namespace {

std::string TempDir() {
  const char *dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string WritePlain(const std::string &name, const std::string &content) {
  std::string path = TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  return path;
}

std::string WriteGzip(const std::string &name, const std::string &content) {
  std::string path = TempDir() + "/" + name;
  gzFile gz = gzopen(path.c_str(), "wb");
  EXPECT_NE(gz, nullptr);
  if (gz == nullptr) return path;
  if (!content.empty()) {
    EXPECT_EQ(static_cast<int>(content.size()),
              gzwrite(gz, content.data(), static_cast<unsigned>(content.size())));
  }
  EXPECT_EQ(Z_OK, gzclose(gz));
  return path;
}

std::string ReadBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Crlf(const std::string &lf) {
  std::string out;
  for (char c : lf) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

// Owns a parse result.
struct Parsed {
  gmr_status status = GMR_ERR_INTERNAL;
  replay_trace *trace = nullptr;
  std::string err;
  ~Parsed() { replay_trace_destroy(trace); }
};

void Parse(const std::string &path, bool skip_malformed, Parsed *out) {
  replay_trace_options options = REPLAY_TRACE_OPTIONS_DEFAULT;
  options.skip_malformed = skip_malformed;
  char err[512];
  std::snprintf(err, sizeof err, "untouched");
  out->status = replay_trace_read(path.c_str(), &options, &out->trace, err, sizeof err);
  out->err = err;
}

const char kPytorchHeader[] = "action,addr,size,stream,time_us\n";
const char kRmmHeader[] = "Thread,Time,Action,Pointer,Size,Stream\n";

// Line by line (live bytes after the line; reserved bytes from segment rows):
const char kPytorchTrace[] =
    "action,addr,size,stream,time_us\n"      // 1
    "segment_alloc,4096,2097152,0,1\n"       // 2  reserved 2 MiB
    "alloc,4096,1024,0,2\n"                  // 3  A0 s0    live 1024
    "alloc,8192,512,0,3\n"                   // 4  A1 s0    live 1536
    "free_requested,4096,1024,0,4\n"         // 5  free A0  live 512
    "free_completed,4096,1024,0,5\n"         // 6  no request
    "alloc,4096,2048,7,6\n"                  // 7  A2 s7, address 4096 reused: live 2560
    "free_requested,123456,64,0,7\n"         // 8  never allocated: unmatched
    "segment_alloc,2101248,1048576,7,8\n"    // 9  reserved 3 MiB (the peak)
    "alloc,12288,4096,7,9\n"                 // 10 A3 s7    live 6656 (the peak)
    "segment_free,4096,2097152,0,10\n"       // 11 reserved 1 MiB
    "free_requested,8192,512,7,11\n"         // 12 free A1 on s7: live 6144
    "free_requested,4096,2048,7,12\n"        // 13 free A2  live 4096
    "free_requested,4096,2048,7,13\n"        // 14 already freed: unmatched
    "alloc,16384,256,9,14\n";                // 15 A4 s9    live 4352

void ExpectPytorchTrace(const Parsed &p, const std::string &path) {
  ASSERT_EQ(GMR_OK, p.status) << p.err;
  ASSERT_NE(nullptr, p.trace);
  EXPECT_EQ("", p.err);
  const replay_trace &t = *p.trace;
  EXPECT_EQ(path, t.path);
  EXPECT_EQ(REPLAY_TRACE_FORMAT_PYTORCH, t.format);
  const replay_trace_summary &s = t.summary;
  EXPECT_EQ(8u, s.request_count);
  EXPECT_EQ(5u, s.alloc_count);
  EXPECT_EQ(3u, s.free_count);
  EXPECT_EQ(2u, s.unmatched_free_count);
  EXPECT_EQ(2u, s.live_at_end_count);
  EXPECT_EQ(0u, s.alloc_failure_row_count);
  EXPECT_EQ(0u, s.malformed_count);
  EXPECT_EQ(3u, s.stream_count);
  EXPECT_EQ(256u, s.min_size_bytes);
  EXPECT_EQ(4096u, s.max_size_bytes);
  EXPECT_EQ(6656u, s.peak_live_bytes);
  EXPECT_TRUE(s.has_reserved_reference);
  EXPECT_EQ(3145728u, s.reference_peak_reserved_bytes);
  EXPECT_EQ(0u, s.capture_count);
  EXPECT_EQ(15u, s.line_count);

  ASSERT_EQ(3u, t.stream_count);
  EXPECT_EQ(0u, t.stream_values[0]);
  EXPECT_EQ(7u, t.stream_values[1]);
  EXPECT_EQ(9u, t.stream_values[2]);

  struct Expected {
    replay_op op;
    size_t alloc_index;
    uint64_t size_bytes;
    uint32_t stream_index;
    uint64_t line;
  };
  const Expected expected[] = {
      {REPLAY_OP_ALLOC, 0, 1024, 0, 3},  {REPLAY_OP_ALLOC, 1, 512, 0, 4},
      {REPLAY_OP_FREE, 0, 1024, 0, 5},   {REPLAY_OP_ALLOC, 2, 2048, 1, 7},
      {REPLAY_OP_ALLOC, 3, 4096, 1, 10}, {REPLAY_OP_FREE, 1, 512, 1, 12},
      {REPLAY_OP_FREE, 2, 2048, 1, 13},  {REPLAY_OP_ALLOC, 4, 256, 2, 15},
  };
  ASSERT_EQ(sizeof expected / sizeof expected[0], t.event_count);
  for (size_t i = 0; i < t.event_count; ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(expected[i].op, t.events[i].op);
    EXPECT_EQ(expected[i].alloc_index, t.events[i].alloc_index);
    EXPECT_EQ(expected[i].size_bytes, t.events[i].size_bytes);
    EXPECT_EQ(expected[i].stream_index, t.events[i].stream_index);
    EXPECT_EQ(expected[i].line, t.events[i].line);
  }
}

TEST(ReplayTraceTest, PytorchPlainLf) {
  std::string path = WritePlain("pt_lf.csv", kPytorchTrace);
  Parsed p;
  Parse(path, false, &p);
  ExpectPytorchTrace(p, path);
}

TEST(ReplayTraceTest, PytorchPlainCrlf) {
  std::string path = WritePlain("pt_crlf.csv", Crlf(kPytorchTrace));
  Parsed p;
  Parse(path, false, &p);
  ExpectPytorchTrace(p, path);
}

TEST(ReplayTraceTest, PytorchGzipLf) {
  std::string path = WriteGzip("pt_lf.csv.gz", kPytorchTrace);
  Parsed p;
  Parse(path, false, &p);
  ExpectPytorchTrace(p, path);
}

TEST(ReplayTraceTest, PytorchGzipCrlf) {
  std::string path = WriteGzip("pt_crlf.csv.gz", Crlf(kPytorchTrace));
  Parsed p;
  Parse(path, false, &p);
  ExpectPytorchTrace(p, path);
}

TEST(ReplayTraceTest, LastLineWithoutNewlineAndBlankLinesAndBom) {
  std::string content = std::string("\xEF\xBB\xBF") + Crlf(kPytorchTrace);
  content.pop_back();  // drop the final '\n': the last line ends in "\r"
  content.pop_back();  // and the '\r' too
  // Blank lines anywhere are ignored; they still count as lines.
  content.insert(content.find("alloc,4096,1024"), "\r\n");
  content += "\r\n\r\n";
  std::string path = WritePlain("pt_blank.csv", content);
  Parsed p;
  Parse(path, false, &p);
  ASSERT_EQ(GMR_OK, p.status) << p.err;
  EXPECT_EQ(5u, p.trace->summary.alloc_count);
  EXPECT_EQ(3u, p.trace->summary.free_count);
  EXPECT_EQ(6656u, p.trace->summary.peak_live_bytes);
  EXPECT_EQ(4u, p.trace->events[0].line);  // "alloc,4096,1024" moved down by the blank line
  EXPECT_EQ(16u, p.trace->events[7].line);
  EXPECT_EQ(17u, p.trace->summary.line_count);  // 16 + one blank line after the last
}

// RMM log: pointer and stream in hex, with or without 0x, any case.
const char kRmmTrace[] =
    "Thread,Time,Action,Pointer,Size,Stream\n"                           // 1
    "2342727,15:47:02.841961,allocate,0x10012400000,1048576,0\n"         // 2 A0 s0 live 1 MiB
    "2342727,15:47:02.841970,allocate,0x10012500000,2097152,7f00aa\n"    // 3 A1 s1 live 3 MiB
    "2342727,15:47:02.841980,allocate failure,0x0,999999999999,0\n"      // 4 not a request
    "2342728,15:47:02.841990,free,0x10012400000,1048576,0\n"             // 5 free A0: 2 MiB
    "2342728,15:47:02.842000,allocate,10012400000,4096,0x7f00aa\n"       // 6 A2 s1 (reused address)
    "2342728,15:47:02.842010,free,0xdeadbeef,64,0\n"                     // 7 unmatched
    "2342728,15:47:02.842020,free,0X10012500000,2097152,7F00AA\n";       // 8 free A1 on s1

TEST(ReplayTraceTest, RmmLogBothLineEndsBothCompressions) {
  const std::string variants[][2] = {
      {"rmm_lf.csv", kRmmTrace}, {"rmm_crlf.csv", Crlf(kRmmTrace)},
      {"rmm_lf.csv.gz", kRmmTrace}, {"rmm_crlf.csv.gz", Crlf(kRmmTrace)}};
  for (const auto &v : variants) {
    SCOPED_TRACE(v[0]);
    bool gz = v[0].size() > 3 && v[0].substr(v[0].size() - 3) == ".gz";
    std::string path = gz ? WriteGzip(v[0], v[1]) : WritePlain(v[0], v[1]);
    Parsed p;
    Parse(path, false, &p);
    ASSERT_EQ(GMR_OK, p.status) << p.err;
    const replay_trace &t = *p.trace;
    EXPECT_EQ(REPLAY_TRACE_FORMAT_RMM, t.format);
    EXPECT_EQ(3u, t.summary.alloc_count);
    EXPECT_EQ(2u, t.summary.free_count);
    EXPECT_EQ(5u, t.summary.request_count);
    EXPECT_EQ(1u, t.summary.unmatched_free_count);
    EXPECT_EQ(1u, t.summary.alloc_failure_row_count);
    EXPECT_EQ(1u, t.summary.live_at_end_count);
    EXPECT_EQ(4096u, t.summary.min_size_bytes);
    EXPECT_EQ(2097152u, t.summary.max_size_bytes);
    EXPECT_EQ(3145728u, t.summary.peak_live_bytes);
    EXPECT_FALSE(t.summary.has_reserved_reference);
    EXPECT_EQ(0u, t.summary.reference_peak_reserved_bytes);
    ASSERT_EQ(2u, t.stream_count);
    EXPECT_EQ(0u, t.stream_values[0]);
    EXPECT_EQ(0x7f00aau, t.stream_values[1]);
    ASSERT_EQ(5u, t.event_count);
    EXPECT_EQ(REPLAY_OP_FREE, t.events[4].op);
    EXPECT_EQ(1u, t.events[4].alloc_index);
    EXPECT_EQ(1u, t.events[4].stream_index);
    EXPECT_EQ(8u, t.events[4].line);
  }
}

TEST(ReplayTraceTest, CaptureMarkersAreKeptAndCounted) {
  const char trace[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,512,5,1\n"             // 2  before the capture
      "capture_begin,0,0,5,2\n"          // 3
      "alloc,8192,1024,5,3\n"            // 4  inside, capturing stream: counted
      "alloc,12288,256,6,4\n"            // 5  another stream: not counted
      "free_requested,4096,512,5,5\n"    // 6  inside: counted
      "free_requested,12288,256,6,6\n"   // 7  another stream: not counted
      "alloc,16384,2048,5,7\n"           // 8  inside: counted
      "capture_end,0,0,5,8\n"            // 9
      "free_requested,8192,1024,5,9\n";  // 10 after the capture
  std::string path = WriteGzip("capture.csv.gz", Crlf(trace));
  Parsed p;
  Parse(path, false, &p);
  ASSERT_EQ(GMR_OK, p.status) << p.err;
  const replay_trace &t = *p.trace;
  EXPECT_EQ(1u, t.summary.capture_count);
  EXPECT_EQ(2u, t.summary.capture_alloc_count);
  EXPECT_EQ(1u, t.summary.capture_free_count);
  EXPECT_EQ(4u, t.summary.alloc_count);
  EXPECT_EQ(3u, t.summary.free_count);
  EXPECT_EQ(2u, t.summary.stream_count);
  ASSERT_EQ(9u, t.event_count);  // 7 requests and 2 markers
  EXPECT_EQ(REPLAY_OP_CAPTURE_BEGIN, t.events[1].op);
  EXPECT_EQ(3u, t.events[1].line);
  EXPECT_EQ(0u, t.events[1].stream_index);  // recorded stream 5 came first
  EXPECT_EQ(0u, t.events[1].size_bytes);
  EXPECT_EQ(REPLAY_OP_CAPTURE_END, t.events[7].op);
  EXPECT_EQ(9u, t.events[7].line);
}

TEST(ReplayTraceTest, HugeNumbersSaturateInsteadOfWrapping) {
  std::string trace = std::string(kPytorchHeader) +
                      "alloc,18446744073709551615,18446744073709551615,0,1\n"
                      "alloc,8192,18446744073709551615,18446744073709551615,2\n"
                      "free_requested,8192,18446744073709551615,18446744073709551615,3\n";
  Parsed p;
  Parse(WritePlain("huge.csv", trace), false, &p);
  ASSERT_EQ(GMR_OK, p.status) << p.err;
  EXPECT_EQ(UINT64_MAX, p.trace->summary.max_size_bytes);
  EXPECT_EQ(UINT64_MAX, p.trace->summary.peak_live_bytes);
  EXPECT_EQ(1u, p.trace->summary.free_count);
  EXPECT_EQ(UINT64_MAX, p.trace->stream_values[1]);
}

// One malformed line and the reason the reader must give for it.
struct MalformedCase {
  const char *header;
  const char *lines;  // line 2 is always a valid allocation; the bad line follows
  uint64_t bad_line;
  const char *reason;
};

const char kGoodPytorch[] = "alloc,4096,512,0,1\n";
const char kGoodRmm[] = "1,15:47:02.8,allocate,0x1000,512,0\n";

std::string MalformedContent(const MalformedCase &c) {
  bool rmm = std::string(c.header) == kRmmHeader;
  return std::string(c.header) + (rmm ? kGoodRmm : kGoodPytorch) + c.lines;
}

const MalformedCase kMalformedCases[] = {
    {kPytorchHeader, "alloc,8192,512,0\n", 3, "expected 5 columns, found 4"},
    {kPytorchHeader, "alloc,8192,512,0,1,2\n", 3, "expected 5 columns, found 6"},
    {kPytorchHeader, "just some words\n", 3, "expected 5 columns, found 1"},
    {kPytorchHeader, "alloc,40x6,512,0,1\n", 3,
     "field 'addr' is not a decimal number: \"40x6\""},
    {kPytorchHeader, "alloc,8192,-5,0,1\n", 3, "field 'size' is not a decimal number: \"-5\""},
    {kPytorchHeader, "alloc,8192, 512,0,1\n", 3,
     "field 'size' is not a decimal number: \" 512\""},
    {kPytorchHeader, "alloc,8192,18446744073709551616,0,1\n", 3,
     "field 'size' is out of range for 64 bits: \"18446744073709551616\""},
    {kPytorchHeader, "alloc,8192,512,zero,1\n", 3,
     "field 'stream' is not a decimal number: \"zero\""},
    {kPytorchHeader, "alloc,8192,512,0,\n", 3, "field 'time_us' is not a decimal number: \"\""},
    {kPytorchHeader, "allocate,8192,512,0,1\n", 3, "unknown action \"allocate\""},
    {kPytorchHeader, "alloc,8192,0,0,1\n", 3, "allocation of 0 bytes"},
    {kPytorchHeader, "alloc,4096,256,0,2\n", 3,
     "allocation at address 4096 which is already live (allocated at line 2)"},
    {kPytorchHeader, "free_requested,4096,256,0,2\n", 3,
     "free of 256 bytes does not match the allocation of 512 bytes at line 2"},
    {kPytorchHeader, "capture_end,0,0,3,2\n", 3, "capture_end on stream 3, which is not capturing"},
    {kPytorchHeader, "capture_begin,0,0,3,2\ncapture_begin,0,0,3,3\n", 4,
     "capture_begin on stream 3, which is already capturing (since line 3)"},
    {kPytorchHeader, "alloc,8192,512,0,1\nalloc,9\xff\x01,512,0,1\n", 4,
     "field 'addr' is not a decimal number: \"9??\""},
    {kRmmHeader, "1,15:47:02.8,allocate,0x2000,512\n", 3, "expected 6 columns, found 5"},
    {kRmmHeader, "1,15:47:02.8,alloc,0x2000,512,0\n", 3, "unknown action \"alloc\""},
    {kRmmHeader, "1,noon,allocate,0x2000,512,0\n", 3,
     "field 'Time' is not a time of day: \"noon\""},
    {kRmmHeader, "t1,15:47:02.8,allocate,0x2000,512,0\n", 3,
     "field 'Thread' is not a decimal number: \"t1\""},
    {kRmmHeader, "1,15:47:02.8,allocate,0xZZ,512,0\n", 3,
     "field 'Pointer' is not a hexadecimal number: \"0xZZ\""},
    {kRmmHeader, "1,15:47:02.8,allocate,0x2000,512,0x\n", 3,
     "field 'Stream' is not a hexadecimal number: \"0x\""},
    {kRmmHeader, "1,15:47:02.8,allocate,0x2000,0,0\n", 3, "allocation of 0 bytes"},
    {kRmmHeader, "1,15:47:02.8,free,0x1000,4096,0\n", 3,
     "free of 4096 bytes does not match the allocation of 512 bytes at line 2"},
};

TEST(ReplayTraceTest, EachMalformedLineFailsWithFileLineAndReason) {
  int i = 0;
  for (const MalformedCase &c : kMalformedCases) {
    SCOPED_TRACE(c.reason);
    std::string path = WritePlain("bad" + std::to_string(i++) + ".csv", MalformedContent(c));
    Parsed p;
    Parse(path, false, &p);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
    EXPECT_EQ(nullptr, p.trace);
    EXPECT_EQ(path + ":" + std::to_string(c.bad_line) + ": " + c.reason, p.err);
  }
}

TEST(ReplayTraceTest, RmmAddressesInMessagesAreHex) {
  // PyTorch traces write addresses in decimal (checked above), RMM logs in hex.
  std::string content = std::string(kRmmHeader) + kGoodRmm + "1,15:47:02.9,allocate,0x1000,64,0\n";
  std::string path = WritePlain("rmm_live.csv", content);
  Parsed p;
  Parse(path, false, &p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
  EXPECT_EQ(path + ":3: allocation at address 0x1000 which is already live (allocated at line 2)",
            p.err);
}

TEST(ReplayTraceTest, SkipMalformedCountsSkipsAndRemembersTheFirst) {
  int i = 0;
  for (const MalformedCase &c : kMalformedCases) {
    SCOPED_TRACE(c.reason);
    std::string path = WritePlain("skip" + std::to_string(i++) + ".csv", MalformedContent(c));
    Parsed p;
    Parse(path, true, &p);
    ASSERT_EQ(GMR_OK, p.status) << p.err;
    EXPECT_EQ(1u, p.trace->summary.malformed_count);
    EXPECT_EQ(path + ":" + std::to_string(c.bad_line) + ": " + c.reason,
              std::string(p.trace->first_malformed));
  }
}

TEST(ReplayTraceTest, SkippedLinesLeaveNoTrace) {
  std::string content = std::string(kPytorchHeader) +
                        "alloc,4096,0,0,1\n"             // 2 malformed: 0 bytes
                        "alloc,8192,512,9,2\n"           // 3 ok
                        "free_requested,4096,0,0,3\n"    // 4 4096 was never live: unmatched
                        "free_requested,8192,64,0,4\n"   // 5 malformed: size mismatch
                        "junk\n"                         // 6 malformed: columns
                        "alloc,12288,64,5,4\n"           // 7 ok
                        "free_requested,8192,512,9,5\n"; // 8 ok: 8192 still live
  std::string path = WriteGzip("skip_effects.csv.gz", content);
  Parsed strict;
  Parse(path, false, &strict);
  EXPECT_EQ(path + ":2: allocation of 0 bytes", strict.err);

  Parsed p;
  Parse(path, true, &p);
  ASSERT_EQ(GMR_OK, p.status) << p.err;
  const replay_trace_summary &s = p.trace->summary;
  EXPECT_EQ(3u, s.malformed_count);
  EXPECT_EQ(2u, s.alloc_count);
  EXPECT_EQ(1u, s.free_count);
  EXPECT_EQ(1u, s.unmatched_free_count);
  EXPECT_EQ(576u, s.peak_live_bytes);
  EXPECT_EQ(2u, s.stream_count);  // 9 and 5; stream 0 appears only on skipped lines
  EXPECT_EQ(path + ":2: allocation of 0 bytes", std::string(p.trace->first_malformed));
  ASSERT_EQ(3u, p.trace->event_count);
  EXPECT_EQ(8u, p.trace->events[2].line);
}

TEST(ReplayTraceTest, NulByteAndOverlongLine) {
  std::string nul = std::string(kPytorchHeader) + kGoodPytorch + "alloc,8192";
  nul += '\0';
  nul += ",512,0,1\n";
  std::string path = WritePlain("nul.csv", nul);
  Parsed p;
  Parse(path, false, &p);
  EXPECT_EQ(path + ":3: binary data (a NUL byte) in the line", p.err);

  std::string long_line = std::string(kPytorchHeader) + kGoodPytorch + std::string(5000, 'a') +
                          "\n" + "alloc,8192,512,0,1\n";
  path = WritePlain("long.csv", long_line);
  Parsed q;
  Parse(path, false, &q);
  EXPECT_EQ(path + ":3: line longer than 4096 bytes", q.err);
  Parsed r;
  Parse(path, true, &r);
  ASSERT_EQ(GMR_OK, r.status) << r.err;
  EXPECT_EQ(2u, r.trace->summary.alloc_count);  // the line after the long one is read whole
  EXPECT_EQ(4u, r.trace->events[1].line);
}

TEST(ReplayTraceTest, EmptyFilesFailClearly) {
  for (bool gz : {false, true}) {
    std::string path = gz ? WriteGzip("empty.csv.gz", "") : WritePlain("empty.csv", "");
    Parsed p;
    Parse(path, false, &p);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
    EXPECT_EQ(nullptr, p.trace);
    EXPECT_EQ(path + ": empty file (no header line)", p.err);
  }
}

TEST(ReplayTraceTest, HeaderOnlyFailsClearly) {
  for (const char *header : {kPytorchHeader, kRmmHeader}) {
    std::string path = WriteGzip("header_only.csv.gz", Crlf(header));
    Parsed p;
    Parse(path, false, &p);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
    EXPECT_EQ(path + ": no allocations in the trace (1 lines read)", p.err);
  }
}

TEST(ReplayTraceTest, MissingHeaderFailsClearly) {
  std::string path = WritePlain("no_header.csv", "alloc,4096,512,0,1\n");
  Parsed p;
  Parse(path, false, &p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
  EXPECT_EQ(path +
                ":1: unknown header \"alloc,4096,512,0,1\"; expected "
                "\"action,addr,size,stream,time_us\" (PyTorch snapshot CSV) or "
                "\"Thread,Time,Action,Pointer,Size,Stream\" (RMM log)",
            p.err);
}

TEST(ReplayTraceTest, BinaryGarbageFailsClearly) {
  std::string garbage;
  uint32_t x = 12345;
  for (int i = 0; i < 100000; ++i) {
    x = x * 1103515245u + 12345u;
    garbage += static_cast<char>((x >> 16) & 0xff);
  }
  garbage[0] = 'Z';  // not the gzip magic: read as plain text
  std::string path = WritePlain("garbage.bin", garbage);
  Parsed p;
  Parse(path, false, &p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
  EXPECT_EQ(nullptr, p.trace);
  EXPECT_EQ(0u, p.err.find(path + ":1: unknown header \"Z")) << p.err;

  // The gzip magic followed by garbage: zlib rejects the stream.
  garbage[0] = '\x1f';
  garbage[1] = '\x8b';
  garbage[2] = '\x08';
  garbage[3] = '\x00';
  path = WritePlain("garbage.gz", garbage);
  Parsed q;
  Parse(path, true, &q);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, q.status);
  EXPECT_NE(std::string::npos, q.err.find("gzip data")) << q.err;
  EXPECT_EQ(0u, q.err.find(path + ": ")) << q.err;
}

TEST(ReplayTraceTest, TruncatedGzipFailsEvenWhenSkippingMalformedLines) {
  std::string content = kPytorchHeader;
  for (int i = 0; i < 20000; ++i) {
    content += "alloc," + std::to_string(4096 + 512 * i) + ",512,0," + std::to_string(i) + "\n";
  }
  std::string full = WriteGzip("full.csv.gz", content);
  std::string bytes = ReadBytes(full);
  ASSERT_GT(bytes.size(), 1000u);
  std::string path = WritePlain("truncated.csv.gz", bytes.substr(0, bytes.size() / 2));
  for (bool skip : {false, true}) {
    Parsed p;
    Parse(path, skip, &p);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
    EXPECT_EQ(nullptr, p.trace);
    EXPECT_EQ(0u, p.err.find(path + ": truncated gzip data (unexpected end of file) (after line "))
        << p.err;
  }
  // The untruncated file is fine.
  Parsed ok;
  Parse(full, false, &ok);
  ASSERT_EQ(GMR_OK, ok.status) << ok.err;
  EXPECT_EQ(20000u, ok.trace->summary.alloc_count);
  EXPECT_EQ(20000u * 512u, ok.trace->summary.peak_live_bytes);
}

TEST(ReplayTraceTest, UnreadablePathsFailClearly) {
  std::string missing = TempDir() + "/does_not_exist.csv.gz";
  Parsed p;
  Parse(missing, false, &p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, p.status);
  EXPECT_EQ("cannot open " + missing + ": No such file or directory", p.err);

  std::string dir = TempDir() + "/a_directory";
  mkdir(dir.c_str(), 0700);
  Parsed q;
  Parse(dir, false, &q);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, q.status);
  EXPECT_EQ(nullptr, q.trace);
  EXPECT_EQ(dir + ": read error: Is a directory", q.err);
}

TEST(ReplayTraceTest, NullArgumentsAreRejected) {
  replay_trace *t = nullptr;
  char err[128];
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_trace_read(nullptr, nullptr, &t, err, sizeof err));
  EXPECT_EQ(nullptr, t);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            replay_trace_read("x.csv", nullptr, nullptr, nullptr, 0));
  replay_trace_destroy(nullptr);
  EXPECT_STREQ("pytorch", replay_trace_format_name(REPLAY_TRACE_FORMAT_PYTORCH));
  EXPECT_STREQ("rmm", replay_trace_format_name(REPLAY_TRACE_FORMAT_RMM));
}

}  // namespace
