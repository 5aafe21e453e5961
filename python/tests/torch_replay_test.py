"""tools/frameworks/torch_replay.py (a trace through PyTorch's caching
allocator, the anchor beside tools/replay) on the CPU: its trace reader
(tools/frameworks/trace_events.py) reads every format as tools/replay does
(the same summary, the same messages for malformed lines, checked against the
replay binary), and the pass loop and the one-process-per-configuration
driver run against a stand-in torch module. Writes a JUnit XML report to
$XML_OUTPUT_FILE when Bazel asks for one.
"""

import gzip
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import types
import unittest
from contextlib import redirect_stderr, redirect_stdout

import junit_runner

ROOT = os.path.join(os.environ.get("TEST_SRCDIR", ""), os.environ.get("TEST_WORKSPACE", "gmr"))
FRAMEWORKS = os.path.join(ROOT, "tools", "frameworks")
REPLAY = os.path.join(ROOT, "tools", "replay", "replay")
TRACES = os.path.join(ROOT, "tools", "traces")
TESTDATA = os.path.join(ROOT, "tools", "replay", "testdata")
sys.path.insert(0, FRAMEWORKS)

import torch_replay  # noqa: E402
import trace_events  # noqa: E402

# A stand-in for the part of torch the replay uses: a caching allocator that
# rounds requests to 512 bytes and reserves in 2 MiB steps (20 MiB without
# expandable segments), never giving memory back; every call is logged.
STANDIN = r'''
import os
__version__ = "0.0+stand-in"
CONF = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
UNIT = (2 << 20) if "expandable_segments:True" in CONF else (20 << 20)
LIMIT = int(os.environ.get("STANDIN_LIMIT", str(1 << 40)))
NO_GPU = os.environ.get("STANDIN_NO_GPU") == "1"
calls = []


class OutOfMemoryError(RuntimeError):
    pass


class _State:
    def __init__(self):
        self.live = {}
        self.next = 1 << 32
        self.allocated = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0


state = _State()


class Stream:
    _next = [100]

    def __init__(self, device=None, handle=None):
        if handle is None:
            Stream._next[0] += 1
            handle = Stream._next[0]
        self.cuda_stream = handle
        self.device = device


def _alloc(size, stream):
    calls.append(("alloc", size, stream))
    rounded = -(-size // 512) * 512
    if state.allocated + rounded > LIMIT:
        raise OutOfMemoryError("stand-in: out of memory")
    ptr = state.next
    state.next += rounded
    state.live[ptr] = rounded
    state.allocated += rounded
    state.reserved = max(state.reserved, -(-state.allocated // UNIT) * UNIT)
    state.peak_allocated = max(state.peak_allocated, state.allocated)
    state.peak_reserved = max(state.peak_reserved, state.reserved)
    return ptr


def _delete(ptr):
    calls.append(("delete", ptr))
    state.allocated -= state.live.pop(ptr)


class _C:
    _cuda_cudaCachingAllocator_raw_alloc = staticmethod(_alloc)
    _cuda_cudaCachingAllocator_raw_delete = staticmethod(_delete)


class cuda:
    OutOfMemoryError = OutOfMemoryError
    Stream = Stream
    _default = Stream(handle=0)

    @staticmethod
    def is_available():
        return not NO_GPU

    @staticmethod
    def set_device(device):
        calls.append(("set_device", device))

    @staticmethod
    def default_stream(device=None):
        return cuda._default

    @staticmethod
    def get_device_name(device=None):
        return "stand-in GPU [%s]" % CONF

    @staticmethod
    def mem_get_info(device=None):
        return (80 << 30) - state.reserved - (500 << 20), 80 << 30

    @staticmethod
    def synchronize(device=None):
        pass

    @staticmethod
    def reset_peak_memory_stats(device=None):
        state.peak_allocated = state.allocated
        state.peak_reserved = state.reserved

    @staticmethod
    def memory_stats(device=None):
        return {"reserved_bytes.all.peak": state.peak_reserved,
                "allocated_bytes.all.peak": state.peak_allocated}

    @staticmethod
    def caching_allocator_alloc(size, device=None, stream=None):
        calls.append(("public", device))
        return _alloc(size, stream)

    @staticmethod
    def caching_allocator_delete(ptr):
        _delete(ptr)
'''


