// tests/replay_pickle_test.cc: the bounded pickle reader (tools/replay/pickle.h)
// and PyTorch memory snapshots read through it (tools/replay/trace.h). The
// snapshots in tools/replay/testdata/ were written by Python's own pickle
// (tools/replay/testdata/make_snapshots.py); the hand-made byte strings below
// each break one rule of the format.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/replay/pickle.h"
#include "tools/replay/trace.h"

namespace {

std::string TestData(const std::string &name) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/tools/replay/testdata/" + name;
}

std::string ReadBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parse `bytes`; the status, and the message in *err.
gmr_status Parse(const std::string &bytes, std::string *err, replay_pickle **out = nullptr) {
  char message[512];
  replay_pickle *doc = nullptr;
  gmr_status st = replay_pickle_parse(reinterpret_cast<const unsigned char *>(bytes.data()),
                                      bytes.size(), &doc, message, sizeof message);
  *err = message;
  if (out != nullptr) {
    *out = doc;
  } else {
    replay_pickle_destroy(doc);
  }
  return st;
}

// Owns a parsed trace.
struct Trace {
  replay_trace *trace = nullptr;
  ~Trace() { replay_trace_destroy(trace); }
};

gmr_status Read(const std::string &path, Trace *out, std::string *err,
                const replay_trace_options *options = nullptr) {
  char message[512];
  gmr_status st = replay_trace_read(path.c_str(), options, &out->trace, message, sizeof message);
  *err = message;
  return st;
}

// ---- the pickle machine --------------------------------------------------------

TEST(ReplayPickleTest, ReadsWhatPythonWritesForPlainData) {
  // pickle.dumps({'a': [1, -2, 300, 70000, 2**40, 'x'], 'b': (None, True, 1.5)}, protocol=4)
  const std::string bytes(
      "\x80\x04\x95\x39\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01"
      "\x61\x94\x5d\x94\x28\x4b\x01\x4a\xfe\xff\xff\xff\x4d\x2c\x01\x4a"
      "\x70\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\x01\x8c\x01\x78\x94"
      "\x65\x8c\x01\x62\x94\x4e\x88\x47\x3f\xf8\x00\x00\x00\x00\x00\x00"
      "\x87\x94\x75\x2e",
      68);
  std::string err;
  replay_pickle *doc = nullptr;
  ASSERT_EQ(GMR_OK, Parse(bytes, &err, &doc)) << err;
  replay_pickle_value root = replay_pickle_root(doc);
  ASSERT_EQ(REPLAY_PICKLE_DICT, replay_pickle_type_of(doc, root));
  EXPECT_EQ(2u, replay_pickle_length(doc, root));
  replay_pickle_value a = 0, b = 0;
  ASSERT_TRUE(replay_pickle_dict_get(doc, root, "a", &a));
  ASSERT_TRUE(replay_pickle_dict_get(doc, root, "b", &b));
  EXPECT_FALSE(replay_pickle_dict_get(doc, root, "c", &b));
  ASSERT_EQ(REPLAY_PICKLE_LIST, replay_pickle_type_of(doc, a));
  ASSERT_EQ(6u, replay_pickle_length(doc, a));
  const uint64_t expected[] = {1, 0, 300, 70000, UINT64_C(1) << 40};
  for (size_t i = 0; i < 5; ++i) {
    uint64_t v = 0;
    bool ok = replay_pickle_get_u64(doc, replay_pickle_item(doc, a, i), &v);
    if (i == 1) {
      EXPECT_FALSE(ok) << "-2 is not an unsigned value";
    } else {
      ASSERT_TRUE(ok) << i;
      EXPECT_EQ(expected[i], v) << i;
    }
  }
  const char *text = nullptr;
  size_t length = 0;
  ASSERT_TRUE(replay_pickle_get_str(doc, replay_pickle_item(doc, a, 5), &text, &length));
  EXPECT_EQ("x", std::string(text, length));
  ASSERT_EQ(REPLAY_PICKLE_TUPLE, replay_pickle_type_of(doc, b));
  ASSERT_EQ(3u, replay_pickle_length(doc, b));
  EXPECT_EQ(REPLAY_PICKLE_NONE, replay_pickle_type_of(doc, replay_pickle_item(doc, b, 0)));
  EXPECT_EQ(REPLAY_PICKLE_BOOL, replay_pickle_type_of(doc, replay_pickle_item(doc, b, 1)));
  EXPECT_EQ(REPLAY_PICKLE_FLOAT, replay_pickle_type_of(doc, replay_pickle_item(doc, b, 2)));
  replay_pickle_destroy(doc);
}

