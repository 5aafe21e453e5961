/*
 * tools/replay/trace_snapshot.c: a PyTorch memory snapshot pickle
 * (`torch.cuda.memory._snapshot()` saved with `pickle.dump`) into rows.
 *
 * The snapshot is a dict; its 'device_traces' is a list with one list per
 * device of trace entries, each a dict with 'action', 'addr', 'size',
 * 'stream', 'time_us' and 'frames' (PyTorch's
 * c10/cuda/CUDACachingAllocator.cpp TraceEntry, converted in
 * torch/csrc/cuda/memory_snapshot.cpp). The same actions as the CSV export
 * (which is this list written as text), so the rows mean the same; 'frames'
 * and 'time_us' are not needed to replay. Entries are numbered from 1 in
 * messages ("entry 17").
 */
#include "tools/replay/trace_snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/replay/pickle.h"

/* "a dict", "an int", "None": a type for a message. */
static const char *a_type(replay_pickle_type type) {
  static const char *const names[] = {"None",   "a bool", "an int",  "a float", "a str",
                                      "bytes",  "a list", "a tuple", "a dict"};
  return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "something else";
}

static const char *const required_fields[] = {"action", "addr", "size", "stream"};

/* One entry into a row; LINE_MALFORMED with b->reason set. An 'oom' entry
 * has 'device_free' where the others have 'addr' (PyTorch's
 * memory_snapshot.cpp), so its address is not required. */
static line_result entry_row(trace_builder *b, const replay_pickle *doc, replay_pickle_value entry,
                             row *out) {
  if (replay_pickle_type_of(doc, entry) != REPLAY_PICKLE_DICT) {
    return trace_build_malformed(b, "%s, expected a dict",
                                 a_type(replay_pickle_type_of(doc, entry)));
  }
  replay_pickle_value fields[4];
  if (!replay_pickle_dict_get(doc, entry, required_fields[0], &fields[0])) {
    return trace_build_malformed(b, "no '%s'", required_fields[0]);
  }
  const char *action = NULL;
  size_t length = 0;
  if (replay_pickle_type_of(doc, fields[0]) != REPLAY_PICKLE_STR ||
      !replay_pickle_get_str(doc, fields[0], &action, &length)) {
    return trace_build_malformed(b, "'action' is %s, expected a str",
                                 a_type(replay_pickle_type_of(doc, fields[0])));
  }
  if (!trace_build_pytorch_action(action, length, &out->kind)) {
    char shown[48];
    return trace_build_malformed(b, "unknown action \"%s\"",
                                 trace_build_printable(action, length, shown, sizeof shown));
  }
  bool oom = length == 3 && memcmp(action, "oom", 3) == 0;
  for (size_t i = 1; i < 4; ++i) {
    if (!replay_pickle_dict_get(doc, entry, required_fields[i], &fields[i])) {
      if (i == 1 && oom) continue;
      return trace_build_malformed(b, "no '%s'", required_fields[i]);
    }
  }
  uint64_t *numbers[3] = {&out->addr, &out->size_bytes, &out->stream};
  for (size_t i = 1; i < 4; ++i) {
    if (i == 1 && oom) continue; /* ignored row: the address does not matter */
    if (replay_pickle_type_of(doc, fields[i]) != REPLAY_PICKLE_INT ||
        !replay_pickle_get_u64(doc, fields[i], numbers[i - 1])) {
      replay_pickle_type type = replay_pickle_type_of(doc, fields[i]);
      return trace_build_malformed(
          b, "'%s' is %s, expected an integer >= 0", required_fields[i],
          type == REPLAY_PICKLE_INT ? "negative" : a_type(type));
    }
  }
  return LINE_OK;
}

/* The list of entries to replay: device `wanted`, or the only device with
 * entries when wanted < 0. Returns false with err set. */
static bool choose_device(const replay_pickle *doc, replay_pickle_value traces, int wanted,
                          const char *path, replay_pickle_value *out, int *out_device, char *err,
                          size_t err_bytes) {
  size_t devices = replay_pickle_length(doc, traces);
  for (size_t d = 0; d < devices; ++d) {
    replay_pickle_value list = replay_pickle_item(doc, traces, d);
    replay_pickle_type type = replay_pickle_type_of(doc, list);
    if (type != REPLAY_PICKLE_LIST && type != REPLAY_PICKLE_TUPLE) {
      trace_build_set_error(err, err_bytes,
                            "%s: device_traces[%zu] is %s, expected a list of trace entries",
                            path, d, a_type(type));
      return false;
    }
  }
  if (wanted >= 0) {
    if ((size_t)wanted >= devices) {
      trace_build_set_error(err, err_bytes,
                            "%s: no device %d in the snapshot: it has traces for %zu device%s "
                            "(0..%zu); choose one with --snapshot-device",
                            path, wanted, devices, devices == 1 ? "" : "s",
                            devices > 0 ? devices - 1 : 0);
      return false;
    }
    *out = replay_pickle_item(doc, traces, (size_t)wanted);
    *out_device = wanted;
    return true;
  }
  char list[160] = "";
  size_t used = 0, nonempty = 0;
  for (size_t d = 0; d < devices; ++d) {
    size_t n = replay_pickle_length(doc, replay_pickle_item(doc, traces, d));
    if (n == 0) continue;
    if (nonempty == 0) {
      *out = replay_pickle_item(doc, traces, d);
      *out_device = (int)d;
    }
    nonempty++;
    if (used < sizeof list) {
      int w = snprintf(list + used, sizeof list - used, "%s%zu: %zu entries",
                       nonempty == 1 ? "" : ", ", d, n);
      used += w > 0 ? (size_t)w : 0;
    }
  }
  if (nonempty == 0) {
    trace_build_set_error(err, err_bytes,
                          "%s: no allocations in the snapshot (device_traces is empty: was "
                          "torch.cuda.memory._record_memory_history() on?)",
                          path);
    return false;
  }
  if (nonempty > 1) {
    trace_build_set_error(err, err_bytes,
                          "%s: the snapshot has traces for %zu devices (%s); choose one with "
                          "--snapshot-device",
                          path, nonempty, list);
    return false;
  }
  return true;
}