def standin(env=None):
    """A fresh stand-in torch module (its environment as in `env`)."""
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        module = types.ModuleType("torch")
        exec(STANDIN, module.__dict__)  # noqa: S102 (the test's own stand-in)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return module


def write(folder, name, text, compress=False):
    path = os.path.join(folder, name)
    data = text.encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if compress else data)
    return path


def replay_summary(path, *args):
    """tools/replay's summary line (up to 'live at end') or its error message."""
    out = subprocess.run([REPLAY, "--sim", "--stack", "host", *args, path], capture_output=True,
                         text=True)
    if out.returncode != 0:
        m = re.search(r"gmr replay: (.*)", out.stderr)
        return None, m.group(1) if m else out.stderr
    m = re.search(r"^(trace .*? live at end)", out.stdout, re.M)
    reserved = re.search(r"recorder reserved\s+(\S+)", out.stdout)
    return m.group(1), reserved.group(1)


class TraceReaderTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp()

    def python_summary(self, path, **kwargs):
        trace = trace_events.read(path, **kwargs)
        line = torch_replay.summary(trace).split(" live at end")[0] + " live at end"
        reserved = trace.reference_peak_reserved_bytes
        return line, "n/a" if reserved is None else "%.1f" % (reserved / 1048576.0)

    def test_every_format_reads_as_tools_replay_reads_it(self):
        rmm = write(self.folder, "rmm.csv", (
            "Thread,Time,Action,Pointer,Size,Stream\r\n"
            "7,15:47:02.841961,allocate,0x7f3c2c000000,1048576,0\r\n"
            "7,15:47:02.841990,allocate failure,0x0,1099511627776,7f3c2c000b40\r\n"
            "8,15:47:02.842001,allocate,7f3c2c100000,512,7f3c2c000b40\r\n"
            "8,15:47:02.842101,free,0x7f3c2c000000,1048576,0\r\n"
            "8,15:47:02.842201,free,0x7f3c2cf00000,64,0\r\n"), compress=True)
        cases = [(os.path.join(TRACES, "multistream.csv.gz"), ()),
                 (os.path.join(TRACES, "gpt2_graph_capture.csv.gz"), ()),
                 (os.path.join(TESTDATA, "small_p2.pickle"), ()),
                 (os.path.join(TESTDATA, "multistream.pickle.gz"), ()),
                 (os.path.join(TESTDATA, "with_oom.pickle"), ()),
                 (os.path.join(TESTDATA, "two_devices.pickle"), ("--snapshot-device", "1")),
                 (rmm, ())]
        for path, args in cases:
            with self.subTest(trace=os.path.basename(path)):
                device = int(args[1]) if args else None
                self.assertEqual(replay_summary(path, *args),
                                 self.python_summary(path, snapshot_device=device))
        capture = trace_events.read(os.path.join(TRACES, "gpt2_graph_capture.csv.gz"))
        self.assertEqual(1, capture.capture_count)
        self.assertEqual(1, sum(1 for e in capture.events if e[0] == trace_events.CAPTURE_BEGIN))

    def test_malformed_lines_give_tools_replays_messages(self):
        head = "action,addr,size,stream,time_us\n"
        cases = {
            "size.csv": head + "alloc,4096,1024,0,1\nfree_requested,4096,512,0,2\n",
            "twice.csv": head + "alloc,4096,1024,0,1\nalloc,4096,512,0,2\n",
            "zero.csv": head + "alloc,4096,0,0,1\n",
            "columns.csv": head + "alloc,4096,1024,0\n",
            "number.csv": head + "alloc,0x1000,1024,0,1\n",
            "action.csv": head + "allocate,4096,1024,0,1\n",
            "capture.csv": head + "capture_end,0,0,7,1\nalloc,4096,512,0,2\n",
            "header.csv": "addr,size\n1,2\n",
            "empty.csv": "",
        }
        for name, text in cases.items():
            with self.subTest(trace=name):
                path = write(self.folder, name, text)
                summary, message = replay_summary(path)
                self.assertIsNone(summary)
                with self.assertRaises(trace_events.TraceError) as e:
                    trace_events.read(path)
                self.assertEqual(message, str(e.exception))
        # Skipped and counted instead, as --skip-malformed does.
        path = write(self.folder, "skip.csv", head + "alloc,4096,0,0,1\nalloc,8192,512,0,2\n")
        trace = trace_events.read(path, skip_malformed=True)
        self.assertEqual((1, 1), (trace.malformed_count, trace.alloc_count))
        self.assertIn("skip.csv:2: allocation of 0 bytes", trace.first_malformed)

    def test_a_pickle_that_needs_classes_is_refused(self):
        with self.assertRaises(trace_events.TraceError) as e:
            trace_events.read(os.path.join(TESTDATA, "bad_class.pickle"))
        self.assertIn("needs the Python class builtins.ValueError", str(e.exception))
        with self.assertRaises(trace_events.TraceError) as e:
            trace_events.read(os.path.join(TESTDATA, "two_devices.pickle"))
        self.assertIn("choose one with --snapshot-device", str(e.exception))


class PassesTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp()
        # Streams 0 and 77; a free on another stream than the allocation's;
        # a capture window (skipped); a free of something never allocated;
        # one allocation left live.
        self.path = write(self.folder, "t.csv", (
            "action,addr,size,stream,time_us\n"
            "segment_alloc,0,20971520,0,0\n"
            "alloc,4096,1000,0,1\n"
            "alloc,8192,3145728,77,2\n"
            "capture_begin,0,0,77,3\n"
            "alloc,65536,512,77,4\n"
            "capture_end,0,0,77,5\n"
            "free_requested,4096,1000,77,6\n"
            "free_completed,4096,1000,77,7\n"
            "free_requested,999,64,0,8\n"
            "free_requested,8192,3145728,77,9\n"))
        self.trace = trace_events.read(self.path)

    def test_each_pass_replays_the_trace_and_reads_the_allocators_figures(self):
        torch = standin({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        r = torch_replay.run_passes(torch, self.trace, 2, device=0, entry="raw")
        self.assertEqual(2, len(r["passes"]))
        allocs = [c for c in torch.calls if c[0] == "alloc"]
        self.assertEqual([(1000, 0), (3145728, 101), (512, 101)] * 2,
                         [(c[1], c[2]) for c in allocs])  # stream 0: default; 77: one stream
        first, second = r["passes"]
        for p in (first, second):
            self.assertEqual((3, 2, 0, 1), (p["allocs"], p["frees"], p["failed"],
                                           p["live_at_end"]))
            self.assertEqual(5, p["calls"])
            self.assertEqual(4 << 20, p["peak_reserved_bytes"])  # 3 MiB and a bit, in 2 MiB steps
            self.assertEqual(1024 + 3145728 + 512, p["peak_allocated_bytes"])
        self.assertEqual({}, torch.state.live, "what a pass left live was freed")
        self.assertEqual(500 << 20, r["baseline_used_bytes"])
        self.assertEqual((500 << 20) + (4 << 20), second["device_used_bytes"])
        self.assertGreater(r["loop_ns"], 0)
        self.assertIn("expandable_segments:True", r["device_name"])
        # tools/replay's columns, then alloc MiB, device MiB and py ns.
        text = torch_replay.table(self.trace, [("torch(x)", r)])
        self.assertRegex(text, r"(?m)^torch\(x\)\s+1 cold\s+3\s+2\s+0\s+1\s+\d+\s+n/a\s+n/a\s+"
                               r"4\.0\s+1\.333\s+n/a\s+3\.0\s+504\.0\s+\d+$")
        self.assertRegex(text, r"(?m)^\s+2 warm\s+3\s+2\s+0\s+1\s")
        self.assertRegex(text, r"recorder reserved\s+20\.0\s+6\.663")

    def test_failed_allocations_are_counted_and_their_frees_skipped(self):
        torch = standin({"STANDIN_LIMIT": str(2 << 20)})
        r = torch_replay.run_passes(torch, self.trace, 1, entry="public")
        p = r["passes"][0]
        self.assertEqual((3, 1, 1, 1), (p["allocs"], p["frees"], p["failed"], p["skipped_frees"]))
        self.assertIn(("public", 0), torch.calls)
        self.assertIn("1 frees of failed allocations skipped",
                      torch_replay.table(self.trace, [("t", r)]))

    def test_no_gpu_or_no_raw_entry_is_said(self):
        torch = standin({"STANDIN_NO_GPU": "1"})
        with self.assertRaises(RuntimeError) as e:
            torch_replay.run_passes(torch, self.trace, 1)
        self.assertIn("no CUDA device", str(e.exception))
        torch = standin()
        del torch._C._cuda_cudaCachingAllocator_raw_alloc
        with self.assertRaises(RuntimeError) as e:
            torch_replay.run_passes(torch, self.trace, 1, entry="raw")
        self.assertIn("use --entry public", str(e.exception))


class DriverTest(unittest.TestCase):
    """main(): one child process per configuration, with the stand-in as torch."""

    def setUp(self):
        self.folder = tempfile.mkdtemp()
        package = os.path.join(self.folder, "site", "torch")
        os.makedirs(package)
        write(package, "__init__.py", STANDIN)
        self.env = dict(os.environ)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(self.folder, "site")] + [p for p in [self.env.get("PYTHONPATH")] if p])

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.env)

    def main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                status = torch_replay.main(list(argv))
            except SystemExit as e:
                status = e.code
        return status, out.getvalue(), err.getvalue()

    def test_each_configuration_runs_in_its_own_process(self):
        trace = os.path.join(TRACES, "multistream.csv.gz")
        report = os.path.join(self.folder, "out.json")
        status, out, err = self.main("--passes", "2", "--json", report, trace)
        self.assertEqual(0, status, err)
        self.assertIn("trace %s (pytorch): 1600 requests (800 allocs, 800 frees)" % trace, out)
        for config in torch_replay.DEFAULT_CONFIGS:
            self.assertIn("torch(%s)" % config, out)
            self.assertIn("stand-in GPU [%s]" % config, out)
        with open(report) as f:
            data = json.load(f)
        self.assertEqual(list(torch_replay.DEFAULT_CONFIGS),
                         [r["config"] for r in data["results"]])
        classic, expandable = data["results"]
        self.assertEqual(2, len(classic["passes"]))
        self.assertEqual(0, classic["passes"][0]["peak_reserved_bytes"] % (20 << 20))
        self.assertLess(expandable["passes"][0]["peak_reserved_bytes"],
                        classic["passes"][0]["peak_reserved_bytes"])

    def test_a_failing_process_is_reported_and_fails_the_run(self):
        os.environ["STANDIN_NO_GPU"] = "1"
        status, out, err = self.main("--config", "expandable_segments:True",
                                     os.path.join(TRACES, "multistream.csv.gz"))
        self.assertEqual(1, status)
        self.assertIn("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True failed", err)
        self.assertIn("no CUDA device", err)

    def test_bad_arguments_and_traces_say_what_is_wrong(self):
        for argv, words in [(["--passes", "0", "t"], "--passes 0: give 1 to 1000"),
                            (["--device", "-1", "t"], "--device -1"),
                            (["--config", "", "t"], "PYTORCH_CUDA_ALLOC_CONF value"),
                            (["--entry", "fast", "t"], "invalid choice")]:
            with self.subTest(argv=argv):
                status, _, err = self.main(*argv)
                self.assertEqual(2, status)
                self.assertIn(words, err)
        status, _, err = self.main(os.path.join(self.folder, "missing.csv"))
        self.assertEqual(1, status)
        self.assertIn("missing.csv", err)


if __name__ == "__main__":
    junit_runner.run(__name__, "gmr_torch_replay_python")