TEST(ReplayPickleTest, IntegersUpToTwoToTheSixtyFourMinusOne) {
  // pickle.dumps([2**63 - 1, 2**63, 2**64 - 1, -1], protocol=2)
  const std::string bytes(
      "\x80\x02\x5d\x71\x00\x28\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"
      "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00\x8a\x09\xff\xff\xff"
      "\xff\xff\xff\xff\xff\x00\x4a\xff\xff\xff\xff\x65\x2e",
      45);
  std::string err;
  replay_pickle *doc = nullptr;
  ASSERT_EQ(GMR_OK, Parse(bytes, &err, &doc)) << err;
  replay_pickle_value root = replay_pickle_root(doc);
  ASSERT_EQ(4u, replay_pickle_length(doc, root));
  uint64_t v = 0;
  ASSERT_TRUE(replay_pickle_get_u64(doc, replay_pickle_item(doc, root, 0), &v));
  EXPECT_EQ(UINT64_C(0x7fffffffffffffff), v);
  ASSERT_TRUE(replay_pickle_get_u64(doc, replay_pickle_item(doc, root, 1), &v));
  EXPECT_EQ(UINT64_C(0x8000000000000000), v);
  ASSERT_TRUE(replay_pickle_get_u64(doc, replay_pickle_item(doc, root, 2), &v));
  EXPECT_EQ(UINT64_MAX, v);
  EXPECT_FALSE(replay_pickle_get_u64(doc, replay_pickle_item(doc, root, 3), &v));
  replay_pickle_destroy(doc);
  // 2**64 needs 9 bytes with a non-zero top: refused, never wrapped.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            Parse(std::string("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", 14),
                  &err));
  EXPECT_NE(std::string::npos, err.find("LONG1: an integer of 9 bytes does not fit in 64 bits"))
      << err;
}

TEST(ReplayPickleTest, AListThatHoldsItselfIsReadWithoutRecursion) {
  // l = []; l.append(l); l.append(l); pickle.dumps(l, protocol=4)
  const std::string bytes("\x80\x04]\x94(h\x00h\x00" "e.", 11);
  std::string err;
  replay_pickle *doc = nullptr;
  ASSERT_EQ(GMR_OK, Parse(bytes, &err, &doc)) << err;
  replay_pickle_value root = replay_pickle_root(doc);
  ASSERT_EQ(2u, replay_pickle_length(doc, root));
  EXPECT_EQ(root, replay_pickle_item(doc, root, 0));
  EXPECT_EQ(root, replay_pickle_item(doc, root, 1));
  replay_pickle_destroy(doc);
}

struct BadPickle {
  const char *what;
  std::string bytes;
  const char *message;  // a part of the error message
};

