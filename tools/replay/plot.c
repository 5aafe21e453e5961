/*
 * tools/replay/plot.c: see plot.h. Plain SVG 1.1 written with fprintf: no
 * script, no external font, stylesheet or image.
 */
#include "tools/replay/plot.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 960.0
#define LEFT 88.0
#define RIGHT 28.0
#define TOP 70.0
#define PLOT_HEIGHT 340.0
#define BELOW_AXIS 52.0
#define LEGEND_LINE 20.0
#define Y_TICKS 6

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
#define PALETTE_COUNT (sizeof palette / sizeof palette[0])

/* Where the data goes on the page. */
typedef struct frame {
  double x0, y0, w, h;
  size_t total_events; /* events over all passes */
  double y_max_bytes;  /* the top of the y axis */
} frame;

/* One curve: held[i] for i < count, or live[i % period] (the trace's live
 * bytes, the same every pass). */
typedef struct series {
  const size_t *values;
  size_t count;
  size_t period; /* 0: values has `count` entries; else repeat values[0..period) */
} series;

static size_t value_at(const series *s, size_t i) {
  return s->period == 0 ? s->values[i] : s->values[i % s->period];
}

replay_plot_format replay_plot_format_of_path(const char *path) {
  if (path == NULL) return REPLAY_PLOT_UNKNOWN;
  const char *dot = strrchr(path, '.');
  if (dot == NULL || strchr(dot, '/') != NULL) return REPLAY_PLOT_UNKNOWN;
  char ext[8] = "";
  size_t n = strlen(dot + 1);
  if (n >= sizeof ext) return REPLAY_PLOT_UNKNOWN;
  for (size_t i = 0; i <= n; ++i) ext[i] = (char)tolower((unsigned char)dot[1 + i]);
  if (strcmp(ext, "svg") == 0) return REPLAY_PLOT_SVG;
  if (strcmp(ext, "html") == 0 || strcmp(ext, "htm") == 0) return REPLAY_PLOT_HTML;
  return REPLAY_PLOT_UNKNOWN;
}

/* Text for XML content and attribute values. */
static void put_escaped(FILE *out, const char *text) {
  for (const char *c = text; *c != '\0'; ++c) {
    switch (*c) {
      case '&': fputs("&amp;", out); break;
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '"': fputs("&quot;", out); break;
      case '\'': fputs("&#39;", out); break;
      default:
        /* Control characters are not allowed in XML 1.0. */
        fputc((unsigned char)*c < 0x20 ? '?' : *c, out);
        break;
    }
  }
}

/* ---- units and ticks -------------------------------------------------------- */

typedef struct unit {
  double bytes;
  const char *name;
} unit;

static unit unit_for(double max_bytes) {
  if (max_bytes >= 1024.0 * 1024.0 * 1024.0) return (unit){1024.0 * 1024.0 * 1024.0, "GiB"};
  if (max_bytes >= 1024.0 * 1024.0) return (unit){1024.0 * 1024.0, "MiB"};
  if (max_bytes >= 1024.0) return (unit){1024.0, "KiB"};
  return (unit){1.0, "B"};
}

/* A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks up to
 * `max` (> 0). */
static double nice_step(double max, int ticks) {
  double raw = max / ticks;
  double magnitude = 1.0;
  while (magnitude * 10.0 <= raw) magnitude *= 10.0;
  while (magnitude > raw) magnitude /= 10.0;
  double norm = raw / magnitude;
  double step = norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0;
  return step * magnitude;
}

/* "1.5", "12", "0.25": a tick value without trailing zeros. */
static void format_tick(double value, char *buf, size_t buf_bytes) {
  snprintf(buf, buf_bytes, "%.3f", value);
  char *end = buf + strlen(buf) - 1;
  while (end > buf && *end == '0') *end-- = '\0';
  if (end > buf && *end == '.') *end = '\0';
}

/* "7702.0 MiB" as the replay's table prints it (MiB up to any size), KiB
 * or B below a MiB. */