/* The keys of the root dict, for the message when device_traces is missing. */
static void list_keys(const replay_pickle *doc, replay_pickle_value dict, char *out,
                      size_t out_bytes) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < replay_pickle_length(doc, dict) && used + 1 < out_bytes; ++i) {
    const char *text = NULL;
    size_t length = 0;
    char shown[48];
    if (!replay_pickle_get_str(doc, replay_pickle_dict_key(doc, dict, i), &text, &length)) {
      continue;
    }
    int w = snprintf(out + used, out_bytes - used, "%s'%s'", used == 0 ? "" : ", ",
                     trace_build_printable(text, length, shown, sizeof shown));
    used += w > 0 ? (size_t)w : 0;
  }
}

static gmr_status read_entries(trace_builder *b, const replay_pickle *doc, const char *path,
                               const replay_trace_options *options, char *err, size_t err_bytes) {
  replay_trace *t = b->trace;
  replay_pickle_value root = replay_pickle_root(doc);
  replay_pickle_value traces = 0;
  if (replay_pickle_type_of(doc, root) != REPLAY_PICKLE_DICT) {
    trace_build_set_error(err, err_bytes,
                          "%s: not a PyTorch memory snapshot: the pickle holds %s, expected a "
                          "dict with 'device_traces'",
                          path, a_type(replay_pickle_type_of(doc, root)));
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (!replay_pickle_dict_get(doc, root, "device_traces", &traces)) {
    char keys[200];
    list_keys(doc, root, keys, sizeof keys);
    trace_build_set_error(err, err_bytes,
                          "%s: not a PyTorch memory snapshot: no 'device_traces' key (keys: %s)",
                          path, keys[0] != '\0' ? keys : "none");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  replay_pickle_type type = replay_pickle_type_of(doc, traces);
  if (type != REPLAY_PICKLE_LIST && type != REPLAY_PICKLE_TUPLE) {
    trace_build_set_error(err, err_bytes, "%s: 'device_traces' is %s, expected a list", path,
                          a_type(type));
    return GMR_ERR_INVALID_ARGUMENT;
  }
  replay_pickle_value entries = 0;
  int device = 0;
  if (!choose_device(doc, traces, options->snapshot_device, path, &entries, &device, err,
                     err_bytes)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  t->snapshot_device = device;
  size_t count = replay_pickle_length(doc, entries);
  for (size_t i = 0; i < count; ++i) {
    uint64_t number = (uint64_t)i + 1;
    t->summary.line_count = number;
    row r = {ROW_IGNORED, 0, 0, 0};
    line_result result = entry_row(b, doc, replay_pickle_item(doc, entries, i), &r);
    if (result == LINE_OK) result = trace_build_apply(b, &r, number);
    if (result == LINE_NO_MEMORY) {
      trace_build_set_error(err, err_bytes, "%s: entry %" PRIu64 ": out of host memory", path,
                            number);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    if (result != LINE_MALFORMED) continue;
    if (!options->skip_malformed) {
      trace_build_set_error(err, err_bytes, "%s: device_traces[%d] entry %" PRIu64 ": %s", path,
                            device, number, b->reason);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    if (t->summary.malformed_count == 0) {
      snprintf(t->first_malformed, sizeof t->first_malformed,
               "%s: device_traces[%d] entry %" PRIu64 ": %s", path, device, number, b->reason);
    }
    t->summary.malformed_count++;
  }
  if (t->summary.alloc_count == 0) {
    trace_build_set_error(err, err_bytes,
                          "%s: no allocations in device_traces[%d] (%" PRIu64 " entries read%s)",
                          path, device, t->summary.line_count,
                          t->summary.malformed_count > 0 ? ", malformed entries skipped" : "");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

gmr_status trace_snapshot_read(trace_builder *b, const unsigned char *data, size_t size,
                               const char *path, const replay_trace_options *options, char *err,
                               size_t err_bytes) {
  b->trace->format = REPLAY_TRACE_FORMAT_SNAPSHOT;
  replay_pickle *doc = NULL;
  char reason[256];
  gmr_status st = replay_pickle_parse(data, size, &doc, reason, sizeof reason);
  if (st != GMR_OK) {
    trace_build_set_error(err, err_bytes, "%s: pickle: %s", path,
                          st == GMR_ERR_OUT_OF_MEMORY ? "out of host memory" : reason);
    return st;
  }
  st = read_entries(b, doc, path, options, err, err_bytes);
  replay_pickle_destroy(doc);
  return st;
}