TEST(ReplayPickleTest, MalformedPicklesAreRefusedWithTheOpcodeAndByte) {
  const std::vector<BadPickle> cases = {
      {"empty", std::string(), "not a pickle of protocol 2 or later"},
      {"protocol 0 text", "(dp0\n.", "not a pickle of protocol 2 or later"},
      {"protocol 6", std::string("\x80\x06}.", 4), "byte 0: PROTO: protocol 6; this reader takes 2 to 5"},
      {"a class (GLOBAL)", std::string("\x80\x02\x63\x65\x78\x63\x65\x70\x74\x69\x6f\x6e\x73\x0a\x56\x61" "\x6c\x75\x65\x45\x72\x72\x6f\x72\x0a\x71\x00\x2e", 28),
       "byte 2: GLOBAL: opcode 0x63 GLOBAL is outside the subset"},
      {"a call (REDUCE)", std::string("\x80\x04N)R.", 6),
       "byte 4: REDUCE: opcode 0x52 REDUCE is outside the subset"},
      {"a set", std::string("\x80\x04\x8f.", 4), "opcode 0x8f EMPTY_SET is outside the subset"},
      {"not an opcode", std::string("\x80\x04\xff.", 4), "byte 2: ?: opcode 0xff is not a pickle opcode"},
      {"no STOP", std::string("\x80\x04}", 3), "truncated: the pickle ends without STOP"},
      {"cut string", std::string("\x80\x04\x8c\x05" "ab", 6), "byte 2: SHORT_BINUNICODE: truncated"},
      {"cut BININT", std::string("\x80\x04J\x01\x02", 5), "byte 2: BININT: truncated: needs 4 more bytes, 2 left"},
      {"huge string length", std::string("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", 12),
       "BINUNICODE8: truncated: a string of 18446744073709551615 bytes"},
      {"huge frame", std::string("\x80\x04\x95\x00\x00\x00\x00\x01\x00\x00\x00N.", 13),
       "FRAME: truncated: a frame of"},
      {"bytes after STOP", std::string("\x80\x04N.N", 5), "1 bytes after STOP"},
      {"two values at STOP", std::string("\x80\x04NN.", 5), "ends with 2 values and 0 open MARKs"},
      {"memo never stored", std::string("\x80\x04}h\x05.", 6), "BINGET: memo index 5 was never stored"},
      {"memo index far away", std::string("\x80\x04}r\xff\xff\xff\x7f.", 9),
       "LONG_BINPUT: memo index 2147483647 is past the 1 values made so far"},
      {"append to nothing", std::string("\x80\x04N" "a.", 5), "APPEND: no list below the items"},
      {"append to a dict", std::string("\x80\x04}N" "a.", 6),
       "APPEND: adds items to a value of type dict, not to a list"},
      {"odd setitems", std::string("\x80\x04}(N" "u.", 7), "an odd number of items (1)"},
      {"appends without mark", std::string("\x80\x04]N" "e.", 6), "APPENDS: no MARK to pop to"},
      {"negative LONG4 length", std::string("\x80\x04\x8b\xff\xff\xff\xff.", 8), "LONG4: a negative length"},
      {"deep marks", std::string("\x80\x04") + std::string(5000, '('), "more than 4096 nested MARKs"},
  };
  for (const BadPickle &c : cases) {
    std::string err;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Parse(c.bytes, &err)) << c.what;
    EXPECT_NE(std::string::npos, err.find(c.message)) << c.what << ": " << err;
  }
}

TEST(ReplayPickleTest, EveryTruncationOfARealSnapshotIsRefused) {
  const std::string bytes = ReadBytes(TestData("small_p4.pickle"));
  ASSERT_GT(bytes.size(), 1000u);
  size_t truncated_messages = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string err;
    ASSERT_EQ(GMR_ERR_INVALID_ARGUMENT, Parse(bytes.substr(0, n), &err)) << n;
    ASSERT_FALSE(err.empty()) << n;
    if (err.find("truncated") != std::string::npos) truncated_messages++;
  }
  // Every cut after the first byte (0x80, PROTO) is a truncation, and says so.
  EXPECT_EQ(bytes.size() - 1, truncated_messages);
}

TEST(ReplayPickleTest, NullArgumentsAreRefused) {
  replay_pickle *doc = nullptr;
  char err[64];
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_pickle_parse(nullptr, 0, &doc, err, sizeof err));
  const unsigned char one[] = {0x80};
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_pickle_parse(one, 1, nullptr, err, sizeof err));
  replay_pickle_destroy(nullptr);
}

// ---- snapshots -------------------------------------------------------------------

