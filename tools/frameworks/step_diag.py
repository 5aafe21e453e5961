#!/usr/bin/env python3
"""Per-step driver calls and events of gmr's vmm pool under a real client.

Runs one workload of workloads.py on gmr (gmr.torch.use(SPEC)) or on PyTorch's
own allocator (--allocator torch / torch-expandable, for the step times) and
prints one row per step: its time and, for gmr, what the vmm pool did in it
(cuMemCreate, cuMemMap, cuMemUnmap, handles released, moves and the pages they
moved, events recorded, queried, waited on and synchronised) and what it holds.
A step whose time jumps with moves or growth in it points at the slow path;
one without them at placement or at the events.

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


class VmmPoolStats(ctypes.Structure):
    """gmr_vmm_pool_resource_stats, version 1 (gmr/vmm_pool_resource.h)."""

    _fields_ = ([("size", ctypes.c_size_t), ("version", ctypes.c_uint32)] +
                [(n, ctypes.c_size_t) for n in (
                    "page_bytes", "granularity_bytes", "mapped_bytes", "peak_mapped_bytes",
                    "reserved_bytes", "va_chunk_count", "live_bytes", "live_count",
                    "small_live_bytes", "small_live_count", "free_bytes", "free_region_count",
                    "hole_bytes", "hole_count", "zombie_bytes", "zombie_count", "asleep_bytes",
                    "asleep_count", "saved_bytes")] +
                [(n, ctypes.c_uint64) for n in (
                    "page_create_count", "page_release_count", "map_count", "unmap_count",
                    "defrag_count", "remapped_page_count", "extend_count", "event_record_count",
                    "event_query_count", "stream_wait_count", "event_synchronize_count",
                    "sleep_count", "wake_count")])


def vmm_reader(torch):
    """A function returning the vmm pool's stats (a dict) under the device's stack."""
    import gmr  # noqa: PLC0415
    from gmr import _lib  # noqa: PLC0415

    lib = _lib.lib()
    resource = gmr.device_resource(torch.cuda.current_device())
    find = lib.gmr_resource_find  # the layer of that type under the stack's top
    find.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    find.restype = ctypes.c_void_p
    pool = find(resource, b"vmm_pool_resource")
    if not pool:
        return None
    get = lib.gmr_vmm_pool_resource_get_stats
    get.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    get.restype = ctypes.c_int

    def read():
        s = VmmPoolStats()
        s.size = ctypes.sizeof(VmmPoolStats)
        s.version = 1
        if get(pool, ctypes.byref(s)) != 0:
            return None
        return {name: getattr(s, name) for name, _ in VmmPoolStats._fields_}

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
    rows = []
    last = [read() if read else None]
    step_index = [0]

    class Meter:
        def step(self, fn, timed=True, sample_memory=True):
            del timed, sample_memory
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ms = (time.perf_counter() - t0) * 1e3
            now = read() if read else None
            free, total = torch.cuda.mem_get_info()
            row = [step_index[0], ms, (total - free - baseline) / 2**20]
            if now is not None and last[0] is not None:
                row += [now[c] - last[0][c] for c in COUNTERS]
                row.append(now["mapped_bytes"] / 2**20)
            elif now is not None:
                row += [now[c] for c in COUNTERS] + [now["mapped_bytes"] / 2**20]
            else:  # PyTorch's allocator: what it holds and its peak of live bytes
                row += [torch.cuda.memory_reserved() / 2**20,
                        torch.cuda.max_memory_allocated() / 2**20]
            last[0] = now
            rows.append(row)
            step_index[0] += 1
            print(" ".join("%8.2f" % x if isinstance(x, float) else "%8d" % x for x in row),
                  flush=True)

        def sample(self):
            pass

    head = ["step", "ms", "used_MiB"] + (SHORT + ["held_MiB"] if read else
                                         ["held_MiB", "peak_live_MiB"])
    print("%s %s spec=%s" % (args.workload, args.allocator, args.spec))
    print(" ".join("%8s" % h for h in head), flush=True)
    workloads.TORCH_WORKLOADS[args.workload](torch, Meter(), args)
    if args.allocator == "gmr":
        import gmr.torch  # noqa: PLC0415

        st = gmr.torch.stats()
        if st["peak_bytes"] is not None:  # a tracking layer: the live peak gmr saw
            print("gmr peak live MiB %.2f, peak held MiB %.2f" % (st["peak_bytes"] / 2**20,
                                                                  st["peak_held_bytes"] / 2**20))
    timed = sorted(r[1] for r in rows[args.warmup:])
    print("median step ms %.2f (min %.2f, max %.2f)" % (timed[len(timed) // 2], timed[0],
                                                        timed[-1]))


if __name__ == "__main__":
    main()
