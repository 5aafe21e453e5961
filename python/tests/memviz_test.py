"""gmr.torch's memory snapshots (gmr.memory_viz) on the simulation: a recorded
run of allocations and frees through the torch shim's entry points (what
PyTorch calls), dumped as PyTorch's snapshot pickle and replayed by
tools/replay, which must find the peak the shim's books recorded; the pickle
loads with Python's pickle and has the fields PyTorch's viewer and
torch.cuda._memory_viz read, its segments tiling gmr's pool chunks and VMM
runs; failed allocations, the ring's bound, stopping and clearing; bad
arguments. Writes a JUnit XML report to $XML_OUTPUT_FILE when Bazel asks.
"""

import ctypes
import os
import pickle
import random
import re
import subprocess
import sys
import tempfile
import unittest

import junit_runner

import gmr
import gmr.torch
from gmr import _capi, _lib, _segments, memory_viz

ROOT = os.path.join(os.environ.get("TEST_SRCDIR", ""), os.environ.get("TEST_WORKSPACE", "gmr"))
REPLAY = os.path.join(ROOT, "tools", "replay", "replay")
MiB = 1 << 20

SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size",
                "requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable",
                "frames", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
FRAME_KEYS = {"filename", "line", "name"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


def shim():
    return _lib.torch_lib()


def make_stream():
    lib = _lib.lib()
    lib.gmr_cuda_stream_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    s = ctypes.c_void_p()
    assert lib.gmr_cuda_stream_create(ctypes.byref(s)) == 0
    return s.value


def destroy_stream(stream):
    lib = _lib.lib()
    lib.gmr_cuda_stream_destroy.argtypes = [ctypes.c_void_p]
    assert lib.gmr_cuda_stream_destroy(stream) == 0


def device_stats(device):
    s = _capi.TorchDeviceStats()
    s.size = ctypes.sizeof(s)
    s.version = _capi.TORCH_DEVICE_STATS_VERSION
    assert shim().gmr_torch_get_device_stats(device, ctypes.byref(s)) == 0
    return s


def allocate_here(size, device, stream):
    """One allocation from a frame the snapshot must name."""
    return shim().gmr_torch_alloc(size, device, stream)


def replay(path, *args):
    """tools/replay --sim through a tracking stack: (summary's peak live MiB
    text, tracking's exact peak bytes, the whole output)."""
    out = subprocess.run([REPLAY, "--sim", "--stack", "tracking > pool > cuda(kind=device)",
                          *args, path], capture_output=True, text=True)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        raise AssertionError("replay failed (%d):\n%s" % (out.returncode, text))
    live = re.search(r"peak live ([\d.]+) MiB", text)
    tracking = re.search(r"tracking: peak (\d+) bytes", text)
    assert live and tracking, text
    return live.group(1), int(tracking.group(1)), text


class SnapshotTest(unittest.TestCase):
    """Each test gets fresh stacks of `SPEC` and an empty history."""

    SPEC = "pool > cuda(kind=device)"

    def setUp(self):
        shim()
        self.assertEqual(0, shim().gmr_torch_record_history(0, 0, None))
        self.assertEqual(0, shim().gmr_torch_clear_history())
        gmr.release_all()
        gmr.set_device_spec(self.SPEC)
        for device in (0, 1):  # the books count from here (nothing is live)
            self.assertEqual(0, shim().gmr_torch_reset_peak_stats(device))
            self.assertEqual(0, shim().gmr_torch_reset_accumulated_stats(device))
        self.live = []
        self.streams = []
        self.folder = tempfile.mkdtemp()

    def tearDown(self):
        for ptr, size, device, stream in self.live:
            shim().gmr_torch_free(ptr, size, device, stream)
        for stream in self.streams:
            destroy_stream(stream)
        self.assertEqual(0, shim().gmr_torch_record_history(0, 0, None))
        self.assertEqual(0, shim().gmr_torch_clear_history())
        gmr.release_all()
        gmr.set_device_spec(None)

    def alloc(self, size, device=0, stream=None):
        ptr = allocate_here(size, device, stream)
        self.live.append((ptr, size, device, stream))
        return ptr

    def free(self, index):
        ptr, size, device, stream = self.live.pop(index)
        shim().gmr_torch_free(ptr, size, device, stream)

    def workload(self, steps, device=0, seed=7):
        """A training-like mix on two streams, some allocations left live."""
        rng = random.Random(seed)
        streams = [None, make_stream()]
        self.streams.append(streams[1])
        sizes = [512, 1000, 4096, 65536, 1 << 20, 3 * MiB, 7 * MiB + 123]
        mine = []
        for _ in range(steps):
            if mine and rng.random() < 0.45:
                index = self.live.index(mine.pop(rng.randrange(len(mine))))
                self.free(index)
            else:
                self.alloc(rng.choice(sizes), device, rng.choice(streams))
                mine.append(self.live[-1])

    def dump(self):
        path = os.path.join(self.folder, "snapshot.pickle")
        gmr.torch.dump_snapshot(path)
        with open(path, "rb") as f:
            return path, pickle.load(f)

    def check_layout(self, data):
        """The fields PyTorch's viewer and torch.cuda._memory_viz read."""
        self.assertEqual({"segments", "device_traces", "allocator_settings",
                          "external_annotations"}, set(data))
        for seg in data["segments"]:
            self.assertEqual(SEGMENT_KEYS, set(seg))
            self.assertIsInstance(seg["segment_pool_id"], tuple)
            address = seg["address"]
            for block in seg["blocks"]:
                self.assertEqual(BLOCK_KEYS, set(block))
                self.assertIn(block["state"], STATES)
                self.assertEqual(address, block["address"], "blocks tile the segment")
                self.assertLessEqual(block["requested_size"], block["size"])
                address += block["size"]
                for frame in block["frames"]:
                    self.assertEqual(FRAME_KEYS, set(frame))
            self.assertEqual(seg["total_size"], address - seg["address"])
            allocated = [b for b in seg["blocks"] if b["state"] == "active_allocated"]
            self.assertEqual(seg["allocated_size"], sum(b["size"] for b in allocated))
            self.assertEqual(seg["requested_size"], sum(b["requested_size"] for b in allocated))
            # torch.cuda._memory_viz.segsum's check: free + internal + allocated == total.
            external = sum(b["size"] for b in seg["blocks"] if b["state"] != "active_allocated")
            internal = sum(b["size"] - b["requested_size"] for b in allocated)
            self.assertEqual(seg["total_size"], external + internal + seg["requested_size"])
        for trace in data["device_traces"]:
            for e in trace:
                keys = {"action", "size", "stream", "time_us", "frames"}
                keys.add("device_free" if e["action"] == "oom" else "addr")
                self.assertEqual(keys, set(e), e)

    def placed(self, data, device=0):
        """{address: requested size} of the active blocks of a device's segments."""
        return {b["address"]: b["requested_size"] for s in data["segments"]
                if s["device"] == device for b in s["blocks"] if b["state"] == "active_allocated"}


class RoundTripTest(SnapshotTest):
    def test_replaying_the_snapshot_gives_the_peak_the_books_recorded(self):
        gmr.torch.record_memory_history(max_entries=100_000)
        self.workload(600)
        books = device_stats(0)
        path, data = self.dump()
        self.check_layout(data)
        trace = data["device_traces"][0]
        allocs = [e for e in trace if e["action"] == "alloc"]
        self.assertEqual(books.allocation_count, len(allocs))
        self.assertEqual([], data["device_traces"][1])
        live_mib, peak, text = replay(path)
        self.assertEqual(books.peak_live_bytes, peak, text)
        self.assertEqual("%.1f" % (books.peak_live_bytes / MiB), live_mib)
        self.assertIn("%d live at end" % len(self.live), text)
        self.assertIn("2 streams", text)
        # Every live allocation is a block of the pool's chunks, with its frames.
        placed = self.placed(data)
        self.assertEqual({p: n for p, n, _, _ in self.live}, placed)
        blocks = [b for s in data["segments"] for b in s["blocks"]
                  if b["state"] == "active_allocated"]
        self.assertTrue(all(b["frames"][0]["name"] == "allocate_here" for b in blocks))
        self.assertEqual(__file__, allocs[0]["frames"][0]["filename"])
        self.assertEqual(sum(s["total_size"] for s in data["segments"]),
                         gmr.stack_stats(0)["held_bytes"])

    def test_each_device_replays_on_its_own(self):
        gmr.torch.record_memory_history()
        self.workload(100, device=0, seed=1)
        self.workload(80, device=1, seed=2)
        path, data = self.dump()
        self.check_layout(data)
        self.assertEqual({0, 1}, {s["device"] for s in data["segments"]})
        with self.assertRaises(AssertionError) as refused:
            replay(path)
        self.assertIn("choose one with --snapshot-device", str(refused.exception))
        for device in (0, 1):
            entries = data["device_traces"][device]
            live, peak = 0, 0
            for e in entries:
                live += e["size"] if e["action"] == "alloc" else 0
                live -= e["size"] if e["action"] == "free_requested" else 0
                peak = max(peak, live)
            self.assertEqual(peak, replay(path, "--snapshot-device", str(device))[1])

    def test_a_failed_allocation_is_an_oom_entry_the_replay_skips(self):
        gmr.torch.record_memory_history(context=None)
        self.alloc(4096)
        self.assertIsNone(shim().gmr_torch_mempool_alloc(4 << 30, 0, None))
        path, data = self.dump()
        self.check_layout(data)
        oom = [e for e in data["device_traces"][0] if e["action"] == "oom"]
        self.assertEqual(1, len(oom))
        self.assertEqual(4 << 30, oom[0]["size"])
        self.assertGreater(oom[0]["device_free"], 0)
        self.assertEqual([], oom[0]["frames"])  # context=None
        self.assertEqual(4096, replay(path)[1])


class LayoutsTest(SnapshotTest):
    SPEC = "vmm"

    def test_a_vmm_stack_gives_expandable_segments_holding_every_allocation(self):
        gmr.torch.record_memory_history()
        self.workload(300)
        path, data = self.dump()
        self.check_layout(data)
        self.assertTrue(data["segments"])
        self.assertTrue(all(s["is_expandable"] for s in data["segments"]))
        self.assertEqual({p: n for p, n, _, _ in self.live}, self.placed(data))
        self.assertEqual(device_stats(0).peak_live_bytes, replay(path)[1])


class UnlistedStackTest(SnapshotTest):
    SPEC = "cuda(kind=async)"

    def test_a_stack_that_lists_nothing_gives_a_segment_per_allocation(self):
        a = self.alloc(1000)
        b = self.alloc(MiB, stream=None)
        _, data = self.dump()
        self.check_layout(data)
        self.assertEqual(2, len(data["segments"]))
        self.assertEqual([(a, 1000), (b, MiB)],
                         sorted((s["address"], s["total_size"]) for s in data["segments"]))
        self.assertEqual([[], []], data["device_traces"])  # nothing recorded


class RecordingTest(SnapshotTest):
    def test_the_ring_keeps_the_newest_entries(self):
        gmr.torch.record_memory_history(max_entries=10)
        for _ in range(5):
            self.alloc(512)
            self.free(-1)
        self.alloc(2048)
        path, data = self.dump()
        trace = data["device_traces"][0]
        self.assertEqual(10, len(trace))
        self.assertEqual("alloc", trace[-1]["action"])
        self.assertEqual(2048, trace[-1]["size"])
        self.assertEqual(2048, replay(path)[1])

    def test_stopping_keeps_the_entries_and_clearing_forgets_them(self):
        gmr.torch.record_memory_history()
        self.alloc(512)
        gmr.torch.record_memory_history(enabled=None)
        self.alloc(1024)  # not recorded
        self.assertEqual(["alloc"], [e["action"] for e in gmr.torch.snapshot()["device_traces"][0]])
        gmr.torch.record_memory_history(clear_history=True)
        self.assertEqual([], gmr.torch.snapshot()["device_traces"][0])

    def test_bad_arguments_are_refused_and_change_nothing(self):
        for kwargs, words in [
                ({"enabled": "state"}, "no 'state'-only mode"),
                ({"enabled": "yes"}, "use 'all'"),
                ({"context": "python"}, "context='python'"),
                ({"stacks": "all"}, "Python frames only"),
                ({"max_entries": 0}, "from 1 to"),
                ({"max_entries": _capi.TORCH_HISTORY_MAX_ENTRIES + 1}, "from 1 to"),
                ({"max_entries": 2.5}, "give an int"),
                ({"max_entries": True}, "give an int")]:
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaises(ValueError) as e:
                    gmr.torch.record_memory_history(**kwargs)
                self.assertIn(words, str(e.exception))
        self.alloc(512)
        self.assertEqual([], gmr.torch.snapshot()["device_traces"][0])

    def test_recording_before_gmr_is_pytorchs_allocator_says_what_to_do(self):
        code = ("import gmr.torch\n"
                "try:\n"
                "    gmr.torch.record_memory_history()\n"
                "except RuntimeError as e:\n"
                "    print(e)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=dict(os.environ, GMR_TORCH_LIBRARY=""))
        self.assertIn("call gmr.torch.use() (or gmr.torch.mempool()) first", out.stdout,
                      out.stderr)

    def test_a_file_that_cannot_be_written_leaves_nothing_behind(self):
        with self.assertRaises(OSError):
            gmr.torch.dump_snapshot(os.path.join(self.folder, "missing", "x.pickle"))
        # A failure while writing: the file named keeps what it had, and no
        # temporary file stays.
        path = os.path.join(self.folder, "x.pickle")
        with open(path, "w") as f:
            f.write("before")

        def broken(*args, **kwargs):
            raise OSError("disk full")

        real, memory_viz.pickle.dump = memory_viz.pickle.dump, broken
        try:
            with self.assertRaises(OSError):
                gmr.torch.dump_snapshot(path)
        finally:
            memory_viz.pickle.dump = real
        self.assertEqual(["x.pickle"], os.listdir(self.folder))
        with open(path) as f:
            self.assertEqual("before", f.read())


class BuildSnapshotTest(unittest.TestCase):
    """gmr.memory_viz.build_snapshot and gmr._segments from hand-made books."""

    def test_blocks_holding_several_allocations_are_split_with_gaps(self):
        base = 1 << 40
        # A pool chunk of 8 MiB: a graph pool's 2 MiB chunk holding two of
        # PyTorch's blocks, a free block, a block freed and waiting for a
        # recorded stream, one allocation, and one allocation through the
        # stack that is not PyTorch's.
        rows = [(base, 8 * MiB, base, 2 * MiB, 2 * MiB, _capi.POOL_BLOCK_ALLOCATED),
                (base, 8 * MiB, base + 2 * MiB, MiB, 0, _capi.POOL_BLOCK_FREE),
                (base, 8 * MiB, base + 3 * MiB, MiB, 0, _capi.POOL_BLOCK_DEFERRED),
                (base, 8 * MiB, base + 4 * MiB, 2 * MiB, 2 * MiB - 100,
                 _capi.POOL_BLOCK_ALLOCATED),
                (base, 8 * MiB, base + 6 * MiB, 2 * MiB, 2 * MiB, _capi.POOL_BLOCK_ALLOCATED)]
        live = [(base + 4096, 1000, 0, 1), (base + MiB, 512, 0, 2),
                (base + 4 * MiB, 2 * MiB - 100, 0, 1),
                (base + 64 * MiB, 4096, 7, 0)]  # in no segment: one of its own
        extents = _segments.segments_from_blocks(rows)
        frames = {1: [{"filename": "a.py", "line": 1, "name": "f"}]}
        data = memory_viz.build_snapshot(
            [("alloc", 0, base + 4096, 1000, 0, 5, 1, 0),
             ("oom", 1, 0, 1 << 40, 3, 6, 0, 1234)],
            {0: ("pool", extents, live)}, 1, lambda c: frames.get(c, []))
        self.assertEqual(2, len(data["device_traces"]))  # device 1 from its entry
        self.assertEqual({"action": "oom", "device_free": 1234, "size": 1 << 40, "stream": 3,
                          "time_us": 6, "frames": []}, data["device_traces"][1][0])
        self.assertEqual(frames[1], data["device_traces"][0][0]["frames"])
        self.assertEqual(["pool", None], data["allocator_settings"]["gmr_spec"])
        chunk, alone = data["segments"]
        self.assertEqual((base + 64 * MiB, 4096, 7), (alone["address"], alone["total_size"],
                                                      alone["stream"]))
        states = [(b["address"] - base, b["size"], b["requested_size"], b["state"])
                  for b in chunk["blocks"]]
        self.assertEqual([
            (0, 4096, 0, "inactive"),
            (4096, 1000, 1000, "active_allocated"),
            (5096, MiB - 5096, 0, "inactive"),
            (MiB, 512, 512, "active_allocated"),
            (MiB + 512, MiB - 512, 0, "inactive"),
            (2 * MiB, MiB, 0, "inactive"),
            (3 * MiB, MiB, MiB, "active_pending_free"),
            (4 * MiB, 2 * MiB, 2 * MiB - 100, "active_allocated"),
            (6 * MiB, 2 * MiB, 2 * MiB, "active_allocated"),
        ], states)
        self.assertEqual(frames[1], chunk["blocks"][1]["frames"])
        self.assertEqual(8 * MiB, chunk["total_size"])
        self.assertEqual(1000 + 512 + 4 * MiB, chunk["allocated_size"])
        self.assertEqual(1000 + 512 + 4 * MiB + MiB, chunk["active_size"])
        # It pickles with the subset tools/replay reads: round trip.
        self.assertEqual(data, pickle.loads(pickle.dumps(data, memory_viz.PICKLE_PROTOCOL)))

    def test_vmm_regions_become_runs_of_mapped_memory(self):
        base = 1 << 41
        rows = [(base, MiB, _capi.VMM_REGION_LIVE, 0),
                (base + MiB, MiB, _capi.VMM_REGION_FREE, 0),
                (base + 2 * MiB, 2 * MiB, _capi.VMM_REGION_HOLE, 0),
                (base + 4 * MiB, MiB, _capi.VMM_REGION_ZOMBIE, 0),
                (base + 5 * MiB, MiB, _capi.VMM_REGION_ASLEEP, 0),
                (base + 8 * MiB, MiB, _capi.VMM_REGION_LIVE, 1)]
        extents = _segments.segments_from_regions(rows)
        self.assertEqual([(base, 2 * MiB), (base + 4 * MiB, MiB), (base + 8 * MiB, MiB)],
                         [(a, sum(b[1] for b in blocks)) for a, blocks, _ in extents])
        self.assertTrue(all(e[2] for e in extents))

    def test_unknown_states_and_actions_are_refused(self):
        with self.assertRaises(ValueError):
            _segments.segments_from_blocks([(0, 512, 0, 512, 0, 9)])
        with self.assertRaises(ValueError):
            memory_viz.build_snapshot([("segment_alloc", 0, 0, 512, 0, 0, 0, 0)], {}, 1)


if __name__ == "__main__":
    junit_runner.run(__name__, "gmr_memviz_python")
