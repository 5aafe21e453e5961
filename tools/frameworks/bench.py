#!/usr/bin/env python3
"""Real clients on gmr against PyTorch's own allocator (GPU machine).

Runs every (workload, allocator) pair in its own process (PyTorch's allocator
can be chosen once per process) and prints one row per pair as it finishes,
then a table:

  workload        allocator            peak MiB  used MiB  step ms  loss first -> last
  gpt2_train      torch                  8494.0    8912.0    45.10  11.0312 -> 7.9766
  gpt2_train      torch-expandable       ...
  gpt2_train      gmr-direct[pool>...]   ...

Allocators: torch (PyTorch's caching allocator), torch-expandable (the same
with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), gmr-direct
(gmr.torch.use(stack)) and gmr-mempool (torch.cuda.MemPool backed by gmr,
the workload inside torch.cuda.use_mem_pool), once per --stack; CuPy's
workload runs with CuPy's pool (cupy) and gmr (gmr.cupy.use(stack)).

  peak MiB   the allocator's peak of what it held from CUDA: PyTorch's
             max_memory_reserved() (MemPool mode: PyTorch's pools, the gmr
             pool's segments included); gmr direct: the stack's
             peak_held_bytes; cupy: the largest total_bytes() seen.
  used MiB   the largest device memory in use (cudaMemGetInfo) at the end of a
             step, less what was in use before the workload (CUDA context).
  step ms    median time of a timed step (synchronised).
  loss       of the first and last timed step (inference and the stream and
             graph workloads: a checksum of the output).

Usage (repository root, on the GPU machine; see tools/frameworks/run_all.sh):
  PYTHONPATH=python python3 tools/frameworks/bench.py [--stack SPEC ...]
      [--workloads gpt2_train,...] [--allocators torch,gmr-direct,...] [--json FILE]
      [--repeats N]   (N processes per configuration, interleaved; median and spread)
Steps: GPT-2 and ResNet-50 5 warm-up + 20 timed; BERT 5 + 40 random shapes;
side stream 5 + 395 iterations; graph 1 capture + 1,000 replays; CuPy 5 + 300.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DEFAULT_STACK = "vmm"  # the library default (GMR_DEVICE_RESOURCE_DEFAULT_SPEC)
TORCH_ALLOCATORS = ["torch", "torch-expandable", "gmr-direct", "gmr-mempool"]
CUPY_ALLOCATORS = ["cupy", "gmr"]
WORKLOADS = ["gpt2_train", "resnet50_train", "bert_infer", "side_stream", "graph_replay",
             "cupy_mix"]
MIB = 1 << 20


class Meter:
    """Times steps and samples device memory at their ends."""

    def __init__(self, sync, mem_get_info):
        self.sync = sync
        self.mem_get_info = mem_get_info
        self.sync()
        free, total = mem_get_info()
        self.baseline = total - free
        self.used_peak = 0
        self.times = []

    def sample(self):
        free, total = self.mem_get_info()
        self.used_peak = max(self.used_peak, total - free - self.baseline)

    def step(self, fn, timed=True, sample_memory=True):
        t0 = time.perf_counter()
        fn()
        self.sync()
        if timed:
            self.times.append(time.perf_counter() - t0)
        if sample_memory:
            self.sample()


def run_worker(args):
    """One (workload, allocator, stack) in this process; prints RESULT <json>."""
    result = {"workload": args.workload, "allocator": args.allocator, "stack": args.stack,
              "ok": False}
    try:
        if args.workload == "cupy_mix":
            result.update(run_cupy(args))
        else:
            result.update(run_torch(args))
        result["ok"] = True
    except Exception as e:  # noqa: BLE001 (a row says what failed)
        result["error"] = "%s: %s" % (type(e).__name__, str(e)[:600])
    print("RESULT " + json.dumps(result), flush=True)


def run_torch(args):
    if args.allocator == "torch-expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch  # noqa: PLC0415

    import gmr  # noqa: PLC0415
    import gmr.torch  # noqa: PLC0415
    import workloads  # noqa: PLC0415

    # CUDA graphs get gmr.torch's own private pools over any stack: the
    # stack is used as given for every workload.
    stack = args.stack
    pool = None
    if args.allocator == "gmr-direct":
        gmr.torch.use(stack)
    meter = Meter(torch.cuda.synchronize, torch.cuda.mem_get_info)
    if args.allocator == "gmr-mempool":
        pool = gmr.torch.mempool(stack)
    fn = workloads.TORCH_WORKLOADS[args.workload]
    extra = {}
    if pool is not None and args.workload == "graph_replay":
        # The graph's private pool is the gmr MemPool (torch.cuda.graph(pool=...));
        # the model and warm-up stay outside it (nesting a capture inside
        # use_mem_pool is not supported by PyTorch: pytorch/pytorch#168137).
        out = fn(torch, meter, args, pool=pool.id)
    elif pool is not None:
        with torch.cuda.use_mem_pool(pool):
            out = fn(torch, meter, args)
    else:
        out = fn(torch, meter, args)
    torch.cuda.synchronize()
    if args.allocator == "gmr-direct":
        s = gmr.torch.stats()
        peak = s["peak_held_bytes"]
        extra["gmr_shim"] = s["shim"]
        extra["stack_used"] = stack
    else:
        peak = torch.cuda.max_memory_reserved()
        extra["max_allocated_mib"] = round(torch.cuda.max_memory_allocated() / MIB, 1)
        if pool is not None:
            s = gmr.stack_stats(torch.cuda.current_device())
            extra["gmr_peak_held_mib"] = round((s["peak_held_bytes"] or 0) / MIB, 1)
            extra["gmr_shim"] = gmr.torch.counters()
    out.update(extra)
    out["peak_mib"] = round(peak / MIB, 1) if peak is not None else None
    out["used_mib"] = round(meter.used_peak / MIB, 1)
    out["step_ms"] = round(statistics.median(meter.times) * 1e3, 3)
    out["torch"] = torch.__version__
    return out


def run_cupy(args):
    import cupy  # noqa: PLC0415

    import gmr  # noqa: PLC0415
    import gmr.cupy  # noqa: PLC0415
    import workloads  # noqa: PLC0415

    if args.allocator == "gmr":
        gmr.cupy.use(args.stack)
    device = cupy.cuda.Device()
    pool = cupy.get_default_memory_pool()
    meter = Meter(device.synchronize, cupy.cuda.runtime.memGetInfo)
    pool_peak = [0]
    sync = meter.sync

    def sync_and_watch():
        sync()
        pool_peak[0] = max(pool_peak[0], pool.total_bytes())

    meter.sync = sync_and_watch
    out = workloads.cupy_mix(cupy, meter, args)
    if args.allocator == "gmr":
        peak = gmr.cupy.stats()["peak_held_bytes"]
    else:
        peak = pool_peak[0]
    out["peak_mib"] = round(peak / MIB, 1) if peak is not None else None
    out["used_mib"] = round(meter.used_peak / MIB, 1)
    out["step_ms"] = round(statistics.median(meter.times) * 1e3, 3)
    out["cupy"] = cupy.__version__
    return out


def label(row):
    if row["allocator"].startswith("gmr"):
        return "%s[%s]" % (row["allocator"], row["stack"])
    return row["allocator"]


def fmt(value, spec):
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def print_row(row, out=sys.stdout):
    if not row["ok"]:
        print("%-15s %-44s FAILED: %s" % (row["workload"], label(row), row.get("error")),
              file=out, flush=True)
        return
    notes = []
    for key in ("wrong_results", "max_abs_diff_vs_eager", "max_allocated_mib",
                "gmr_peak_held_mib"):
        if key in row:
            notes.append("%s=%s" % (key, row[key]))
    print("%-15s %-44s %9s %9s %8s  %s -> %s  %s" % (
        row["workload"], label(row), fmt(row["peak_mib"], ".1f"), fmt(row["used_mib"], ".1f"),
        fmt(row["step_ms"], ".2f"), fmt(row["loss_first"], ".5g"), fmt(row["loss_last"], ".5g"),
        " ".join(notes)), file=out, flush=True)


def print_spread(rows, configs, workloads, out=sys.stdout):
    """Median and spread (min..max) of step time and device memory in use per
    configuration over its processes; a difference between two allocators is
    real only where their spreads do not overlap."""
    print("%-15s %-44s %3s %22s %24s" % ("workload", "allocator", "n", "step ms median [min..max]",
                                         "used MiB median [min..max]"), file=out)
    for w in workloads:
        for cw, a, s in configs:
            if cw != w:
                continue
            mine = [r for r in rows if r.get("ok") and r["workload"] == w and
                    r["allocator"] == a and r["config_stack"] == s]
            if not mine:
                print("%-15s %-44s   0 (every process failed)" % (w, a + (" " + s if s else "")),
                      file=out)
                continue
            steps = sorted(r["step_ms"] for r in mine if r.get("step_ms") is not None)
            used = sorted(r["used_mib"] for r in mine if r.get("used_mib") is not None)

            def cell(v, f):
                if not v:
                    return "-"
                return ("%" + f + " [%" + f + "..%" + f + "]") % (statistics.median(v), v[0], v[-1])
            print("%-15s %-44s %3d %22s %24s" % (w, label(mine[0]), len(mine), cell(steps, ".2f"),
                                                 cell(used, ".0f")), file=out)


def header(out=sys.stdout):
    print("%-15s %-44s %9s %9s %8s  %s" % ("workload", "allocator", "peak MiB", "used MiB",
                                          "step ms", "loss first -> last  notes"), file=out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stack", action="append", help="gmr stack spec (repeatable); default: "
                   + DEFAULT_STACK)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--allocators", default=",".join(TORCH_ALLOCATORS + CUPY_ALLOCATORS))
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--timeout", type=int, default=150, help="seconds per configuration")
    p.add_argument("--json", help="write all rows to this file")
    p.add_argument("--repeats", type=int, default=1,
                   help="processes per configuration, interleaved (every configuration once, "
                        "then again): the table gives the median and the spread")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    p.add_argument("--allocator", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.stack = args.stack[0] if args.stack else DEFAULT_STACK
        run_worker(args)
        return 0

    stacks = args.stack or [DEFAULT_STACK]
    chosen = args.allocators.split(",")
    configs = []
    for w in args.workloads.split(","):
        allocators = CUPY_ALLOCATORS if w == "cupy_mix" else TORCH_ALLOCATORS
        for a in allocators:
            if a not in chosen:
                continue
            for s in (stacks if a.startswith("gmr") else [""]):
                configs.append((w, a, s))
    rows = []
    started = time.time()
    header()
    # Round-robin over the configurations, so that a slow minute of a shared
    # GPU lands on every allocator alike.
    for w, a, s in configs * max(1, args.repeats):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--workload", w,
               "--allocator", a, "--warmup", str(args.warmup), "--steps", str(args.steps)]
        if s:
            cmd += ["--stack", s]
        row = {"workload": w, "allocator": a, "stack": s, "ok": False}
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
            if lines:
                row = json.loads(lines[-1][len("RESULT "):])
            else:
                row["error"] = "exit %d: %s" % (run.returncode, (run.stderr or "")[-600:])
            if run.returncode != 0 and row.get("ok"):
                row["error"] = "exit %d after the result" % run.returncode
        except subprocess.TimeoutExpired:
            row["error"] = "timed out after %d s" % args.timeout
        row["config_stack"] = s  # the configuration it ran for ("" for PyTorch's own)
        rows.append(row)
        print_row(row)
    print("\n%d configurations in %.0f s\n" % (len(rows), time.time() - started))
    if args.repeats > 1:
        print_spread(rows, configs, args.workloads.split(","))
        print()
    header()
    for w in args.workloads.split(","):
        for row in rows:
            if row["workload"] == w:
                print_row(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
