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

/* One row: a pass of a stack (pass == NULL: a result without passes, from
 * its run totals). */
static void print_row(FILE *out, int name_width, const char *name, const replay_result *r,
                      const replay_pass_result *pass, size_t pass_index,
                      unsigned long long peak_live) {
  char label[16] = "-", mean[24] = "n/a", alloc_ns[40], free_ns[40], mib[32], frag[16] = "n/a";
  size_t allocs = r->alloc_count, frees = r->free_count, failures = replay_result_failure_count(r);
  size_t live = r->live_at_end_count;
  uint64_t a50 = r->alloc_p50_ns, a99 = r->alloc_p99_ns, f50 = r->free_p50_ns,
           f99 = r->free_p99_ns;
  bool has_peak = r->footprint_status == GMR_OK;
  unsigned long long peak = r->footprint.peak_held_bytes;
  if (pass != NULL) {
    snprintf(label, sizeof label, "%zu %s", pass_index + 1, pass_index == 0 ? "cold" : "warm");
    allocs = pass->alloc_count;
    frees = pass->free_count;
    failures = pass->failure_count;
    live = pass->live_at_end_count;
    a50 = pass->alloc_p50_ns;
    a99 = pass->alloc_p99_ns;
    f50 = pass->free_p50_ns;
    f99 = pass->free_p99_ns;
    has_peak = pass->has_peak_held;
    peak = pass->peak_held_bytes;
    if (pass->wall_call_count > 0) snprintf(mean, sizeof mean, "%.0f", replay_pass_mean_ns(pass));
    double f = 0;
    if (replay_pass_fragmentation(pass, &f)) snprintf(frag, sizeof frag, "%.3f", f);
  }
  snprintf(alloc_ns, sizeof alloc_ns, "%llu / %llu", (unsigned long long)a50,
           (unsigned long long)a99);
  snprintf(free_ns, sizeof free_ns, "%llu / %llu", (unsigned long long)f50,
           (unsigned long long)f99);
  fprintf(out, "%-*s %-6s %7zu %7zu %6zu %8zu %8s %17s %17s", name_width, name, label, allocs,
          frees, failures, live, mean, alloc_ns, free_ns);
  if (has_peak) {
    fprintf(out, " %9s", replay_report_format_mib(peak, mib, sizeof mib));
    print_ratio(out, 6, peak, peak_live);
  } else {
    fprintf(out, " %9s %6s", "n/a", "n/a");
  }
  fprintf(out, " %9s\n", frag);
}