static void format_bytes(double bytes, char *buf, size_t buf_bytes) {
  if (bytes >= 1024.0 * 1024.0) {
    snprintf(buf, buf_bytes, "%.1f MiB", bytes / (1024.0 * 1024.0));
  } else if (bytes >= 1024.0) {
    snprintf(buf, buf_bytes, "%.1f KiB", bytes / 1024.0);
  } else {
    snprintf(buf, buf_bytes, "%.0f B", bytes);
  }
}

static double px_x(const frame *f, size_t event) {
  size_t last = f->total_events > 1 ? f->total_events - 1 : 1;
  return f->x0 + f->w * (double)event / (double)last;
}

static double px_y(const frame *f, double bytes) {
  return f->y0 + f->h - f->h * bytes / f->y_max_bytes;
}

/* ---- the curves -------------------------------------------------------------- */

/* The trace's live bytes after each of its events (one pass). */
static size_t *live_curve(const replay_trace *trace) {
  size_t *live = malloc((trace->event_count > 0 ? trace->event_count : 1) * sizeof *live);
  if (live == NULL) return NULL;
  uint64_t bytes = 0;
  for (size_t i = 0; i < trace->event_count; ++i) {
    const replay_event *e = &trace->events[i];
    if (e->op == REPLAY_OP_ALLOC) bytes += e->size_bytes;
    if (e->op == REPLAY_OP_FREE) bytes = bytes >= e->size_bytes ? bytes - e->size_bytes : 0;
    live[i] = bytes > SIZE_MAX ? SIZE_MAX : (size_t)bytes;
  }
  return live;
}

/* The largest value and the first event where it occurs. */
static size_t peak_of(const series *s, size_t *at) {
  size_t peak = 0;
  *at = 0;
  for (size_t i = 0; i < s->count; ++i) {
    size_t v = value_at(s, i);
    if (v > peak) {
      peak = v;
      *at = i;
    }
  }
  return peak;
}

/* The points of a curve: as steps when there are few events, else the
 * minimum and maximum of each pixel column in the order they occurred. */
static void put_points(FILE *out, const frame *f, const series *s) {
  size_t columns = (size_t)f->w;
  if (s->count <= 2 * columns) {
    for (size_t i = 0; i < s->count; ++i) {
      if (i > 0) fprintf(out, "%.1f,%.1f ", px_x(f, i), px_y(f, (double)value_at(s, i - 1)));
      fprintf(out, "%.1f,%.1f ", px_x(f, i), px_y(f, (double)value_at(s, i)));
    }
    return;
  }
  for (size_t c = 0; c < columns; ++c) {
    size_t begin = s->count * c / columns, end = s->count * (c + 1) / columns;
    if (begin >= end) continue;
    size_t lo = begin, hi = begin;
    for (size_t i = begin; i < end; ++i) {
      if (value_at(s, i) < value_at(s, lo)) lo = i;
      if (value_at(s, i) > value_at(s, hi)) hi = i;
    }
    size_t first = lo < hi ? lo : hi, second = lo < hi ? hi : lo;
    fprintf(out, "%.1f,%.1f ", px_x(f, first), px_y(f, (double)value_at(s, first)));
    if (second != first) {
      fprintf(out, "%.1f,%.1f ", px_x(f, second), px_y(f, (double)value_at(s, second)));
    }
  }
}

/* ---- the page ------------------------------------------------------------------- */