TEST(ReplaySnapshotTest, EveryProtocolGivesTheSameTrace) {
  for (int protocol : {2, 3, 4, 5}) {
    Trace t;
    std::string err;
    std::string path = TestData("small_p" + std::to_string(protocol) + ".pickle");
    ASSERT_EQ(GMR_OK, Read(path, &t, &err)) << err;
    const replay_trace_summary &s = t.trace->summary;
    EXPECT_EQ(REPLAY_TRACE_FORMAT_SNAPSHOT, t.trace->format);
    EXPECT_STREQ("snapshot", replay_trace_format_name(t.trace->format));
    EXPECT_STREQ("entry", replay_trace_location_word(t.trace));
    EXPECT_EQ(5u, s.alloc_count) << protocol;
    EXPECT_EQ(4u, s.free_count) << protocol;
    EXPECT_EQ(1u, s.live_at_end_count) << protocol;
    EXPECT_EQ(2u, s.stream_count) << protocol;
    EXPECT_EQ(UINT64_C(5000000000) + 100, s.peak_live_bytes) << protocol;
    EXPECT_EQ(100u, s.min_size_bytes);
    EXPECT_EQ(UINT64_C(5000000000), s.max_size_bytes);
    EXPECT_TRUE(s.has_reserved_reference);
    EXPECT_EQ(20971520u, s.reference_peak_reserved_bytes);
    EXPECT_EQ(11u, s.line_count);  // entries
    EXPECT_EQ(0, t.trace->snapshot_device);
    ASSERT_EQ(2u, t.trace->stream_count);
    EXPECT_EQ(0u, t.trace->stream_values[0]);
    EXPECT_EQ(UINT64_C(94336012345344), t.trace->stream_values[1]);
    // Entries are numbered from 1: the first alloc is entry 2.
    EXPECT_EQ(2u, t.trace->events[0].line);
  }
}

// The bundled multistream trace written as a snapshot (gzip): the same events
// as its CSV export, event for event.
TEST(ReplaySnapshotTest, ASnapshotGivesTheSameEventsAsItsCsvExport) {
  Trace pickle, csv;
  std::string err;
  ASSERT_EQ(GMR_OK, Read(TestData("multistream.pickle.gz"), &pickle, &err)) << err;
  const char *srcdir = std::getenv("TEST_SRCDIR");
  ASSERT_EQ(GMR_OK, Read(std::string(srcdir != nullptr ? srcdir : ".") +
                             "/gmr/tools/traces/multistream.csv.gz",
                         &csv, &err))
      << err;
  // Device 0 has no entries: device 1 is the only one, taken without asking.
  EXPECT_EQ(1, pickle.trace->snapshot_device);
  ASSERT_EQ(csv.trace->event_count, pickle.trace->event_count);
  for (size_t i = 0; i < csv.trace->event_count; ++i) {
    const replay_event &a = csv.trace->events[i], &b = pickle.trace->events[i];
    ASSERT_EQ(a.op, b.op) << i;
    ASSERT_EQ(a.size_bytes, b.size_bytes) << i;
    ASSERT_EQ(a.alloc_index, b.alloc_index) << i;
    ASSERT_EQ(csv.trace->stream_values[a.stream_index], pickle.trace->stream_values[b.stream_index])
        << i;
    ASSERT_EQ(a.line, b.line + 1) << i;  // the CSV has a header line
  }
  EXPECT_EQ(csv.trace->summary.peak_live_bytes, pickle.trace->summary.peak_live_bytes);
  EXPECT_EQ(csv.trace->summary.reference_peak_reserved_bytes,
            pickle.trace->summary.reference_peak_reserved_bytes);
}

