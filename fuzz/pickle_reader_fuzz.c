/*
 * fuzz/pickle_reader_fuzz.c: libFuzzer target for the snapshot pickle reader
 * of tools/replay (tools/replay/pickle.h, and the device_traces walk of
 * tools/replay/trace_snapshot.c through replay_trace_read_pickle()).
 *
 * Every input must be answered with GMR_OK or an error message, never a
 * crash, a leak, an out-of-bounds read or undefined behaviour. A parsed
 * document is read back whole (every value, every container item and dict
 * key), so the accessors are checked on whatever the parser accepted.
 *
 * Self-contained build (clang with libFuzzer; from the repository root):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -fno-sanitize-recover=undefined -Iinclude -I. \
 *     fuzz/pickle_reader_fuzz.c tools/replay/pickle.c tools/replay/trace.c \
 *     tools/replay/trace_build.c tools/replay/trace_csv.c \
 *     tools/replay/trace_snapshot.c tools/replay/line_reader.c \
 *     util/u64_map.c -lz -o /tmp/pickle_reader_fuzz
 *   /tmp/pickle_reader_fuzz -max_len=65536 -max_total_time=60 \
 *     fuzz/corpus/pickle_reader
 * (Nothing else of gmr is linked: the reader uses gmr/status.h only.)
 * The seed corpus holds snapshot-shaped pickles of protocols 2 to 5 written
 * by tools/replay/testdata/make_snapshots.py, and small hand-made ones.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tools/replay/pickle.h"
#include "tools/replay/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read every value of the document, so that a bad index or offset the
 * parser let through shows up under the sanitizers. */
static uint64_t walk(const replay_pickle *doc) {
  uint64_t sum = 0;
  replay_pickle_value root = replay_pickle_root(doc);
  /* Values are numbered densely from 0; the root is one of them, and every
   * item of a container is too. Walk breadth-first from the root with a
   * small budget (cycles through the memo are possible). */
  replay_pickle_value queue[4096];
  size_t head = 0, tail = 0;
  queue[tail++] = root;
  while (head < tail) {
    replay_pickle_value v = queue[head++];
    replay_pickle_type type = replay_pickle_type_of(doc, v);
    sum += (uint64_t)type + (uint64_t)strlen(replay_pickle_type_name(type));
    uint64_t number = 0;
    if (replay_pickle_get_u64(doc, v, &number)) sum += number;
    const char *text = NULL;
    size_t length = 0;
    if (replay_pickle_get_str(doc, v, &text, &length) && length > 0) {
      sum += (unsigned char)text[0] + (unsigned char)text[length - 1];
    }
    size_t n = replay_pickle_length(doc, v);
    for (size_t i = 0; i < n; ++i) {
      replay_pickle_value item = type == REPLAY_PICKLE_DICT ? replay_pickle_dict_key(doc, v, i)
                                                             : replay_pickle_item(doc, v, i);
      if (tail < sizeof queue / sizeof queue[0]) queue[tail++] = item;
    }
    if (type == REPLAY_PICKLE_DICT) {
      replay_pickle_value found = 0;
      if (replay_pickle_dict_get(doc, v, "device_traces", &found)) sum += found;
    }
  }
  return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  replay_pickle *doc = NULL;
  if (replay_pickle_parse(data, size, &doc, err, sizeof err) == GMR_OK) {
    volatile uint64_t sink = walk(doc);
    (void)sink;
    replay_pickle_destroy(doc);
  }
  /* The whole snapshot path: strict, lenient, and with a device chosen. */
  replay_trace_options options[3] = {REPLAY_TRACE_OPTIONS_DEFAULT, REPLAY_TRACE_OPTIONS_DEFAULT,
                                     REPLAY_TRACE_OPTIONS_DEFAULT};
  options[1].skip_malformed = true;
  options[2].snapshot_device = 1;
  for (size_t i = 0; i < 3; ++i) {
    replay_trace *trace = NULL;
    if (replay_trace_read_pickle(data, size, "fuzz", &options[i], &trace, err, sizeof err) ==
        GMR_OK) {
      volatile size_t events = trace->event_count;
      (void)events;
      replay_trace_destroy(trace);
    }
  }
  return 0;
}
