#!/usr/bin/env python3
"""PyTorch's memory tools on gmr's snapshots (GPU machine): gmr.torch records a
small training workload, dumps PyTorch's snapshot pickle, and PyTorch's own
tools and gmr's replay must read it.

For each stack (each in a process of its own: gmr.torch.use() once per
process), the child:
  1. gmr.torch.use(SPEC), gmr.torch.record_memory_history(), resets the peak;
  2. trains a small MLP a few steps (AdamW), fills a buffer on a side stream,
     asks for an impossible tensor (an 'oom' entry), leaves a few tensors live;
  3. gmr.torch.dump_snapshot(OUT/SPEC.pickle) and checks:
     - layout: the keys PyTorch's viewer reads, blocks tiling every segment,
       every live tensor of the workload in a segment, frames naming this file;
     - torch.cuda._memory_viz: segsum (its tiling assertion), trace, segments
       and memory (flame graph text, formatter replaced: no download),
       trace_plot and segment_plot (HTML), in-process, and the command line
       `python -m torch.cuda._memory_viz trace_plot|segment_plot|stats FILE`;
     - tools/replay (.gpu/bin/replay, or $GMR_REPLAY) replays the pickle through
       'tracking > pool > cuda(kind=async)' and finds the peak of live bytes
       that torch.cuda.max_memory_allocated() (gmr's books) reported.
One line per check, then `memviz_check: PASS` or `memviz_check: FAIL (N checks
failed)`; exit status 0 or 1.

Usage (repository root, after tools/gpu/stage.sh; tools/frameworks/memviz_run.sh
runs it with the environment set):
  PYTHONPATH=python GMR_LIBRARY_DIR=.gpu/lib python3 tools/frameworks/memviz_check.py \\
      [--spec SPEC ...] [--out DIR]
"""

import argparse
import os
import pickle
import re
import subprocess
import sys
from typing import Any, Dict, List, Optional

DEFAULT_SPECS = ("pool > cuda(kind=async)", "vmm")
MARK = "memviz_check "
SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size",
                "requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable",
                "frames", "blocks"}


class Checks:
    """Collects named results and prints one line each."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.failed: List[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        """Record one check.

        Args:
            name: what was checked.
            ok: whether it held.
            detail: what was seen, for a failure.
        """
        print("%s[%s] %s: %s%s" % (MARK, self.label, name, "ok" if ok else "FAILED",
                                   "" if ok or not detail else " (%s)" % detail), flush=True)
        if not ok:
            self.failed.append(name)

    def run(self, name: str, fn: Any) -> Optional[Any]:
        """Record whether fn() returns without raising; its value, or None."""
        try:
            value = fn()
        except Exception as e:  # noqa: BLE001 (a check reports any failure)
            self.check(name, False, "%s: %s" % (type(e).__name__, str(e)[:300]))
            return None
        self.check(name, True)
        return value


def workload(torch: Any) -> List[Any]:
    """A few training steps, a side stream, a failed request; what stays live."""
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(4):
        x = torch.randn(256, 1024, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        buffer = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
        buffer.fill_(1)
    torch.cuda.synchronize()
    del buffer
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    except (torch.cuda.OutOfMemoryError, RuntimeError):
        pass
    keep = [torch.ones(1 << 20, device="cuda") for _ in range(3)]
    torch.cuda.synchronize()
    return [model, optimizer] + keep


def check_layout(c: Checks, data: Dict[str, Any], live: List[Any]) -> None:
    """The layout PyTorch's viewer reads, and the workload's tensors in it."""
    c.check("snapshot keys", {"segments", "device_traces", "allocator_settings"} <= set(data),
            str(sorted(data)))
    segments = data.get("segments", [])
    c.check("segments present", bool(segments))
    tiled = all(set(s) == SEGMENT_KEYS and s["total_size"] == sum(b["size"] for b in s["blocks"])
                for s in segments)
    c.check("blocks tile every segment", tiled)
    active = {b["address"] for s in segments for b in s["blocks"]
              if b["state"] == "active_allocated"}
    missing = [t.data_ptr() for t in live if t.data_ptr() not in active]
    c.check("live tensors are active blocks", not missing, "missing %s" % missing[:4])
    trace = data["device_traces"][0] if data.get("device_traces") else []
    actions = {e["action"] for e in trace}
    c.check("device trace actions", {"alloc", "free_requested", "free_completed", "oom"} <= actions,
            str(sorted(actions)))
    here = os.path.abspath(__file__)
    framed = any(f["filename"] == here for e in trace if e["action"] == "alloc"
                 for f in e["frames"])
    c.check("frames name this script", framed)
    streams = {e["stream"] for e in trace}
    c.check("two streams in the trace", len(streams) >= 2, str(streams))


def check_torch_tools(c: Checks, torch: Any, data: Dict[str, Any], path: str, out: str) -> None:
    """torch.cuda._memory_viz in-process and as a command."""
    viz = torch.cuda._memory_viz
    c.run("_memory_viz.segsum", lambda: viz.segsum(data))
    c.run("_memory_viz.trace", lambda: viz.trace(data))
    c.run("_memory_viz.segments", lambda: viz.segments(data, format_flamegraph=lambda s: s))
    c.run("_memory_viz.memory", lambda: viz.memory(data, format_flamegraph=lambda s: s))
    html = c.run("_memory_viz.trace_plot", lambda: viz.trace_plot(data))
    c.check("trace_plot is HTML", isinstance(html, str) and "<html>" in html.lower())
    c.run("_memory_viz.segment_plot", lambda: viz.segment_plot(data))
    for command in ("trace_plot", "segment_plot", "stats"):
        target = os.path.join(out, "%s.html" % command)
        args = [sys.executable, "-m", "torch.cuda._memory_viz", command, path]
        if command != "stats":
            args += ["-o", target]
        done = subprocess.run(args, capture_output=True, text=True)
        ok = done.returncode == 0 and (command == "stats" or os.path.getsize(target) > 1000)
        c.check("python -m torch.cuda._memory_viz %s" % command, ok,
                (done.stderr or done.stdout)[-300:])


def check_replay(c: Checks, path: str, books_peak: int) -> None:
    """tools/replay reads the pickle and finds the books' peak."""
    replay = os.environ.get("GMR_REPLAY") or os.path.join(".gpu", "bin", "replay")
    if not os.path.exists(replay):
        c.check("tools/replay found", False, "%s: run tools/gpu/stage.sh" % replay)
        return
    done = subprocess.run([replay, "--stack", "tracking > pool > cuda(kind=async)", path],
                          capture_output=True, text=True)
    c.check("tools/replay reads the snapshot", done.returncode == 0,
            (done.stderr or done.stdout)[-300:])
    m = re.search(r"tracking: peak (\d+) bytes", done.stdout)
    peak = int(m.group(1)) if m else -1
    c.check("replay's peak equals the books' (max_memory_allocated)", peak == books_peak,
            "replay %d, books %d" % (peak, books_peak))