// Recorded on an H100 by tools/traces/record_snapshot.py (PyTorch 2.11, a tiny
// GPT trained for 3 steps): the pickle PyTorch wrote and the CSV the script
// converted from the same snapshot give the same requests.
TEST(ReplaySnapshotTest, ARealPyTorchSnapshotReadsAsItsCsvExport) {
  Trace pickle, csv;
  std::string err;
  ASSERT_EQ(GMR_OK, Read(TestData("tiny_gpt_train.pickle.gz"), &pickle, &err)) << err;
  ASSERT_EQ(GMR_OK, Read(TestData("tiny_gpt_train.csv.gz"), &csv, &err)) << err;
  EXPECT_EQ(0, pickle.trace->snapshot_device);
  EXPECT_EQ(1269u, pickle.trace->summary.alloc_count);
  EXPECT_EQ(1103u, pickle.trace->summary.free_count);
  ASSERT_EQ(csv.trace->event_count, pickle.trace->event_count);
  for (size_t i = 0; i < csv.trace->event_count; ++i) {
    const replay_event &a = csv.trace->events[i], &b = pickle.trace->events[i];
    ASSERT_EQ(a.op, b.op) << i;
    ASSERT_EQ(a.size_bytes, b.size_bytes) << i;
    ASSERT_EQ(a.alloc_index, b.alloc_index) << i;
  }
  EXPECT_EQ(csv.trace->summary.peak_live_bytes, pickle.trace->summary.peak_live_bytes);
  EXPECT_EQ(csv.trace->summary.reference_peak_reserved_bytes,
            pickle.trace->summary.reference_peak_reserved_bytes);
  EXPECT_EQ(778u << 20, pickle.trace->summary.reference_peak_reserved_bytes);
}

TEST(ReplaySnapshotTest, SeveralDevicesNeedAChoice) {
  Trace t;
  std::string err;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Read(TestData("two_devices.pickle"), &t, &err));
  EXPECT_EQ(nullptr, t.trace);
  EXPECT_NE(std::string::npos,
            err.find("two_devices.pickle: the snapshot has traces for 2 devices (0: 11 entries, "
                     "1: 2 entries); choose one with --snapshot-device"))
      << err;
  replay_trace_options options = REPLAY_TRACE_OPTIONS_DEFAULT;
  options.snapshot_device = 1;
  ASSERT_EQ(GMR_OK, Read(TestData("two_devices.pickle"), &t, &err, &options)) << err;
  EXPECT_EQ(1, t.trace->snapshot_device);
  EXPECT_EQ(1u, t.trace->summary.alloc_count);
  EXPECT_EQ(512u, t.trace->summary.peak_live_bytes);
  Trace none;
  options.snapshot_device = 5;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Read(TestData("two_devices.pickle"), &none, &err, &options));
  EXPECT_NE(std::string::npos, err.find("no device 5 in the snapshot: it has traces for 2 devices"))
      << err;
}

TEST(ReplaySnapshotTest, AnOomEntryHasNoAddressAndIsNotReplayed) {
  // PyTorch writes 'device_free' where other entries have 'addr'.
  Trace t;
  std::string err;
  ASSERT_EQ(GMR_OK, Read(TestData("with_oom.pickle"), &t, &err)) << err;
  EXPECT_EQ(4u, t.trace->summary.line_count);
  EXPECT_EQ(1u, t.trace->summary.alloc_count);
  EXPECT_EQ(1u, t.trace->summary.free_count);
  EXPECT_EQ(2u, t.trace->event_count);
  EXPECT_EQ(4096u, t.trace->summary.peak_live_bytes);
  EXPECT_EQ(4096u, t.trace->summary.max_size_bytes);  // the failed request is not one
}

TEST(ReplaySnapshotTest, WhatIsNotASnapshotIsRefusedSayingWhy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad_not_a_dict.pickle",
       "not a PyTorch memory snapshot: the pickle holds a list, expected a dict with "
       "'device_traces'"},
      {"bad_no_device_traces.pickle",
       "not a PyTorch memory snapshot: no 'device_traces' key (keys: 'segments', "
       "'allocator_settings')"},
      {"bad_traces_not_a_list.pickle", "'device_traces' is an int, expected a list"},
      {"bad_empty_traces.pickle",
       "no allocations in the snapshot (device_traces is empty: was "
       "torch.cuda.memory._record_memory_history() on?)"},
      {"bad_int_too_large.pickle", "pickle: byte 457: LONG1: an integer of 9 bytes does not fit"},
      {"bad_class.pickle", "pickle: byte 569: STACK_GLOBAL: opcode 0x93 STACK_GLOBAL is outside "
                           "the subset this reader accepts"},
  };
  for (const auto &c : cases) {
    Trace t;
    std::string err;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Read(TestData(c.first), &t, &err)) << c.first;
    EXPECT_NE(std::string::npos, err.find(TestData(c.first) + ": " + c.second))
        << c.first << ": " << err;
  }
}

