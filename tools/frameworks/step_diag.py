#!/usr/bin/env python3
"""Per-step driver calls and events of gmr's vmm pool under a real client.

Runs one workload of workloads.py on gmr (gmr.torch.use(SPEC)) or on PyTorch's
own allocator (--allocator torch / torch-expandable, for the step times) and
prints one row per step: its time and, for gmr, what the vmm pool did in it
(cuMemCreate, cuMemMap, cuMemUnmap, handles released, moves and the pages they
moved, events recorded, queried, waited on and synchronised) and what it holds.
A step whose time jumps with moves or growth in it points at the slow path;
one without them at placement or at the events. Row -1 is what the workload's
set-up left (graph_replay: after its capture, before the first replay).

Usage (repository root, GPU machine):
  PYTHONPATH=python python3 tools/frameworks/step_diag.py [--workload gpt2_train]
      [--spec vmm] [--allocator gmr|torch|torch-expandable] [--warmup 5] [--steps 20]
"""

import argparse
import ctypes
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

COUNTERS = ["page_create_count", "page_release_count", "map_count", "unmap_count",
            "defrag_count", "remapped_page_count", "event_record_count", "event_query_count",
            "stream_wait_count", "event_synchronize_count"]
SHORT = ["create", "release", "map", "unmap", "moves", "moved_pg", "ev_rec", "ev_query",
         "ev_wait", "ev_sync"]


def vmm_reader(torch):
    """A function returning the vmm pool's stats (a dict) under the device's stack."""
    import gmr  # noqa: PLC0415
    from gmr import _capi, _lib  # noqa: PLC0415

    lib = _lib.lib()  # prototypes from gmr._capi
    pool = lib.gmr_resource_find(gmr.device_resource(torch.cuda.current_device()),
                                 b"vmm_pool_resource")
    if not pool:
        return None

    def read():
        s = _capi.VmmPoolStats()
        st = lib.gmr_vmm_pool_resource_get_stats(pool, ctypes.byref(s))
        if st != 0:
            raise RuntimeError("gmr_vmm_pool_resource_get_stats: status %d" % st)
        return {name: getattr(s, name) for name, _ in s._fields_}

    return read


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="gpt2_train")
    p.add_argument("--spec", default="vmm")
    p.add_argument("--allocator", default="gmr", choices=["gmr", "torch", "torch-expandable"])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    if args.allocator == "torch-expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch  # noqa: PLC0415

    if args.allocator == "gmr":
        import gmr.torch  # noqa: PLC0415

        gmr.torch.use(args.spec)
    import workloads  # noqa: PLC0415

    torch.cuda.init()
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    baseline = total - free
    read = vmm_reader(torch) if args.allocator == "gmr" else None
    last = [read() if read else None]
    rows = []

    def memory_columns():
        """Device memory in use (MiB); then, on gmr, what the vmm pool did since
        the last row and what it holds; on PyTorch's allocator, what it holds
        and its peak of live bytes."""
        free, total = torch.cuda.mem_get_info()
        cols = [(total - free - baseline) / 2**20]
        if read is None:
            return cols + [torch.cuda.memory_reserved() / 2**20,
                           torch.cuda.max_memory_allocated() / 2**20]
        now = read()
        cols += [now[c] - last[0][c] for c in COUNTERS] + [now["mapped_bytes"] / 2**20]
        last[0] = now
        return cols

    def show(row):
        print(" ".join("%8.2f" % x if isinstance(x, float) else "%8d" % x for x in row),
              flush=True)

    class Meter:
        def step(self, fn, timed=True, sample_memory=True):
            del timed, sample_memory
            torch.cuda.synchronize()
            if not rows:  # what the workload's set-up left (step -1)
                show([-1, 0.0] + memory_columns())
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            rows.append([len(rows), (time.perf_counter() - t0) * 1e3] + memory_columns())
            show(rows[-1])

        def sample(self):
            pass

    head = ["step", "ms", "used_MiB"] + (SHORT + ["held_MiB"] if read else
                                         ["held_MiB", "peak_live_MiB"])
    print("%s %s spec=%s" % (args.workload, args.allocator, args.spec))
    print(" ".join("%8s" % h for h in head), flush=True)
    workloads.TORCH_WORKLOADS[args.workload](torch, Meter(), args)
    if args.allocator == "gmr":
        st = gmr.torch.stats()
        if st["peak_bytes"] is not None:  # a tracking layer: the live peak gmr saw
            print("gmr peak live MiB %.2f, peak held MiB %.2f" % (st["peak_bytes"] / 2**20,
                                                                  st["peak_held_bytes"] / 2**20))
    timed = sorted(r[1] for r in rows[args.warmup:])
    print("median step ms %.2f (min %.2f, max %.2f)" % (timed[len(timed) // 2], timed[0],
                                                        timed[-1]))


if __name__ == "__main__":
    main()
