#!/usr/bin/env python3
"""Replay an allocation trace through PyTorch's caching allocator (GPU machine):
the anchor beside gmr's replay (tools/replay), in the same columns.

Each configuration of PyTorch's allocator runs in a process of its own,
with PYTORCH_CUDA_ALLOC_CONF set before PyTorch initialises CUDA (it reads it
once): by default the classic segments (expandable_segments:False) and
expandable segments (expandable_segments:True). Each process reads the
trace (tools/frameworks/trace_events.py: the formats and rules of
tools/replay) and replays it --passes times, every allocation through
torch.cuda.caching_allocator_alloc and every free through
torch.cuda.caching_allocator_delete (--entry public), or through the
bindings those two call, torch._C._cuda_cudaCachingAllocator_raw_alloc /
_raw_delete (--entry raw, the default: the allocator without the Python
wrapper's device switch). Streams as tools/replay maps them: recorded
stream 0 is the device's default stream, every other recorded value a
torch.cuda.Stream of its own; a free goes back on its allocation's stream
(PyTorch has no stream argument at free). capture_begin / capture_end rows
are skipped and counted (compare with tools/replay --capture off): a
capture would need kernels to capture and PyTorch's private pools.

Per pass (pass 1 on a fresh allocator, the cold start; 2.. warm), outside
the timed loop: the peaks are reset first; afterwards the device is read,
then what the trace left live is freed and the device synchronised.
  mean ns     wall time of the pass's calls over the calls made (allocations
              and frees), with the Python loop around them;
  py ns       the same loop over calls that do nothing: subtract it for the
              allocator's own cost;
  peak MiB    torch.cuda.memory_stats()["reserved_bytes.all.peak"] of the
              pass (what the allocator held from CUDA); /live over the
              trace's peak of live bytes;
  alloc MiB   "allocated_bytes.all.peak" (blocks as PyTorch rounds them);
  device MiB  device memory in use at the pass's end (torch.cuda.mem_get_info:
              total - free), the CUDA context and other processes included;
              the figure before the first pass is printed beside the table.
Columns tools/replay has and this replay cannot measure (per-call
percentiles, fragmentation) print n/a.

Usage (repository root, on the GPU machine):
  python3 tools/frameworks/torch_replay.py [--config CONF ...] [--passes N]
      [--device D] [--entry raw|public] [--skip-malformed]
      [--snapshot-device N] [--json FILE] TRACE
  e.g. python3 tools/frameworks/torch_replay.py --passes 3 tools/traces/gpt2_train.csv.gz
Exit status: 0 every replay ran; 1 a process failed (no GPU, no PyTorch,
an unreadable trace); 2 a command-line error.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_events  # noqa: E402 (next to this file)

DEFAULT_CONFIGS = ("expandable_segments:False", "expandable_segments:True")
RESULT_MARK = "torch_replay result: "
MIB = 1048576.0
MAX_PASSES = 1000


def _entries(torch: Any, device: int,
             entry: str) -> Tuple[Callable[..., int], Callable[[int], None]]:
    """(alloc(size, stream int) -> ptr, delete(ptr)) for --entry."""
    cuda = torch.cuda
    if entry == "raw":
        raw_alloc = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_alloc", None)
        raw_delete = getattr(torch._C, "_cuda_cudaCachingAllocator_raw_delete", None)
        if raw_alloc is None or raw_delete is None:
            raise RuntimeError("this PyTorch has no torch._C._cuda_cudaCachingAllocator_raw_alloc"
                               "/_raw_delete: use --entry public")
        return raw_alloc, raw_delete
    return (lambda size, stream: cuda.caching_allocator_alloc(size, device, stream),
            cuda.caching_allocator_delete)


def _loop(events: Sequence[Tuple[int, int, int, int]], alloc: Callable[..., int],
          delete: Callable[[int], None], stream_ids: List[int], pointers: List[Optional[int]],
          oom: Any) -> Tuple[int, int, int, int, int]:
    """Replay the events once; (ns, allocations made, frees made, failed
    allocations, skipped frees). Capture markers are skipped."""
    allocs = frees = failed = skipped = 0
    start = time.perf_counter_ns()
    for op, index, size, stream in events:
        if op == 0:
            try:
                pointers[index] = alloc(size, stream_ids[stream])
            except oom:
                failed += 1
            allocs += 1
        elif op == 1:
            p = pointers[index]
            if p is None:
                skipped += 1
                continue
            delete(p)
            pointers[index] = None
            frees += 1
    return time.perf_counter_ns() - start, allocs, frees, failed, skipped


def run_passes(torch: Any, trace: trace_events.Trace, passes: int, device: int = 0,
               entry: str = "raw") -> Dict[str, Any]:
    """Replay `trace` `passes` times through PyTorch's current allocator.

    Args:
        torch: the torch module (or a stand-in with the same functions).
        trace: a trace_events.Trace.
        passes: how many times (1..MAX_PASSES).
        device: the CUDA device index.
        entry: "raw" or "public" (see the module's docstring).

    Returns:
        A dict: device, device name, torch version, baseline_used_bytes,
        loop_ns (the no-op loop's mean per call), and passes: one dict per
        pass (allocs, frees, failed, skipped_frees, live_at_end, wall_ns,
        calls, mean_ns, peak_reserved_bytes, peak_allocated_bytes,
        device_used_bytes).

    Raises:
        RuntimeError: no CUDA device, or the entry is missing.
    """
    cuda = torch.cuda
    if not cuda.is_available():
        raise RuntimeError("no CUDA device: torch.cuda.is_available() is False")
    cuda.set_device(device)
    alloc, delete = _entries(torch, device, entry)
    oom = getattr(cuda, "OutOfMemoryError", RuntimeError)
    streams = [cuda.default_stream(device) if value == 0 else cuda.Stream(device=device)
               for value in trace.streams]
    stream_ids = [s.cuda_stream for s in streams]
    free_bytes, total_bytes = cuda.mem_get_info(device)
    result = {"device": device, "device_name": cuda.get_device_name(device),
              "torch_version": torch.__version__, "entry": entry,
              "baseline_used_bytes": total_bytes - free_bytes, "passes": []}
    # The Python loop's own cost, over calls that do nothing.
    fake = iter(range(1, 1 << 62))
    ns, a, f, _, _ = _loop(trace.events, lambda size, s: next(fake), lambda p: None, stream_ids,
                           [None] * trace.alloc_count, oom)
    result["loop_ns"] = ns / max(1, a + f)
    for _ in range(passes):
        cuda.synchronize()
        cuda.reset_peak_memory_stats(device)
        pointers = [None] * trace.alloc_count
        ns, allocs, frees, failed, skipped = _loop(trace.events, alloc, delete, stream_ids,
                                                   pointers, oom)
        cuda.synchronize()
        stats = cuda.memory_stats(device)
        free_bytes, total_bytes = cuda.mem_get_info(device)
        left = [p for p in pointers if p is not None]
        for p in left:
            delete(p)
        cuda.synchronize()
        calls = allocs + frees
        result["passes"].append({
            "allocs": allocs, "frees": frees, "failed": failed, "skipped_frees": skipped,
            "live_at_end": len(left), "wall_ns": ns, "calls": calls,
            "mean_ns": ns / calls if calls else 0.0,
            "peak_reserved_bytes": stats.get("reserved_bytes.all.peak", 0),
            "peak_allocated_bytes": stats.get("allocated_bytes.all.peak", 0),
            "device_used_bytes": total_bytes - free_bytes,
        })
    return result


def summary(trace: trace_events.Trace) -> str:
    """tools/replay's summary line for `trace`.

    Args:
        trace: the trace read.

    Returns:
        The line (and the first malformed line when some were skipped).
    """
    def n(count: int, one: str, many: str) -> str:
        return "%d %s" % (count, one if count == 1 else many)
    text = ("trace %s (%s): %s (%s, %s), %s, %s, sizes %d..%d B, peak live %.1f MiB, "
            "%d live at end" % (trace.path, trace.format,
                                n(trace.request_count, "request", "requests"),
                                n(trace.alloc_count, "alloc", "allocs"),
                                n(trace.free_count, "free", "frees"),
                                n(trace.unmatched_free_count, "unmatched free", "unmatched frees"),
                                n(len(trace.streams), "stream", "streams"), trace.min_size,
                                trace.max_size, trace.peak_live_bytes / MIB,
                                trace.live_at_end_count))
    if trace.capture_count:
        text += ", %s skipped (their calls replayed outside any capture)" % n(
            trace.capture_count, "capture", "captures")
    if trace.alloc_failure_row_count:
        text += ", %d 'allocate failure' rows skipped" % trace.alloc_failure_row_count
    if trace.malformed_count:
        text += ", %s skipped\nfirst malformed line: %s" % (
            n(trace.malformed_count, "malformed line", "malformed lines"), trace.first_malformed)
    return text


def _mib(value: float) -> str:
    return "%.1f" % (value / MIB)


def table(trace: trace_events.Trace, results: List[Tuple[str, Dict[str, Any]]]) -> str:
    """tools/replay's table, one row per pass of each configuration, and the notes.

    Args:
        trace: the trace_events.Trace replayed.
        results: [(name, run_passes() result)].

    Returns:
        The text.
    """
    width = max([len("recorder reserved") - 7] + [len(name) for name, _ in results])
    head = "%-*s %-6s %7s %7s %6s %8s %8s %17s %17s %9s %6s %9s %9s %10s" % (
        width, "stack", "pass", "allocs", "frees", "failed", "live@end", "mean ns",
        "alloc ns p50/p99", "free ns p50/p99", "peak MiB", "/live", "frag@peak", "alloc MiB",
        "device MiB")
    lines = [head + " %7s" % "py ns"]
    live = trace.peak_live_bytes
    for name, r in results:
        for k, p in enumerate(r["passes"]):
            ratio = "%.3f" % (p["peak_reserved_bytes"] / live) if live else "n/a"
            lines.append("%-*s %-6s %7d %7d %6d %8d %8.0f %17s %17s %9s %6s %9s %9s %10s %7.0f" % (
                width, name if k == 0 else "", "%d %s" % (k + 1, "cold" if k == 0 else "warm"),
                p["allocs"], p["frees"], p["failed"], p["live_at_end"],
                p["mean_ns"], "n/a", "n/a", _mib(p["peak_reserved_bytes"]), ratio, "n/a",
                _mib(p["peak_allocated_bytes"]), _mib(p["device_used_bytes"]), r["loop_ns"]))
    reserved = trace.reference_peak_reserved_bytes
    lines.append("%-*s %7s %7s %6s %8s %8s %17s %17s %9s %6s" % (
        width + 7, "recorder reserved", "", "", "", "", "", "", "",
        _mib(reserved) if reserved is not None else "n/a",
        "%.3f" % (reserved / live) if reserved is not None and live else "n/a"))
    for name, r in results:
        lines.append("%s: %s, torch %s, entry %s; device memory in use before the first pass "
                     "%s MiB" % (name, r["device_name"], r["torch_version"], r["entry"],
                                 _mib(r["baseline_used_bytes"])))
        skipped = sum(p["skipped_frees"] for p in r["passes"])
        if skipped:
            lines.append("%s: %d frees of failed allocations skipped" % (name, skipped))
    lines.append(
        "mean ns: wall time of the pass's calls over the calls made, the Python loop included; "
        "py ns: the same\n    loop over calls that do nothing. peak MiB: reserved_bytes.all.peak "
        "of the pass (/live: over the\n    trace's peak live bytes); alloc MiB: "
        "allocated_bytes.all.peak; device MiB: cudaMemGetInfo total - free\n    at the pass's "
        "end. failed: allocations that raised OutOfMemoryError (their frees are skipped).")
    return "\n".join(lines)


def _worker(args: argparse.Namespace) -> int:
    """One configuration in this process: print the result as one JSON line."""
    trace = trace_events.read(args.trace, args.skip_malformed, args.snapshot_device)
    import torch  # noqa: PLC0415 (after PYTORCH_CUDA_ALLOC_CONF is set, by the parent)
    result = run_passes(torch, trace, args.passes, args.device, args.entry)
    result["config"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


def _run_config(args: argparse.Namespace, config: str) -> Optional[Dict[str, Any]]:
    """Run one configuration in a child process; its result, or None (reported)."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--passes",
               str(args.passes), "--device", str(args.device), "--entry", args.entry]
    if args.skip_malformed:
        command.append("--skip-malformed")
    if args.snapshot_device is not None:
        command += ["--snapshot-device", str(args.snapshot_device)]
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=config)
    out = subprocess.run(command + [args.trace], capture_output=True, text=True, env=env)
    for line in out.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    sys.stderr.write("torch_replay: PYTORCH_CUDA_ALLOC_CONF=%s failed (exit %d):\n%s%s\n"
                     % (config, out.returncode, out.stdout, out.stderr))
    return None