TEST(ReplaySnapshotTest, MalformedEntriesFailOrAreSkippedAndCounted) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad_entry_no_size.pickle", "device_traces[0] entry 2: no 'size'"},
      {"bad_entry_negative_size.pickle",
       "device_traces[0] entry 2: 'size' is negative, expected an integer >= 0"},
      {"bad_entry_text_addr.pickle",
       "device_traces[0] entry 2: 'addr' is a str, expected an integer >= 0"},
      {"bad_entry_unknown_action.pickle", "device_traces[0] entry 2: unknown action \"allocate\""},
      {"bad_entry_not_a_dict.pickle", "device_traces[0] entry 2: a list, expected a dict"},
  };
  for (const auto &c : cases) {
    Trace strict;
    std::string err;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Read(TestData(c.first), &strict, &err)) << c.first;
    EXPECT_NE(std::string::npos, err.find(c.second)) << c.first << ": " << err;
    // Lenient: the entry is skipped, the rest replays.
    replay_trace_options options = REPLAY_TRACE_OPTIONS_DEFAULT;
    options.skip_malformed = true;
    Trace lenient;
    ASSERT_EQ(GMR_OK, Read(TestData(c.first), &lenient, &err, &options)) << c.first << err;
    EXPECT_EQ(1u, lenient.trace->summary.malformed_count);
    EXPECT_EQ(1u, lenient.trace->summary.alloc_count);
    EXPECT_EQ(1u, lenient.trace->summary.free_count);
    EXPECT_NE(std::string::npos, std::string(lenient.trace->first_malformed).find(c.second))
        << lenient.trace->first_malformed;
  }
}

TEST(ReplaySnapshotTest, FromMemoryAsTheFuzzerDrivesIt) {
  const std::string bytes = ReadBytes(TestData("small_p5.pickle"));
  replay_trace *trace = nullptr;
  char err[256];
  ASSERT_EQ(GMR_OK, replay_trace_read_pickle(reinterpret_cast<const unsigned char *>(bytes.data()),
                                             bytes.size(), "memory", nullptr, &trace, err,
                                             sizeof err))
      << err;
  EXPECT_STREQ("memory", trace->path);
  EXPECT_EQ(5u, trace->summary.alloc_count);
  replay_trace_destroy(trace);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            replay_trace_read_pickle(nullptr, 0, "x", nullptr, &trace, err, sizeof err));
  EXPECT_EQ(nullptr, trace);
}

// Thread-safe as the header says: distinct reads in parallel, and one parsed
// document read from several threads at once (run under --config=tsan).
TEST(ReplaySnapshotTest, ReadsInParallelAndOneDocumentFromManyThreads) {
  const std::string bytes = ReadBytes(TestData("small_p4.pickle"));
  std::string err;
  replay_pickle *doc = nullptr;
  ASSERT_EQ(GMR_OK, Parse(bytes, &err, &doc)) << err;
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      Trace t;
      std::string message;
      bool read = Read(TestData("small_p" + std::to_string(2 + i) + ".pickle"), &t, &message) ==
                      GMR_OK &&
                  t.trace->summary.alloc_count == 5;
      replay_pickle_value traces = 0;
      bool found = replay_pickle_dict_get(doc, replay_pickle_root(doc), "device_traces", &traces) &&
                   replay_pickle_length(doc, replay_pickle_item(doc, traces, 0)) == 11;
      ok[i] = read && found ? 1 : 0;
    });
  }
  for (std::thread &t : threads) t.join();
  replay_pickle_destroy(doc);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(1, ok[i]) << i;
}

}  // namespace
