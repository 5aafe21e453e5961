#!/usr/bin/env python3
"""Functional checks of gmr.torch and gmr.cupy on a real GPU, each in its own
process (PyTorch's allocator is chosen once per process). Prints one line per
check, "PASS name: what was seen" or "FAIL name: why", then "N passed, M failed".

  PYTHONPATH=python python3 tools/frameworks/checks.py [--only name,...]
"""

import argparse
import ctypes
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
GIB = 1 << 30
MIB = 1 << 20


class CheckFailed(Exception):
    pass


def expect(cond, message):
    if not cond:
        raise CheckFailed(message)


def _mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                               torch.nn.Linear(4096, 1024)).cuda()


def _train(torch, model, steps=5):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device="cuda")
    for _ in range(steps):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return float(loss)


def check_direct_train_stats():
    """The issue's example: use(spec), train, stats(), empty_cache, memory fraction."""
    import torch
    import gmr.torch
    gmr.torch.use("tracking > limiting(limit=70GiB) > pool > cuda(kind=async)")
    loss = _train(torch, _model := _mlp(torch))
    s = gmr.torch.stats()
    expect(s["current_bytes"] > 0 and s["peak_bytes"] >= s["current_bytes"], s)
    expect(s["per_stream"], "no per-stream counters: %s" % s)
    limiting = next(l for l in s["layers"] if l["type"] == "limiting_adaptor")
    expect(limiting["limit_bytes"] == 70 * GIB, limiting)
    held_before = s["held_bytes"]
    del _model
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    held_after = gmr.torch.stats()["held_bytes"]
    expect(held_after is None or held_after <= held_before, (held_before, held_after))
    torch.cuda.set_per_process_memory_fraction(0.5)
    total = torch.cuda.get_device_properties(0).total_memory
    limiting = next(l for l in gmr.torch.stats()["layers"] if l["type"] == "limiting_adaptor")
    expect(abs(limiting["limit_bytes"] - total // 2) <= 1, (limiting, total))
    return ("loss %.4f; current %d B, peak %d B, streams %s; held %s -> %s after empty_cache; "
            "fraction 0.5 -> limit %d B; shim %s"
            % (loss, s["current_bytes"], s["peak_bytes"], list(s["per_stream"]), held_before,
               held_after, limiting["limit_bytes"], gmr.torch.counters()))


def check_direct_oom_limit():
    """A refused limit in direct mode raises torch.cuda.OutOfMemoryError with gmr's message."""
    import torch
    import gmr._lib
    import gmr.torch
    gmr.torch.use("limiting(limit=1GiB) > pool > cuda(kind=async)")
    small = torch.ones(1024, device="cuda")
    want = torch.cuda.OutOfMemoryError if gmr._lib.torch_lib().gmr_torch_raises_torch_errors() \
        else RuntimeError
    try:
        torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
    except want as e:
        text = str(e)
    else:
        raise CheckFailed("2 GiB under a 1 GiB limit did not raise")
    expect("GMR_ERR_LIMIT_EXCEEDED" in text and "gmr:" in text, text)
    after = torch.ones(1024, device="cuda") + small  # still usable
    expect(float(after.sum()) == 2048.0, "allocation after the failure")
    return "%s: %s" % (want.__name__, text.splitlines()[0][:300])


def check_direct_oom_device():
    """Out of device memory in direct mode: torch.cuda.OutOfMemoryError with gmr's message."""
    import torch
    import gmr._lib
    import gmr.torch
    gmr.torch.use("pool > cuda(kind=async)")
    want = torch.cuda.OutOfMemoryError if gmr._lib.torch_lib().gmr_torch_raises_torch_errors() \
        else RuntimeError
    try:
        torch.empty(1 << 40, dtype=torch.uint8, device="cuda")
    except want as e:
        text = str(e)
    else:
        raise CheckFailed("1 TiB did not raise")
    expect("GMR_ERR_OUT_OF_MEMORY" in text, text)
    return "%s: %s" % (want.__name__, text.splitlines()[0][:300])


def check_direct_bad_gmr_stack():
    """A malformed GMR_STACK fails at the first allocation, as a Python exception."""
    os.environ["GMR_STACK"] = "pool > cuda(kidn=async)"
    import torch
    import gmr.torch
    gmr.torch.use()
    try:
        torch.zeros(1024, device="cuda")
    except RuntimeError as e:
        text, kind = str(e), type(e).__name__  # `e` is unbound after the except block
    else:
        raise CheckFailed("no exception")
    expect("GMR_STACK:1:" in text and "kidn" in text, text)
    return "%s: %s" % (kind, text.splitlines()[0][:300])


def check_second_swap():
    """use() after CUDA was initialised gives PyTorch's error (documented)."""
    import torch
    import gmr.torch
    torch.zeros(1, device="cuda")
    try:
        gmr.torch.use()
    except RuntimeError as e:
        text = str(e)
    else:
        raise CheckFailed("no exception")
    expect("before CUDA is initialised" in text, text)
    return text[:300]


def check_foreign_free():
    """A free of a pointer gmr never gave is refused and counted, never passed to CUDA."""
    import torch
    import gmr._lib
    import gmr.torch
    gmr.torch.use("tracking > pool > cuda(kind=async)")
    t = torch.ones(4096, device="cuda")
    shim = gmr._lib.torch_lib()
    before = gmr.torch.counters()["refused_free_count"]
    shim.gmr_torch_free(0x7F0000001000, 4096, 0, None)
    shim.gmr_torch_free(t.data_ptr(), 12345, 0, None)  # wrong size
    after = gmr.torch.counters()["refused_free_count"]
    expect(after == before + 2, (before, after))
    expect(float(t.sum()) == 4096.0, "the tensor survived")
    return "refused %d frees; last: %s" % (after - before, gmr.torch.last_error())


def check_record_stream():
    """Side stream + record_stream: results right, the hook called."""
    import torch
    import gmr.torch
    import workloads
    from bench import Meter
    gmr.torch.use("tracking > pool > cuda(kind=async)")

    class Args:
        warmup = 5
        steps = 20

    out = workloads.side_stream(torch, Meter(torch.cuda.synchronize, torch.cuda.mem_get_info),
                                Args)
    c = gmr.torch.counters()
    expect(out["wrong_results"] == 0, out)
    expect(c["record_stream_count"] > 0, c)
    return "wrong results 0 of %d; record_stream %d (kept by the shim: %d)" % (
        out["steps"], c["record_stream_count"], c["record_stream_fallback_count"])


def check_graph_direct():
    """torch.cuda.graph in direct mode over pool > cuda(kind=device): the
    capture goes to a private pool of gmr.torch's own, which grows during
    capture through the pool (cudaMalloc in relaxed capture mode)."""
    return _graph_direct("pool > cuda(kind=device)")


def check_graph_direct_vmm():
    """The same over the VMM allocator: pages mapped during the capture."""
    return _graph_direct("vmm_pages")


def check_graph_default():
    """gmr.torch.use() with no spec (gmr.FRAMEWORK_DEFAULT_SPEC, vmm): capture
    works out of the box, nothing sized by hand."""
    import torch
    import gmr
    out = _graph_direct(None)
    spec = gmr.device_spec(torch.cuda.current_device())  # the registry's default
    expect(spec == gmr.FRAMEWORK_DEFAULT_SPEC, spec)
    return out


def _graph_direct(spec):
    import torch
    import gmr.torch
    import workloads
    from bench import Meter
    gmr.torch.use(spec)

    class Args:
        warmup = 0
        steps = 0

    out = workloads.graph_replay(torch, Meter(torch.cuda.synchronize, torch.cuda.mem_get_info),
                                 Args)
    c = gmr.torch.counters()
    expect(out["max_abs_diff_vs_eager"] < 0.5, out)
    expect(c["capture_allocation_count"] > 0, c)
    return "1000 replays, max |graph - eager| %.3g; %d allocations in capture" % (
        out["max_abs_diff_vs_eager"], c["capture_allocation_count"])


def check_mempool_train():
    """MemPool mode: PyTorch caches on gmr segments; its stats keep working."""
    import torch
    import gmr.torch
    pool = gmr.torch.mempool("tracking > pool > cuda(kind=async)")
    with torch.cuda.use_mem_pool(pool):
        loss = _train(torch, _mlp(torch))
        reserved = torch.cuda.memory_reserved()
        s = gmr.torch.stats()
    expect(s["current_bytes"] > 0, s)
    expect(reserved > 0, reserved)
    snapshot_segments = len(pool.snapshot())
    return "loss %.4f; PyTorch reserved %d B, %d segments in the pool; gmr holds %d B in " \
           "segments (%d allocations)" % (loss, reserved, snapshot_segments, s["current_bytes"],
                                          s["allocations"]["current"])


def check_mempool_oom():
    """MemPool mode: gmr's NULL becomes torch.cuda.OutOfMemoryError; last_error() says why."""
    import torch
    import gmr.torch
    pool = gmr.torch.mempool("limiting(limit=256MiB) > pool > cuda(kind=async)")
    try:
        with torch.cuda.use_mem_pool(pool):
            torch.empty(512 * MIB, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError as e:
        text = str(e)
    else:
        raise CheckFailed("512 MiB under a 256 MiB limit did not raise")
    why = gmr.torch.last_error()
    expect("GMR_ERR_LIMIT_EXCEEDED" in why, why)
    return "OutOfMemoryError (%s...); gmr.torch.last_error(): %s" % (text[:80], why[:200])


def check_mempool_graph():
    """torch.cuda.graph(pool=gmr MemPool): segments asked for during capture
    (a stack that grows while a stream captures)."""
    import torch
    import gmr.torch
    import workloads
    from bench import Meter
    pool = gmr.torch.mempool("pool > cuda(kind=device)")

    class Args:
        warmup = 0
        steps = 0

    out = workloads.graph_replay(torch, Meter(torch.cuda.synchronize, torch.cuda.mem_get_info),
                                 Args, pool=pool.id)
    expect(out["max_abs_diff_vs_eager"] < 0.5, out)
    return "1000 replays, max |graph - eager| %.3g" % out["max_abs_diff_vs_eager"]


def check_cupy():
    """gmr.cupy.use: results right, per-stream counters, OOM with gmr's message."""
    import cupy
    import gmr.cupy
    gmr.cupy.use("tracking > pool > cuda(kind=async)")
    a = cupy.arange(1 << 20, dtype=cupy.float64)
    total = float((a * 2).sum())
    expect(total == float((1 << 20) * ((1 << 20) - 1)), total)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        b = cupy.ones(1 << 22, dtype=cupy.float32)
        checksum = float(b.sum())
    stats = gmr.cupy.stats()
    tracking = next(l for l in stats["layers"] if l["type"] == "tracking_adaptor")
    owners = list(tracking["owners"])
    expect(len(owners) >= 2, owners)
    try:
        cupy.empty(1 << 40, dtype=cupy.uint8)
    except cupy.cuda.memory.OutOfMemoryError as e:
        text = str(e)
    else:
        raise CheckFailed("1 TiB did not raise")
    expect("GMR_ERR_OUT_OF_MEMORY" in text, text)
    del a, b
    return "sum ok, side-stream checksum %.0f; owners %s; OOM: %s" % (checksum, owners, text[:200])


CHECKS = {name[len("check_"):]: fn for name, fn in globals().items() if name.startswith("check_")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", help="comma-separated check names")
    p.add_argument("--check", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.check:
        try:
            print("PASS %s: %s" % (args.check, CHECKS[args.check]()), flush=True)
            return 0
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            detail = str(e) if isinstance(e, CheckFailed) else "%s: %s" % (type(e).__name__, e)
            print("FAIL %s: %s" % (args.check, " ".join(detail.split())[:1500]), flush=True)
            return 1
    names = args.only.split(",") if args.only else list(CHECKS)
    passed = failed = 0
    for name in names:
        try:
            run = subprocess.run([sys.executable, os.path.abspath(__file__), "--check", name],
                                 capture_output=True, text=True, timeout=180)
            lines = [l for l in run.stdout.splitlines() if l.startswith(("PASS ", "FAIL "))]
            line = lines[-1] if lines else "FAIL %s: exit %d: %s" % (
                name, run.returncode, run.stderr[-800:])
            if lines and run.returncode not in (0, 1):
                line = "FAIL %s: exit %d after: %s\n%s" % (name, run.returncode, lines[-1],
                                                          run.stderr[-800:])
        except subprocess.TimeoutExpired:
            line = "FAIL %s: timed out" % name
        print(line, flush=True)
        if not line.startswith("PASS") and run.stderr:
            print("  " + "\n  ".join(run.stderr.strip().splitlines()[-12:]), flush=True)
        if line.startswith("PASS"):
            passed += 1
        else:
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