static void put_axes(FILE *out, const frame *f, unit u, double step_units, size_t events_per_pass,
                     size_t passes) {
  fprintf(out, "<g class=\"axes\" font-size=\"12\" fill=\"#333\">\n");
  for (int k = 0;; ++k) {
    double value = step_units * k;
    if (value * u.bytes > f->y_max_bytes * 1.0001) break;
    double y = px_y(f, value * u.bytes);
    char label[32];
    format_tick(value, label, sizeof label);
    fprintf(out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s %s</text>\n",
            f->x0, y, f->x0 + f->w, y, f->x0 - 6, y + 4, label, u.name);
  }
  double x_step = nice_step((double)(f->total_events > 0 ? f->total_events : 1), 8);
  for (int k = 0;; ++k) {
    double event = x_step * k;
    if (event > (double)(f->total_events > 0 ? f->total_events - 1 : 0)) break;
    double x = px_x(f, (size_t)event);
    char label[32];
    format_tick(event, label, sizeof label);
    fprintf(out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
            x, f->y0 + f->h, x, f->y0 + f->h + 5, x, f->y0 + f->h + 18, label);
  }
  fprintf(out,
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
          f->x0, f->y0, f->x0, f->y0 + f->h, f->x0, f->y0 + f->h, f->x0 + f->w, f->y0 + f->h);
  fprintf(out,
          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">event of the replay (allocations, "
          "frees and capture markers in trace order%s)</text>\n",
          f->x0 + f->w / 2, f->y0 + f->h + 38,
          passes > 1 ? "; passes one after another" : "");
  fprintf(out,
          "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">"
          "bytes</text>\n",
          f->y0 + f->h / 2, f->y0 + f->h / 2);
  for (size_t k = 1; k < passes; ++k) {
    double x = px_x(f, k * events_per_pass);
    fprintf(out,
            "<line class=\"pass\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" "
            "stroke-dasharray=\"4 3\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">pass %zu "
            "(warm)</text>\n",
            x, f->y0, x, f->y0 + f->h, x + 4, f->y0 + 12, k + 1);
  }
  fprintf(out, "</g>\n");
}

/* Capture windows: capture_begin to the capture_end of the same stream (or
 * the end of the pass), in every pass. */
static void put_captures(FILE *out, const frame *f, const replay_trace *trace, size_t passes) {
  fprintf(out, "<g class=\"captures\">\n");
  for (size_t p = 0; p < passes; ++p) {
    size_t base = p * trace->event_count;
    for (size_t i = 0; i < trace->event_count; ++i) {
      const replay_event *b = &trace->events[i];
      if (b->op != REPLAY_OP_CAPTURE_BEGIN) continue;
      size_t end = trace->event_count - 1;
      for (size_t j = i + 1; j < trace->event_count; ++j) {
        const replay_event *e = &trace->events[j];
        if (e->op == REPLAY_OP_CAPTURE_END && e->stream_index == b->stream_index) {
          end = j;
          break;
        }
      }
      double x0 = px_x(f, base + i), x1 = px_x(f, base + end);
      if (x1 - x0 < 2.0) x1 = x0 + 2.0; /* a short capture stays visible */
      fprintf(out,
              "<rect class=\"capture\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
              "fill=\"#ffd8a8\" fill-opacity=\"0.55\"><title>CUDA graph capture, events %zu to "
              "%zu</title></rect>\n",
              x0, f->y0, x1 - x0, f->h, base + i, base + end);
      if (p == 0) {
        fprintf(out,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#b35900\">capture</text>\n",
                x0 + 3, f->y0 + 26);
      }
    }
  }
  fprintf(out, "</g>\n");
}

/* Labels placed so far, so that the peaks of several series, often at the
 * same event, do not write over each other. */
typedef struct label_box {
  double x0, x1, y0, y1;
} label_box;

typedef struct labels {
  label_box boxes[64];
  size_t count;
} labels;

static bool overlaps(const labels *l, label_box b) {
  for (size_t i = 0; i < l->count; ++i) {
    const label_box *o = &l->boxes[i];
    if (b.x0 < o->x1 && o->x0 < b.x1 && b.y0 < o->y1 && o->y0 < b.y1) return true;
  }
  return false;
}

/* A peak marker and its value: beside the marker, right of it (left when
 * near the right edge), moved down line by line until it overlaps no other
 * label, and kept inside the plot. */
static void put_peak(FILE *out, const frame *f, const series *s, const char *color,
                     const char *name, labels *placed) {
  size_t at = 0;
  size_t peak = peak_of(s, &at);
  double x = px_x(f, at), y = px_y(f, (double)peak);
  char value[32];
  format_bytes((double)peak, value, sizeof value);
  double width = 6.6 * (double)(strlen(value) + 5); /* "peak " + value, 11 px bold */
  bool left = x + 8 + width > f->x0 + f->w;
  double x0 = left ? x - 8 - width : x + 8;
  label_box box = {x0, x0 + width, y - 12, y + 2};
  if (box.y0 < f->y0 + 2) box = (label_box){x0, x0 + width, f->y0 + 2, f->y0 + 16};
  while (overlaps(placed, box) && box.y1 + 14 < f->y0 + f->h) {
    box.y0 += 14;
    box.y1 += 14;
  }
  if (placed->count < sizeof placed->boxes / sizeof placed->boxes[0]) {
    placed->boxes[placed->count++] = box;
  }
  fprintf(out,
          "<g class=\"peak\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"white\" "
          "stroke=\"%s\" stroke-width=\"2\"><title>",
          x, y, color);
  put_escaped(out, name);
  fprintf(out,
          ": peak %s at event %zu</title></circle><text x=\"%.1f\" y=\"%.1f\" "
          "font-size=\"11\" font-weight=\"bold\" fill=\"%s\" stroke=\"white\" "
          "stroke-width=\"3\" paint-order=\"stroke\">peak %s</text></g>\n",
          value, at, box.x0, box.y1 - 3, color, value);
}