void replay_report_print_table(FILE *out, const replay_trace *trace,
                               const char *const *stack_names, const replay_result *results,
                               size_t count) {
  static const char reference_label[] = "recorder reserved";
  int name_width = (int)strlen(reference_label) - 7; /* the reference spans the pass column */
  for (size_t i = 0; i < count; ++i) {
    int n = (int)strlen(stack_names[i]);
    if (n > name_width) name_width = n;
  }
  const unsigned long long peak_live = trace->summary.peak_live_bytes;
  char mib[32];

  fprintf(out, "%-*s %-6s %7s %7s %6s %8s %8s %17s %17s %9s %6s %9s\n", name_width, "stack",
          "pass", "allocs", "frees", "failed", "live@end", "mean ns", "alloc ns p50/p99",
          "free ns p50/p99", "peak MiB", "/live", "frag@peak");
  for (size_t i = 0; i < count; ++i) {
    const replay_result *r = &results[i];
    if (r->pass_count == 0) {
      print_row(out, name_width, stack_names[i], r, NULL, 0, peak_live);
      continue;
    }
    for (size_t k = 0; k < r->pass_count; ++k) {
      print_row(out, name_width, k == 0 ? stack_names[i] : "", r, &r->passes[k], k, peak_live);
    }
  }
  /* The allocator that recorded the trace, from its segment rows. */
  fprintf(out, "%-*s %7s %7s %6s %8s %8s %17s %17s", name_width + 7, reference_label, "", "", "",
          "", "", "", "");
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
          "pass 1 starts on a fresh stack (cold); pass 2.. on what the earlier passes left it "
          "(warm).\n"
          "mean ns: wall time of the pass over its calls, no per-call timer inside (a second, "
          "fresh stack\n    replays the same passes with the clock read only at each pass's "
          "start and end).\n"
          "p50/p99: host time per call (clock_gettime CLOCK_MONOTONIC) minus the timer's own "
          "overhead\n    (%llu ns, median of back-to-back reads), clamped at 0; nearest-rank "
          "percentiles.\n"
          "peak MiB: most bytes held from below during the pass (gmr_resource_get_footprint); "
          "/live: over the\n    peak live bytes. frag@peak: 1 - largest free block / free bytes "
          "(gmr_resource_get_memory_info)\n    when the held bytes first reached the pass's "
          "peak; n/a: no resource of the stack answers.\n",
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
      if (r->arena.adopted_chunk_count > 0 || r->arena.returned_chunk_count > 0) {
        /* The graph pool: chunks that were the layer below's free blocks are
         * part of its footprint, not added to it. */
        char adopted[32];
        fprintf(out, " (%llu free blocks of the layer below taken, %s MiB; %llu chunks given back)",
                (unsigned long long)r->arena.adopted_chunk_count,
                replay_report_format_mib(r->arena.adopted_bytes, adopted, sizeof adopted),
                (unsigned long long)r->arena.returned_chunk_count);
      }
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
    if (replay_result_failure_count(r) == 0) continue;
    /* The wall-clock run replays the same calls: its failures are the same
     * ones unless the two runs differed, which is then said. */
    size_t failures = replay_result_failure_count(r) - r->clock_run_failure_count;
    fprintf(out, "%s: %zu %s (%zu allocate, %zu deallocate, %zu skipped frees)", stack_names[i],
            failures, plural(failures, "failure", "failures"), r->failed_alloc_count,
            r->failed_free_count, r->skipped_free_count);
    bool clocked = r->pass_count > 0 && r->passes[0].wall_call_count > 0;
    if (r->clock_run_failure_count != failures && (clocked || r->clock_run_failure_count > 0)) {
      fprintf(out, "; the wall-clock run had %zu", r->clock_run_failure_count);
    }
    fprintf(out, "; first: %s\n", r->first_failure);
  }
}

void replay_report_print_calls(FILE *out, const char *const *stack_names,
                               const replay_result *results, size_t count, bool simulated) {
  int name_width = 5; /* "stack" */
  for (size_t i = 0; i < count; ++i) {
    int n = (int)strlen(stack_names[i]);
    if (n > name_width) name_width = n;
  }
  fprintf(out, "\ndriver calls per pass, while the pass's events replayed:\n%-*s %-6s", name_width,
          "stack", "pass");
  for (int k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) {
    fprintf(out, " %7s", replay_call_kind_name((replay_call_kind)k));
  }
  fprintf(out, " %8s\n", "total");
  for (size_t i = 0; i < count; ++i) {
    const replay_result *r = &results[i];
    for (size_t p = 0; p < r->pass_count; ++p) {
      const replay_calls *c = &r->passes[p].calls;
      char label[32];
      snprintf(label, sizeof label, "%zu %s", p + 1, p == 0 ? "cold" : "warm");
      fprintf(out, "%-*s %-6s", name_width, p == 0 ? stack_names[i] : "", label);
      for (int k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) {
        fprintf(out, " %7llu", (unsigned long long)c->count[k]);
      }
      fprintf(out, " %8llu\n", (unsigned long long)replay_calls_total(c));
    }
  }
  fprintf(out, "counted %s; the clean-up after each pass is not included.\n",
          simulated ? "by the simulation of the CUDA layer"
                    : "by the CUDA layer's counting view (every call, whatever it returned)");
  /* Each column's functions, lines kept under 100 characters. */
  size_t width = 0;
  for (int k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) {
    char item[160];
    int n = snprintf(item, sizeof item, "%s: %s%s", replay_call_kind_name((replay_call_kind)k),
                     replay_call_kind_functions((replay_call_kind)k),
                     k + 1 == REPLAY_CALL_KIND_COUNT ? "." : ";");
    if (n < 0) continue;
    if (width > 0 && width + 1 + (size_t)n > 100) {
      fputc('\n', out);
      width = 0;
    }
    fprintf(out, "%s%s", width > 0 ? " " : "", item);
    width += (width > 0 ? 1 : 0) + (size_t)n;
  }
  fputc('\n', out);
}
