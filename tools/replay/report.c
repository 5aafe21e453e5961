/*
 * tools/replay/report.c: see report.h.
 */
#include "tools/replay/report.h"

#include <string.h>

#define MIB_BYTES 1048576.0

const char *replay_report_format_mib(unsigned long long bytes, char *buf, size_t buf_bytes) {
  snprintf(buf, buf_bytes, "%.1f", (double)bytes / MIB_BYTES);
  return buf;
}

static const char *plural(size_t n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

void replay_report_print_summary(FILE *out, const replay_trace *trace) {
  const replay_trace_summary *s = &trace->summary;
  char peak[32];
  fprintf(out,
          "trace %s (%s): %zu %s (%zu %s, %zu %s), %zu unmatched %s, "
          "%zu %s, sizes %llu..%llu B, peak live %s MiB, %zu live at end",
          trace->path, replay_trace_format_name(trace->format), s->request_count,
          plural(s->request_count, "request", "requests"), s->alloc_count,
          plural(s->alloc_count, "alloc", "allocs"), s->free_count,
          plural(s->free_count, "free", "frees"), s->unmatched_free_count,
          plural(s->unmatched_free_count, "free", "frees"), s->stream_count,
          plural(s->stream_count, "stream", "streams"), (unsigned long long)s->min_size_bytes,
          (unsigned long long)s->max_size_bytes,
          replay_report_format_mib(s->peak_live_bytes, peak, sizeof peak), s->live_at_end_count);
  if (s->capture_count > 0) {
    fprintf(out, ", %zu %s (%zu allocs, %zu frees inside)", s->capture_count,
            plural(s->capture_count, "capture", "captures"), s->capture_alloc_count,
            s->capture_free_count);
  }
  if (s->alloc_failure_row_count > 0) {
    fprintf(out, ", %zu 'allocate failure' rows skipped", s->alloc_failure_row_count);
  }
  if (s->malformed_count > 0) {
    fprintf(out, ", %zu malformed %s skipped", s->malformed_count,
            plural(s->malformed_count, "line", "lines"));
  }
  fputc('\n', out);
  if (s->malformed_count > 0) fprintf(out, "first malformed line: %s\n", trace->first_malformed);
}

static void print_ratio(FILE *out, int width, unsigned long long bytes, unsigned long long base) {
  if (base == 0) {
    fprintf(out, " %*s", width, "n/a");
  } else {
    fprintf(out, " %*.3f", width, (double)bytes / (double)base);
  }
}

void replay_report_print_table(FILE *out, const replay_trace *trace,
                               const char *const *stack_names, const replay_result *results,
                               size_t count) {
  static const char reference_label[] = "recorder reserved";
  int name_width = (int)strlen(reference_label);
  for (size_t i = 0; i < count; ++i) {
    int n = (int)strlen(stack_names[i]);
    if (n > name_width) name_width = n;
  }
  const unsigned long long peak_live = trace->summary.peak_live_bytes;
  char mib[32];

  fprintf(out, "%-*s %7s %7s %6s %8s %17s %17s %9s %6s\n", name_width, "stack", "allocs",
          "frees", "failed", "live@end", "alloc ns p50/p99", "free ns p50/p99", "peak MiB",
          "/live");
  for (size_t i = 0; i < count; ++i) {
    const replay_result *r = &results[i];
    char alloc_ns[40];
    char free_ns[40];
    snprintf(alloc_ns, sizeof alloc_ns, "%llu / %llu", (unsigned long long)r->alloc_p50_ns,
             (unsigned long long)r->alloc_p99_ns);
    snprintf(free_ns, sizeof free_ns, "%llu / %llu", (unsigned long long)r->free_p50_ns,
             (unsigned long long)r->free_p99_ns);
    fprintf(out, "%-*s %7zu %7zu %6zu %8zu %17s %17s", name_width, stack_names[i],
            r->alloc_count, r->free_count, replay_result_failure_count(r), r->live_at_end_count,
            alloc_ns, free_ns);
    if (r->footprint_status == GMR_OK) {
      fprintf(out, " %9s",
              replay_report_format_mib(r->footprint.peak_held_bytes, mib, sizeof mib));
      print_ratio(out, 6, r->footprint.peak_held_bytes, peak_live);
    } else {
      fprintf(out, " %9s %6s", "n/a", "n/a");
    }
    fputc('\n', out);
  }
  /* The allocator that recorded the trace, from its segment rows. */
  fprintf(out, "%-*s %7s %7s %6s %8s %17s %17s", name_width, reference_label, "", "", "", "",
          "", "");
  if (trace->summary.has_reserved_reference) {
    unsigned long long reserved = trace->summary.reference_peak_reserved_bytes;
    fprintf(out, " %9s", replay_report_format_mib(reserved, mib, sizeof mib));
    print_ratio(out, 6, reserved, peak_live);
  } else {
    fprintf(out, " %9s %6s", "n/a", "n/a");
  }
  fputc('\n', out);

  uint64_t overhead_ns = count > 0 ? results[0].timer_overhead_ns : 0;
  fprintf(out,
          "ns: host time per call (clock_gettime CLOCK_MONOTONIC) minus the timer's own "
          "overhead\n    (%llu ns, median of back-to-back reads), clamped at 0; nearest-rank "
          "percentiles.\n"
          "peak MiB: most bytes held from below (gmr_resource_get_footprint); /live: over the "
          "peak live bytes.\n",
          (unsigned long long)overhead_ns);
  for (size_t i = 0; i < count; ++i) {
    const replay_result *r = &results[i];
    if (trace->summary.capture_count == 0) break;
    fprintf(out, "%s: %zu %s begun, %zu broken or refused; %zu allocations inside, %zu served",
            stack_names[i], r->capture_count, plural(r->capture_count, "capture", "captures"),
            r->capture_failure_count, r->capture_alloc_count, r->capture_alloc_ok_count);
    if (r->has_graph_arena) {
      char capacity[32], shortfall[32];
      fprintf(out,
              "; graph arena: %llu served inside captures, %llu upstream calls during capture "
              "(%llu capture-safe growths), capacity %s MiB",
              (unsigned long long)r->arena.capture_allocation_count,
              (unsigned long long)r->arena.upstream_call_during_capture_count,
              (unsigned long long)r->arena.capture_growth_count,
              replay_report_format_mib(r->arena.peak_held_bytes, capacity, sizeof capacity));
      if (r->arena.capture_refusal_count > 0) {
        fprintf(out, ", %llu refused (needs %s MiB more)",
                (unsigned long long)r->arena.capture_refusal_count,
                replay_report_format_mib(r->arena.capture_shortfall_bytes, shortfall,
                                         sizeof shortfall));
      }
    } else {
      fprintf(out, "; no graph arena in the stack");
    }
    fputc('\n', out);
  }
  for (size_t i = 0; i < count; ++i) {
    const replay_result *r = &results[i];
    size_t failures = replay_result_failure_count(r);
    if (failures == 0) continue;
    fprintf(out, "%s: %zu %s (%zu allocate, %zu deallocate, %zu skipped frees); first: %s\n",
            stack_names[i], failures, plural(failures, "failure", "failures"),
            r->failed_alloc_count, r->failed_free_count, r->skipped_free_count,
            r->first_failure);
  }
}