static void put_legend(FILE *out, const frame *f, const replay_trace *trace,
                       const char *const *names, const replay_result *results, size_t count,
                       const size_t *stack_peaks) {
  double y = f->y0 + f->h + BELOW_AXIS + 4;
  char value[32];
  format_bytes((double)trace->summary.peak_live_bytes, value, sizeof value);
  fprintf(out,
          "<g class=\"legend\" font-size=\"12\" fill=\"#222\">\n"
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"10\" fill=\"#d9d9d9\" "
          "stroke=\"#8c8c8c\"/><text x=\"%.1f\" y=\"%.1f\">trace: live bytes (allocated, not yet "
          "freed; the lower bound), peak %s</text>\n",
          f->x0, y - 9, f->x0 + 30, y, value);
  y += LEGEND_LINE;
  for (size_t i = 0; i < count; ++i, y += LEGEND_LINE) {
    const char *color = palette[i % PALETTE_COUNT];
    bool drawn = results[i].held_bytes != NULL && results[i].held_count > 0;
    fprintf(out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">",
            f->x0, y - 4, f->x0 + 22, y - 4, color, drawn ? "2.5" : "1", f->x0 + 30, y);
    put_escaped(out, names[i]);
    if (drawn) {
      format_bytes((double)stack_peaks[i], value, sizeof value);
      fprintf(out, ": held from below, peak %s", value);
      if (trace->summary.peak_live_bytes > 0) {
        fprintf(out, " (%.3fx live)",
                (double)stack_peaks[i] / (double)trace->summary.peak_live_bytes);
      }
    } else {
      fprintf(out, ": reports no footprint (not drawn)");
    }
    fprintf(out, "</text>\n");
  }
  if (trace->summary.capture_count > 0) {
    fprintf(out,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"10\" fill=\"#ffd8a8\"/>"
            "<text x=\"%.1f\" y=\"%.1f\">CUDA graph capture (capture_begin to capture_end)</text>\n",
            f->x0, y - 9, f->x0 + 30, y);
  }
  fprintf(out, "</g>\n");
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

static void put_svg(FILE *out, const replay_trace *trace, const char *const *names,
                    const replay_result *results, size_t count, const size_t *live,
                    size_t *stack_peaks) {
  size_t passes = 1;
  for (size_t i = 0; i < count; ++i) {
    if (results[i].pass_count > passes) passes = results[i].pass_count;
  }
  series live_series = {live, trace->event_count * passes, trace->event_count};
  size_t peak_bytes = trace->summary.peak_live_bytes;
  for (size_t i = 0; i < count; ++i) {
    series s = {results[i].held_bytes, results[i].held_count, 0};
    size_t at = 0;
    if (s.values == NULL) continue;
    size_t p = peak_of(&s, &at);
    stack_peaks[i] = p;
    if (p > peak_bytes) peak_bytes = p;
  }
  unit u = unit_for((double)(peak_bytes > 0 ? peak_bytes : 1));
  double max_units = (double)(peak_bytes > 0 ? peak_bytes : 1) / u.bytes;
  double step = nice_step(max_units * 1.05, Y_TICKS);
  double top_units = step;
  while (top_units < max_units * 1.05) top_units += step;
  frame f = {LEFT, TOP, WIDTH - LEFT - RIGHT, PLOT_HEIGHT, trace->event_count * passes,
             top_units * u.bytes};
  size_t legend_lines = count + 1 + (trace->summary.capture_count > 0 ? 1 : 0);
  double height = TOP + PLOT_HEIGHT + BELOW_AXIS + LEGEND_LINE * (double)legend_lines + 12;

  fprintf(out,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
          "<text x=\"%.1f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">Memory over the "
          "replay of ",
          WIDTH, height, WIDTH, height, LEFT);
  put_escaped(out, base_name(trace->path));
  fprintf(out,
          "</text>\n<text x=\"%.1f\" y=\"42\" font-size=\"12\" fill=\"#555\">%zu events x %zu "
          "pass%s; bytes each stack held from below after every event "
          "(gmr_resource_get_footprint)</text>\n",
          LEFT, trace->event_count, passes, passes == 1 ? "" : "es");
  put_captures(out, &f, trace, passes);
  put_axes(out, &f, u, step, trace->event_count, passes);

  /* The live area first, so that the stacks' lines lie on top of it. */
  fprintf(out, "<polygon class=\"series live\" data-stack=\"trace live bytes\" "
               "fill=\"#d9d9d9\" fill-opacity=\"0.8\" stroke=\"#8c8c8c\" stroke-width=\"1\" "
               "points=\"");
  fprintf(out, "%.1f,%.1f ", px_x(&f, 0), px_y(&f, 0));
  put_points(out, &f, &live_series);
  fprintf(out, "%.1f,%.1f\"/>\n", px_x(&f, live_series.count > 0 ? live_series.count - 1 : 0),
          px_y(&f, 0));
  for (size_t i = 0; i < count; ++i) {
    if (results[i].held_bytes == NULL || results[i].held_count == 0) continue;
    series s = {results[i].held_bytes, results[i].held_count, 0};
    fprintf(out, "<polyline class=\"series held\" data-stack=\"");
    put_escaped(out, names[i]);
    fprintf(out, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-linejoin=\"round\" "
                 "points=\"",
            palette[i % PALETTE_COUNT]);
    put_points(out, &f, &s);
    fprintf(out, "\"/>\n");
  }
  labels placed;
  placed.count = 0;
  for (size_t i = 0; i < count; ++i) {
    if (results[i].held_bytes == NULL || results[i].held_count == 0) continue;
    series s = {results[i].held_bytes, results[i].held_count, 0};
    put_peak(out, &f, &s, palette[i % PALETTE_COUNT], names[i], &placed);
  }
  put_peak(out, &f, &live_series, "#595959", "trace live bytes", &placed);
  put_legend(out, &f, trace, names, results, count, stack_peaks);
  fprintf(out, "</svg>\n");
}

gmr_status replay_plot_write(FILE *out, replay_plot_format format, const replay_trace *trace,
                             const char *const *names, const replay_result *results, size_t count,
                             char *err, size_t err_bytes) {
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  if (out == NULL || trace == NULL || (count > 0 && (names == NULL || results == NULL)) ||
      (format != REPLAY_PLOT_SVG && format != REPLAY_PLOT_HTML)) {
    if (err != NULL && err_bytes > 0) {
      snprintf(err, err_bytes, "replay_plot_write: NULL argument or unknown format");
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t *live = live_curve(trace);
  size_t *stack_peaks = calloc(count > 0 ? count : 1, sizeof *stack_peaks);
  if (live == NULL || stack_peaks == NULL) {
    free(live);
    free(stack_peaks);
    if (err != NULL && err_bytes > 0) snprintf(err, err_bytes, "out of host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (format == REPLAY_PLOT_SVG) {
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  } else {
    fprintf(out,
            "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n"
            "<head><meta charset=\"utf-8\"/><title>gmr replay: ");
    put_escaped(out, base_name(trace->path));
    fprintf(out, "</title></head>\n<body style=\"margin:16px;background:#fff\">\n");
  }
  put_svg(out, trace, names, results, count, live, stack_peaks);
  if (format == REPLAY_PLOT_HTML) fprintf(out, "</body>\n</html>\n");
  free(live);
  free(stack_peaks);
  if (fflush(out) != 0 || ferror(out)) {
    if (err != NULL && err_bytes > 0) snprintf(err, err_bytes, "writing the plot failed");
    return GMR_ERR_INTERNAL;
  }
  return GMR_OK;
}