def child(spec: str, out: str) -> int:
    """One stack in this process: the workload, the snapshot, the checks."""
    import gmr.torch  # noqa: PLC0415 (before torch touches CUDA)
    gmr.torch.use(spec)
    import torch  # noqa: PLC0415
    label = re.sub(r"[^A-Za-z0-9]+", "_", spec).strip("_")
    c = Checks(spec)
    torch.cuda.reset_peak_memory_stats()
    gmr.torch.record_memory_history()
    live = workload(torch)
    books_peak = torch.cuda.max_memory_allocated()
    path = os.path.join(out, label + ".pickle")
    gmr.torch.dump_snapshot(path)
    with open(path, "rb") as f:
        data = pickle.load(f)
    print("%s[%s] snapshot %s: %d segments, %d entries, peak %d bytes" % (
        MARK, spec, path, len(data["segments"]), len(data["device_traces"][0]), books_peak))
    tensors = [t for t in live if isinstance(t, torch.Tensor)]
    tensors += [p for p in live[0].parameters()]
    check_layout(c, data, tensors)
    check_torch_tools(c, torch, data, path, out)
    check_replay(c, path, books_peak)
    return 1 if c.failed else 0


def main(argv: Optional[List[str]] = None) -> int:
    """Run every stack in a child process and print the verdict.

    Args:
        argv: the arguments (None: sys.argv[1:]).

    Returns:
        0 when every check passed, else 1.
    """
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", action="append", help="a gmr stack (default: %s)"
                   % " and ".join(DEFAULT_SPECS))
    p.add_argument("--out", default=os.path.join("gpu-out", "memviz"))
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.child is not None:
        return child(args.child, args.out)
    failed = 0
    checks = 0
    for spec in args.spec or DEFAULT_SPECS:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", spec,
                               "--out", args.out], capture_output=True, text=True)
        sys.stdout.write(done.stdout)
        lines = [line for line in done.stdout.splitlines()
                 if line.startswith(MARK) and (line.endswith(": ok") or ": FAILED" in line)]
        checks += len(lines)
        bad = sum(1 for line in lines if ": FAILED" in line)
        if done.returncode != 0 and bad == 0:
            bad = 1
            sys.stdout.write("%s[%s] the process failed (exit %d):\n%s\n"
                             % (MARK, spec, done.returncode, done.stderr[-3000:]))
        failed += bad
    print("memviz_check: %s (%d checks, %d failed)" % ("PASS" if failed == 0 else "FAIL",
                                                        checks, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
