#!/usr/bin/env python3
"""Write the snapshot pickles the replay tests read (tools/replay/testdata/).

They are shaped like `torch.cuda.memory._snapshot()` as PyTorch 2.x returns it
(a dict with 'segments', 'device_traces' and 'allocator_settings'; each
device_traces entry a dict with 'action', 'addr', 'size', 'stream', 'time_us'
and 'frames'), and written with Python's own `pickle`, as
`torch.cuda.memory._dump_snapshot()` does. No PyTorch is needed. Frame dicts
are shared between entries, so the pickles use the memo (BINGET), as real
snapshots do for repeated objects.

    python3 tools/replay/testdata/make_snapshots.py   # rewrites the files

Output is deterministic (gzip with mtime 0), so a rerun changes nothing.
"""
import csv
import gzip
import io
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# A big base address (6 bytes: LONG1 in the pickle) and a stream handle above
# 2^31 (LONG1 too), as on a real GPU process.
BASE = 139_821_821_460_480
STREAM = 94_336_012_345_344
T0 = 1_795_313_996_858_197

FRAMES = [
    {"filename": "train.py", "line": 41, "name": "step"},
    {"filename": "torch/nn/modules/linear.py", "line": 125, "name": "forward"},
    {"filename": "torch/nn/modules/module.py", "line": 1773, "name": "_call_impl"},
]


def entry(action, addr, size, stream, t, frames):
    return {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": stream,
        "time_us": t,
        "frames": frames,
    }


def snapshot(device_traces):
    return {
        "segments": [
            {
                "device": 0,
                "address": BASE,
                "total_size": 2_097_152,
                "allocated_size": 1_024,
                "active_size": 1_024,
                "requested_size": 1_000,
                "stream": 0,
                "segment_type": "small",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "frames": FRAMES[:1],
                "blocks": [
                    {"address": BASE, "size": 1_024, "requested_size": 1_000,
                     "state": "active_allocated", "frames": FRAMES[:2]},
                ],
            }
        ],
        "device_traces": device_traces,
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "release_lock_on_cudamalloc": False,
            "pinned_use_host_register": False,
            "roundup_power2_divisions": {"1": 0, "2": 0},
            "last_allocator_settings_update": None,
        },
    }


def small_trace():
    """The replay tests' small trace (peak live 6244 B), plus a segment row, a
    free_completed row, one allocation on a second stream above 2^31 and a
    size above 2^32, as real snapshots have."""
    f = FRAMES  # shared: the pickle writes it once and refers to it after
    return [
        entry("segment_alloc", BASE, 20_971_520, 0, T0, f),
        entry("alloc", BASE + 4096, 1024, 0, T0 + 1, f),
        entry("alloc", BASE + 8192, 4096, 0, T0 + 2, f),
        entry("free_requested", BASE + 4096, 1024, 0, T0 + 3, f),
        entry("free_completed", BASE + 4096, 1024, 0, T0 + 4, f),
        entry("alloc", BASE + 12288, 2048, 0, T0 + 5, f[:1]),
        entry("alloc", BASE + 4096, 100, 0, T0 + 6, []),
        entry("free_requested", BASE + 8192, 4096, 0, T0 + 7, f),
        entry("free_requested", BASE + 12288, 2048, 0, T0 + 8, f),
        entry("alloc", BASE + (1 << 33), 5_000_000_000, STREAM, T0 + 9, f),
        entry("free_requested", BASE + (1 << 33), 5_000_000_000, STREAM, T0 + 10, f),
    ]


def csv_trace(path):
    """A bundled CSV trace as device_traces entries."""
    rows = []
    with gzip.open(path, "rt", newline="") as f:
        for i, r in enumerate(csv.DictReader(f)):
            rows.append(entry(r["action"], int(r["addr"]), int(r["size"]), int(r["stream"]),
                              int(r["time_us"]), FRAMES if i % 2 else FRAMES[1:]))
    return rows


def write(name, data, compress=False):
    path = os.path.join(HERE, name)
    if compress:
        buf = io.BytesIO()
        with gzip.GzipFile(filename=name[:-3], mode="wb", compresslevel=9, fileobj=buf,
                           mtime=0) as g:
            g.write(data)
        data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)
    print(f"{path}: {len(data)} bytes")


def main():
    small = snapshot([small_trace()])
    for protocol in (2, 3, 4, 5):
        write(f"small_p{protocol}.pickle", pickle.dumps(small, protocol=protocol))
    # Two devices with entries: the reader must be told which one.
    second = [entry("alloc", BASE + 64, 512, 0, T0, []),
              entry("free_requested", BASE + 64, 512, 0, T0 + 1, [])]
    write("two_devices.pickle", pickle.dumps(snapshot([small_trace(), second]), protocol=4))
    # The bundled multistream trace as a snapshot: replaying it must give
    # exactly what the CSV gives.
    multistream = os.path.join(ROOT, "tools", "traces", "multistream.csv.gz")
    write("multistream.pickle.gz", pickle.dumps(snapshot([[], csv_trace(multistream)]),
                                                protocol=4), compress=True)
    # A failed allocation between two calls: PyTorch's 'oom' entry carries
    # 'device_free' where the others carry 'addr'.
    oom = {"action": "oom", "device_free": 3_145_728, "size": 1 << 40, "stream": 0,
           "time_us": T0 + 1, "frames": FRAMES}
    write("with_oom.pickle", pickle.dumps(snapshot([[
        entry("alloc", BASE, 4096, 0, T0, FRAMES), oom,
        entry("free_requested", BASE, 4096, 0, T0 + 2, FRAMES),
        entry("free_completed", BASE, 4096, 0, T0 + 3, FRAMES)]]), protocol=4))
    for name, value in bad_snapshots().items():
        write(name, pickle.dumps(value, protocol=4))


def bad_snapshots():
    """Snapshots the reader must refuse, each for one reason the tests check."""
    ok = [entry("alloc", BASE, 512, 0, T0, []), entry("free_requested", BASE, 512, 0, T0 + 1, [])]
    no_size = dict(ok[0])
    del no_size["size"]
    negative = dict(ok[0], size=-512)
    text_addr = dict(ok[0], addr="0x7f00")
    unknown = dict(ok[0], action="allocate")
    return {
        "bad_not_a_dict.pickle": [ok],
        "bad_no_device_traces.pickle": {"segments": [], "allocator_settings": {}},
        "bad_traces_not_a_list.pickle": {"device_traces": 7},
        "bad_entry_no_size.pickle": snapshot([[ok[0], no_size, ok[1]]]),
        "bad_entry_negative_size.pickle": snapshot([[ok[0], negative, ok[1]]]),
        "bad_entry_text_addr.pickle": snapshot([[ok[0], text_addr, ok[1]]]),
        "bad_entry_unknown_action.pickle": snapshot([[ok[0], unknown, ok[1]]]),
        "bad_entry_not_a_dict.pickle": snapshot([[ok[0], [1, 2], ok[1]]]),
        "bad_empty_traces.pickle": snapshot([[], []]),
        "bad_int_too_large.pickle": snapshot([[dict(ok[0], size=2**64), ok[1]]]),
        # A class: loading it needs Python (STACK_GLOBAL, REDUCE), which the
        # reader refuses by name.
        "bad_class.pickle": snapshot([[ok[0], ok[1], ValueError("not data")]]),
    }


if __name__ == "__main__":
    main()