def parse_args(argv: List[str]) -> argparse.Namespace:
    """The command line.

    Args:
        argv: the arguments after the program's name.

    Returns:
        The parsed options.

    Raises:
        SystemExit: a command-line error (status 2, argparse's message).
    """
    p = argparse.ArgumentParser(description="Replay an allocation trace through PyTorch's "
                                "caching allocator, one process per allocator configuration.")
    p.add_argument("trace", help="PyTorch snapshot CSV, RMM log or snapshot pickle (gzip or not)")
    p.add_argument("--config", action="append", default=None,
                   help="a PYTORCH_CUDA_ALLOC_CONF value; repeat for several (default: %s)"
                        % " and ".join(DEFAULT_CONFIGS))
    p.add_argument("--passes", type=int, default=1, help="replays of the trace per process")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--entry", choices=("raw", "public"), default="raw")
    p.add_argument("--skip-malformed", action="store_true")
    p.add_argument("--snapshot-device", type=int, default=None)
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not 1 <= args.passes <= MAX_PASSES:
        p.error("--passes %d: give 1 to %d" % (args.passes, MAX_PASSES))
    if args.device < 0:
        p.error("--device %d: give a device index >= 0" % args.device)
    for config in args.config or []:
        if not config or any(c.isspace() for c in config):
            p.error("--config %r: give a PYTORCH_CUDA_ALLOC_CONF value such as "
                    "expandable_segments:True" % config)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    """Run the replay (one child process per configuration) and print the report.

    Args:
        argv: the arguments (None: sys.argv[1:]).

    Returns:
        The exit status: 0 every replay ran, 1 a process failed or the trace
        could not be read.

    Raises:
        SystemExit: a command-line error (status 2).
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.worker:
            return _worker(args)
        trace = trace_events.read(args.trace, args.skip_malformed, args.snapshot_device)
    except (trace_events.TraceError, OSError, RuntimeError) as e:
        print("torch_replay: %s" % e, file=sys.stderr)
        return 1
    print(summary(trace), flush=True)
    results = []
    failed = False
    for config in args.config or DEFAULT_CONFIGS:
        r = _run_config(args, config)
        if r is None:
            failed = True
        else:
            results.append(("torch(%s)" % config, r))
    if results:
        print()
        print(table(trace, results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"trace": trace.path, "peak_live_bytes": trace.peak_live_bytes,
                       "results": [dict(r, name=name) for name, r in results]}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
