"""The Python package on the simulation (GMR_CUDA_SIM=devices=2,memory=1GiB, set by
run_python_test.sh): loading, spec errors as exceptions, allocation errors, the
stats dict, the torch shim's entry points through ctypes, and gmr.torch.use()
against a stand-in torch module (the real PyTorch runs on the GPU machine:
tools/frameworks/check_torch.py), including how use() builds the shim through
a stand-in torch.utils.cpp_extension and falls back when it cannot. Writes a
JUnit XML report to $XML_OUTPUT_FILE when Bazel asks for one.
"""

import ctypes
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
import warnings

import junit_runner

import gmr
import gmr.cupy
import gmr.torch
from gmr import _lib

GIB = 1 << 30
# The shim Bazel builds (no PyTorch headers); the stand-in cpp_extension
# "builds" by copying it.
SHIM_WITHOUT_C10 = os.environ["GMR_TORCH_LIBRARY"]


class GmrTest(unittest.TestCase):
    def setUp(self):
        os.environ.pop("GMR_STACK", None)
        gmr.set_device_spec(None)

    def tearDown(self):
        gmr.release_all()
        gmr.set_device_spec(None)
        os.environ.pop("GMR_STACK", None)


class LoadingTest(GmrTest):
    def test_loads_from_the_configured_folder_on_the_simulation(self):
        self.assertRegex(gmr.version(), r"^\d+\.\d+\.\d+$")
        self.assertTrue(gmr.simulated())
        self.assertEqual(2, gmr.device_count())
        self.assertEqual(os.environ["GMR_LIBRARY_DIR"], os.path.dirname(_lib.lib_path()))
        self.assertEqual(os.environ["GMR_TORCH_LIBRARY"], _lib.torch_lib_path())

    def test_missing_library_names_the_places_searched(self):
        code = ("import os, gmr._lib as l\n"
                "try:\n    l.lib()\nexcept OSError as e:\n    print(e)\n")
        env = dict(os.environ, GMR_LIBRARY_DIR="/nonexistent/gmr")
        import subprocess  # noqa: PLC0415
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout
        # Either another search place had a library (a source tree with
        # bazel-bin), or the message lists where it looked.
        if "not found" in out:
            self.assertIn("/nonexistent/gmr/libgmr.so", out)
            self.assertIn("GMR_LIBRARY_DIR", out)


class SpecErrorTest(GmrTest):
    def test_check_spec_raises_spec_error_with_the_place(self):
        gmr.check_spec("tracking > pool > cuda(kind=async)")
        with self.assertRaises(gmr.SpecError) as cm:
            gmr.check_spec("pool > cuda(kidn=async)")
        self.assertIsInstance(cm.exception, ValueError)
        self.assertIn("spec:1:", str(cm.exception))
        self.assertIn("kidn", str(cm.exception))
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)

    def test_nccl_components_need_their_library_loaded(self):
        # The test build holds libgmr_nccl already, registered as it loaded;
        # loading it again is a no-op, and only gmr's libraries are known.
        gmr.load_library("nccl")
        gmr.check_spec("pool > chunk_listener > cumem")
        with self.assertRaises(ValueError):
            gmr.load_library("cuda")

    def test_malformed_set_spec_is_refused_and_the_previous_stays(self):
        gmr.set_device_spec("cuda(kind=device)")
        with self.assertRaises(gmr.SpecError):
            gmr.set_device_spec("pool >")
        gmr.device_resource(0)
        self.assertEqual("cuda(kind=device)", gmr.device_spec(0))

    def test_malformed_gmr_stack_fails_at_the_first_allocation(self):
        os.environ["GMR_STACK"] = "pool > cuda(kidn=async)"
        with self.assertRaises(gmr.SpecError) as cm:
            gmr.allocate(0, 4096)
        self.assertIn("GMR_STACK:1:", str(cm.exception))
        self.assertIn("cannot create the memory resource of device 0", str(cm.exception))
        self.assertIsNone(gmr.device_spec(0))
        os.environ["GMR_STACK"] = "cuda(kind=device)"
        ptr = gmr.allocate(0, 4096)
        gmr.deallocate(0, ptr, 4096)

    def test_a_device_that_does_not_exist_is_not_a_spec_error(self):
        with self.assertRaises(gmr.GmrError) as cm:
            gmr.device_resource(5)
        self.assertNotIsInstance(cm.exception, gmr.SpecError)
        self.assertIn("device 5 does not exist", str(cm.exception))


class AllocationTest(GmrTest):
    def test_allocate_free_and_stats(self):
        gmr.set_device_spec("tracking > limiting(limit=64MiB) > pool > cuda(kind=async)")
        ptr = gmr.allocate(1, 4096)
        self.assertNotEqual(0, ptr)
        self.assertEqual(0, ptr % 256)
        self.assertEqual(0, gmr.allocate(1, 0))
        s = gmr.stack_stats(1)
        self.assertEqual(1, s["device"])
        self.assertEqual("tracking > limiting(limit=64MiB) > pool > cuda(kind=async)", s["spec"])
        self.assertEqual(["device_guard", "tracking_adaptor", "limiting_adaptor", "pool_resource",
                          "cuda_resource"], [l["type"] for l in s["layers"]])
        tracking = s["layers"][1]
        self.assertEqual({"current": 4096, "peak": 4096, "total": 4096}, tracking["bytes"])
        self.assertEqual(4096, tracking["owners"]["0x0"]["bytes"]["current"])
        self.assertEqual(64 << 20, s["layers"][2]["limit_bytes"])
        self.assertGreater(s["held_bytes"], 0)
        gmr.deallocate(1, ptr, 4096)
        s = gmr.stack_stats(1)
        self.assertEqual({"current": 0, "peak": 4096, "total": 4096}, s["layers"][1]["bytes"])
        self.assertGreater(gmr.trim(1), 0)

    def test_out_of_memory_and_limits_raise_with_gmrs_message(self):
        gmr.set_device_spec("limiting(limit=1MiB) > cuda(kind=device)")
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            gmr.allocate(0, 2 << 20)
        self.assertIsInstance(cm.exception, MemoryError)
        self.assertIn("GMR_ERR_LIMIT_EXCEEDED", str(cm.exception))
        self.assertIn("stack: limiting(limit=1MiB) > cuda(kind=device)", str(cm.exception))
        gmr.release_all()
        gmr.set_device_spec("cuda(kind=device)")
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            gmr.allocate(1, 2 * GIB)
        self.assertIn("cudaMalloc", str(cm.exception))

    def test_a_bad_free_is_refused_by_a_tracking_layer(self):
        gmr.set_device_spec("tracking > cuda(kind=device)")
        with self.assertRaises(gmr.GmrError) as cm:
            gmr.deallocate(0, 0x1000, 64)
        self.assertEqual("GMR_ERR_UNKNOWN_POINTER", cm.exception.status)

    def test_threads_allocate_on_both_devices(self):
        gmr.set_device_spec("tracking > pool > cuda(kind=async)")
        errors = []

        def work(device):
            try:
                for i in range(200):
                    n = 256 * (1 + i % 9)
                    gmr.deallocate(device, gmr.allocate(device, n), n)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(t % 2,)) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual([], errors)
        for d in (0, 1):
            self.assertEqual(0, gmr.stack_stats(d)["layers"][1]["bytes"]["current"])


class TorchShimTest(GmrTest):
    """The shim's C entry points, called through ctypes as PyTorch would."""

    def setUp(self):
        super().setUp()
        self.shim = _lib.torch_lib()

    def test_mempool_entry_points_and_refused_frees(self):
        gmr.set_device_spec("tracking > cuda(kind=device)")
        before = gmr.torch.counters()
        p = self.shim.gmr_torch_mempool_alloc(2 << 20, 1, None)
        self.assertTrue(p)
        self.assertEqual(before["live_count"] + 1, gmr.torch.counters()["live_count"])
        self.shim.gmr_torch_free(p, 2 << 20, 1, None)  # the direct entry: refused
        self.assertIn("other mode", gmr.torch.last_error())
        self.shim.gmr_torch_free(0x1000, 64, 0, None)
        self.assertIn("refused to free 0x1000", gmr.torch.last_error())
        self.assertIn("nothing was passed to CUDA", gmr.torch.last_error())
        after = gmr.torch.counters()
        self.assertEqual(before["refused_free_count"] + 2, after["refused_free_count"])
        self.shim.gmr_torch_mempool_free(p, 2 << 20, 1, None)
        self.assertEqual(before["live_count"], gmr.torch.counters()["live_count"])

    def test_mempool_alloc_reports_a_malformed_gmr_stack(self):
        os.environ["GMR_STACK"] = "pool > cuda(kidn=async)"
        self.assertIsNone(self.shim.gmr_torch_mempool_alloc(4096, 0, None))
        self.assertIn("GMR_STACK:1:", gmr.torch.last_error())

    def test_direct_alloc_and_stats_per_stream(self):
        gmr.set_device_spec("tracking > pool > cuda(kind=async)")
        p = self.shim.gmr_torch_alloc(4096, 0, None)
        self.assertTrue(p)
        s = gmr.torch.stats(0)
        self.assertEqual(4096, s["current_bytes"])
        self.assertEqual(4096, s["peak_bytes"])
        self.assertEqual({"current": 4096, "peak": 4096, "total": 4096}, s["per_stream"]["0x0"])
        self.assertGreaterEqual(s["shim"]["live_count"], 1)
        self.shim.gmr_torch_free(p, 4096, 0, None)
        s = gmr.torch.stats(0)
        self.assertEqual(0, s["current_bytes"])
        self.assertEqual(4096, s["peak_bytes"])
        self.assertGreater(s["held_bytes"], 0)
        self.shim.gmr_torch_reset()
        self.assertEqual(0, gmr.torch.stats(0)["held_bytes"])

    def test_stats_without_a_tracking_layer(self):
        gmr.set_device_spec("pool > cuda(kind=async)")
        p = self.shim.gmr_torch_alloc(4096, 1, None)
        s = gmr.torch.stats(1)
        self.assertIsNone(s["current_bytes"])
        self.assertEqual({}, s["per_stream"])
        self.assertGreater(s["held_bytes"], 0)
        self.shim.gmr_torch_free(p, 4096, 1, None)

    def test_this_build_raises_standard_exceptions(self):
        self.assertFalse(self.shim.gmr_torch_raises_torch_errors())


FAKE_TORCH = {
    "torch/__init__.py": "__version__ = '0.0+stand-in'\nfrom . import cuda, _C\n",
    "torch/_C.py": textwrap.dedent("""\
        _GLIBCXX_USE_CXX11_ABI = True
        def _pluggable(name):
            def refuse(*args, **kwargs):
                raise RuntimeError("pluggable does not yet support " + name)
            refuse.__name__ = name
            return refuse
        _cuda_checkPoolLiveAllocations = _pluggable("checkPoolLiveAllocations")
        _cuda_getCheckpointState = _pluggable("getCheckpointState")
        _cuda_setCheckpointPoolState = _pluggable("setCheckpointPoolState")
        _cuda_memoryStats = _pluggable("getDeviceStats")
        _cuda_resetPeakMemoryStats = _pluggable("resetPeakStats")
        _cuda_resetAccumulatedMemoryStats = _pluggable("resetAccumulatedStats")
        _cuda_memorySnapshot = _pluggable("snapshot")
        """),
    "torch/cuda/__init__.py": textwrap.dedent("""\
        from . import memory
        def is_initialized():
            return False
        def current_device():
            return 0
        def device_count():
            return 2
        """),
    "torch/cuda/memory.py": textwrap.dedent("""\
        import ctypes
        HOOKS = ["set_init_fn", "set_reset_fn", "set_memory_fraction_fn", "set_record_stream_fn",
                 "set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn", "set_release_pool"]
        class _Raw:
            def __init__(self):
                self.hooks = {}
            def __getattr__(self, name):
                if name in HOOKS:
                    return lambda address: self.hooks.__setitem__(name, address)
                raise AttributeError(name)
        class CUDAPluggableAllocator:
            def __init__(self, path, alloc_fn_name, free_fn_name):
                lib = ctypes.CDLL(path)
                self.path = path
                self.alloc = ctypes.cast(getattr(lib, alloc_fn_name), ctypes.c_void_p).value
                self.free = ctypes.cast(getattr(lib, free_fn_name), ctypes.c_void_p).value
                self._raw = _Raw()
            def allocator(self):
                return self._raw
        swapped = []
        def change_current_allocator(allocator):
            if swapped:
                raise RuntimeError("Can't swap an already initialized allocator")
            swapped.append(allocator)
        """),
    "torch/utils/__init__.py": "",
    # torch.utils.cpp_extension's load(): records its arguments (a JSON line
    # per call in $FAKE_CPP_EXTENSION_LOG), then fails with
    # $FAKE_CPP_EXTENSION_ERROR, or "builds" by copying $FAKE_CPP_EXTENSION_LIBRARY
    # to BUILD_DIRECTORY/NAME$FAKE_CPP_EXTENSION_SUFFIX.so and returns its path.
    "torch/utils/cpp_extension.py": textwrap.dedent("""\
        import json, os, shutil
        CUDA_HOME = None
        def library_paths(device_type="cpu"):
            return [os.path.join(os.path.dirname(os.path.dirname(__file__)), "lib")]
        def include_paths(device_type="cpu"):
            return [os.path.join(os.path.dirname(os.path.dirname(__file__)), "include")]
        def load(name, sources, extra_cflags=None, extra_cuda_cflags=None,
                 extra_sycl_cflags=None, extra_ldflags=None, extra_include_paths=None,
                 build_directory=None, verbose=False, with_cuda=None, with_sycl=None,
                 is_python_module=True, is_standalone=False, keep_intermediates=True):
            call = dict(name=name, sources=sources, extra_cflags=extra_cflags,
                        extra_ldflags=extra_ldflags, extra_include_paths=extra_include_paths,
                        build_directory=build_directory, verbose=verbose, with_cuda=with_cuda,
                        is_python_module=is_python_module, is_standalone=is_standalone,
                        cxx=os.environ.get("CXX"))
            log = os.environ.get("FAKE_CPP_EXTENSION_LOG")
            if log:
                with open(log, "a") as f:
                    f.write(json.dumps(call) + "\\n")
            if os.environ.get("FAKE_CPP_EXTENSION_ERROR"):
                raise RuntimeError(os.environ["FAKE_CPP_EXTENSION_ERROR"])
            os.makedirs(build_directory, exist_ok=True)
            out = os.path.join(build_directory,
                               name + os.environ.get("FAKE_CPP_EXTENSION_SUFFIX", "") + ".so")
            shutil.copyfile(os.environ["FAKE_CPP_EXTENSION_LIBRARY"], out)
            return out
        """),
}

_FAKE_ENV = ("FAKE_CPP_EXTENSION_LOG", "FAKE_CPP_EXTENSION_ERROR", "FAKE_CPP_EXTENSION_LIBRARY",
             "FAKE_CPP_EXTENSION_SUFFIX")


def _calls(log):
    """The stand-in load()'s recorded calls."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


class StandInTorchTest(GmrTest):
    """Writes the stand-in torch package into a temporary folder."""

    def setUp(self):
        super().setUp()
        os.environ["GMR_TORCH_BUILD"] = "0"  # the stand-in has no headers to build against
        self.real_torch_missing = importlib.util.find_spec("torch") is None
        self.tmp = tempfile.TemporaryDirectory()
        for path, text in FAKE_TORCH.items():
            full = os.path.join(self.tmp.name, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)

    def tearDown(self):
        if "torch" in sys.modules:
            gmr._torch_allocator_api.uninstall(sys.modules["torch"])
        for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            del sys.modules[name]
        if self.tmp.name in sys.path:
            sys.path.remove(self.tmp.name)
        gmr.torch._mode = None
        os.environ.pop("GMR_TORCH_BUILD", None)
        for name in _FAKE_ENV:
            os.environ.pop(name, None)
        self.tmp.cleanup()
        super().tearDown()


class TorchUseWithAStandInTest(StandInTorchTest):
    """gmr.torch.use()'s plumbing against a stand-in torch module."""

    def test_without_pytorch_use_says_what_is_missing(self):
        if not self.real_torch_missing:
            self.skipTest("PyTorch is installed here")
        with self.assertRaises(ImportError) as cm:
            gmr.torch.use()
        self.assertIn("gmr.torch needs PyTorch", str(cm.exception))

    def test_use_hands_the_shims_functions_and_hooks_to_pytorch(self):
        if not self.real_torch_missing:
            self.skipTest("PyTorch is installed here: the stand-in would not be imported")
        sys.path.insert(0, self.tmp.name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gmr.torch.use("tracking > pool > cuda(kind=async)")
        self.assertTrue(any("built without PyTorch's headers" in str(w.message) for w in caught))
        import torch  # the stand-in  # noqa: PLC0415
        (allocator,) = torch.cuda.memory.swapped
        address = lambda name: ctypes.cast(getattr(_lib.torch_lib(), name), ctypes.c_void_p).value  # noqa: E731
        self.assertEqual(address("gmr_torch_alloc"), allocator.alloc)
        self.assertEqual(address("gmr_torch_free"), allocator.free)
        for setter, symbol in gmr.torch._HOOKS:
            self.assertEqual(address(symbol), allocator.allocator().hooks[setter], setter)
        self.assertEqual("direct", gmr.torch.mode())
        self.assertEqual("tracking > pool > cuda(kind=async)", gmr.torch.stats(0)["spec"])
        with self.assertRaises(RuntimeError) as cm:
            gmr.torch.use()
        self.assertIn("called already", str(cm.exception))
        # PyTorch's own refusal (CUDA already initialised) keeps its text.
        gmr.torch._mode = None
        with self.assertRaises(RuntimeError) as cm:
            gmr.torch.use()
        self.assertIn("Can't swap an already initialized allocator", str(cm.exception))
        self.assertIn("before CUDA is initialised", str(cm.exception))

    def test_use_answers_pytorchs_allocator_queries_from_gmrs_figures(self):
        if not self.real_torch_missing:
            self.skipTest("PyTorch is installed here: the stand-in would not be imported")
        sys.path.insert(0, self.tmp.name)
        import torch  # the stand-in  # noqa: PLC0415
        refusing = torch._C._cuda_memoryStats
        with self.assertRaises(gmr.SpecError) as cm:
            gmr.torch.use("graph_arena > pool > cuda(kind=device)")
        self.assertIn("remove graph_arena(...) from the spec", str(cm.exception))
        self.assertIs(refusing, torch._C._cuda_memoryStats, "nothing installed after a refusal")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gmr.torch.use("tracking > pool > cuda(kind=device)")
        self.assertTrue(gmr._torch_allocator_api.installed())
        shim = _lib.torch_lib()
        torch._C._cuda_resetAccumulatedMemoryStats(0)
        torch._C._cuda_resetPeakMemoryStats(0)
        p = shim.gmr_torch_alloc(3000, 0, None)
        q = shim.gmr_torch_alloc(5000, 0, None)
        shim.gmr_torch_free(p, 3000, 0, None)
        stats = torch._C._cuda_memoryStats(0)
        flat = {}
        for key, value in stats.items():
            if isinstance(value, dict):
                for k2, v2 in value.items():
                    if isinstance(v2, dict):
                        for k3, v3 in v2.items():
                            flat["%s.%s.%s" % (key, k2, k3)] = v3
                    else:
                        flat["%s.%s" % (key, k2)] = v2
            else:
                flat[key] = value
        self.assertEqual(122, len(flat), "PyTorch's memory_stats() has 122 keys")
        self.assertEqual(5000, flat["allocated_bytes.all.current"])
        self.assertEqual(8000, flat["allocated_bytes.all.peak"])
        self.assertEqual(2, flat["allocation.all.allocated"])
        self.assertEqual(1, flat["allocation.all.freed"])
        self.assertGreater(flat["reserved_bytes.all.current"], 0)
        torch._C._cuda_resetPeakMemoryStats(0)
        self.assertEqual(5000, torch._C._cuda_memoryStats(0)["allocated_bytes"]["all"]["peak"])
        shim.gmr_torch_free(q, 5000, 0, None)
        # Graph trees' queries on a pool gmr does not know.
        self.assertTrue(torch._C._cuda_checkPoolLiveAllocations(0, (77, 1), set()))
        self.assertFalse(torch._C._cuda_checkPoolLiveAllocations(0, (77, 1), {0x1000}))
        with self.assertRaises(RuntimeError):
            torch._C._cuda_getCheckpointState(0, (77, 1))
        with self.assertRaises(TypeError):
            torch._C._cuda_setCheckpointPoolState(0, object(), [], [])
        snapshot = torch._C._cuda_memorySnapshot(None)
        self.assertEqual({"segments", "device_traces", "allocator_settings",
                          "external_annotations"}, set(snapshot))
        gmr._torch_allocator_api.uninstall(torch)
        self.assertIs(refusing, torch._C._cuda_memoryStats)

    def test_use_without_a_spec_takes_the_library_default(self):
        if not self.real_torch_missing:
            self.skipTest("PyTorch is installed here: the stand-in would not be imported")
        sys.path.insert(0, self.tmp.name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gmr.torch.use()
        self.assertEqual(gmr.FRAMEWORK_DEFAULT_SPEC, "vmm")
        self.assertEqual("vmm", gmr.torch.stats(0)["spec"])

    def test_use_checks_the_spec_before_touching_pytorch(self):
        if not self.real_torch_missing:
            self.skipTest("PyTorch is installed here")
        sys.path.insert(0, self.tmp.name)
        with self.assertRaises(gmr.SpecError):
            gmr.torch.use("limiting(limt=1GiB) > cuda")
        import torch  # noqa: PLC0415
        self.assertEqual([], torch.cuda.memory.swapped)

    def test_cupy_module_imports_without_cupy(self):
        if importlib.util.find_spec("cupy") is not None:
            self.skipTest("CuPy is installed here")
        with self.assertRaises(ImportError) as cm:
            gmr.cupy.use()
        self.assertIn("gmr.cupy needs CuPy", str(cm.exception))


class BuildShimTest(StandInTorchTest):
    """gmr.torch.build_shim() goes through torch.utils.cpp_extension.load."""

    def setUp(self):
        super().setUp()
        if not self.real_torch_missing:
            self.skipTest("PyTorch is installed here: the stand-in would not be imported")
        sys.path.insert(0, self.tmp.name)
        self.log = os.path.join(self.tmp.name, "calls.jsonl")
        os.environ["FAKE_CPP_EXTENSION_LOG"] = self.log
        os.environ["FAKE_CPP_EXTENSION_LIBRARY"] = SHIM_WITHOUT_C10

    def test_build_shim_hands_cpp_extension_a_plain_shared_library(self):
        out_dir = os.path.join(self.tmp.name, "out")
        before = os.environ.get("CXX")
        path = gmr.torch.build_shim(out_dir=out_dir, cxx="my-g++", verbose=True)
        self.assertEqual(os.path.join(out_dir, "libgmr_torch_c10.so"), path)
        self.assertTrue(os.path.exists(path))
        self.assertEqual(before, os.environ.get("CXX"), "CXX is put back")
        (call,) = _calls(self.log)
        self.assertEqual("libgmr_torch_c10", call["name"])  # cpp_extension writes NAME.so
        self.assertFalse(call["is_python_module"])
        self.assertFalse(call["is_standalone"])
        self.assertFalse(call["with_cuda"])
        self.assertTrue(call["verbose"])
        self.assertEqual("my-g++", call["cxx"])
        self.assertEqual(out_dir, call["build_directory"])
        root, include = gmr.torch._source_root()
        self.assertEqual([os.path.join(root, "integrations", "torch", f)
                          for f in ("chunk_streams.cc", "errors.cc", "graph_pools.cc",
                                    "history.cc", "storages.cc", "torch_allocator.cc")],
                         call["sources"])
        for source in call["sources"]:
            self.assertTrue(os.path.exists(source), source)
        self.assertEqual([root, include], call["extra_include_paths"][:2])
        self.assertIn("-DGMR_TORCH_WITH_C10", call["extra_cflags"])
        self.assertIn("-D_GLIBCXX_USE_CXX11_ABI=1", call["extra_cflags"])
        flags = call["extra_ldflags"]
        gmr_lib = os.path.realpath(_lib.lib_path())
        script = os.path.join(out_dir, "libgmr_torch_c10.map")
        self.assertIn("-Wl,--version-script=" + script, flags)
        with open(script) as f:
            self.assertEqual("{ global: gmr_torch_*; local: *; };\n", f.read())
        self.assertIn("-Wl,-soname,libgmr_torch_c10.so", flags)
        self.assertIn("-l:" + os.path.basename(gmr_lib), flags)
        self.assertIn("-Wl,-rpath," + os.path.dirname(gmr_lib), flags)
        self.assertIn("-lc10_cuda", flags)
        torch_lib = os.path.join(self.tmp.name, "torch", "lib")
        self.assertIn("-L" + torch_lib, flags)
        self.assertIn("-Wl,-rpath," + torch_lib, flags)

    def test_a_renamed_build_lands_under_the_name_gmr_loads(self):
        # cpp_extension names a second build in one process NAME_v1.so.
        os.environ["FAKE_CPP_EXTENSION_SUFFIX"] = "_v1"
        out_dir = os.path.join(self.tmp.name, "out")
        path = gmr.torch.build_shim(out_dir=out_dir)
        self.assertEqual(os.path.join(out_dir, "libgmr_torch_c10.so"), path)
        self.assertTrue(os.path.exists(path))
        self.assertFalse(os.path.exists(os.path.join(out_dir, "libgmr_torch_c10_v1.so")))

    def test_a_failed_build_raises_cpp_extensions_error(self):
        os.environ["FAKE_CPP_EXTENSION_ERROR"] = "Error building extension 'libgmr_torch_c10'"
        with self.assertRaises(RuntimeError) as cm:
            gmr.torch.build_shim(out_dir=os.path.join(self.tmp.name, "out"))
        self.assertIn("Error building extension", str(cm.exception))


# What each fresh process runs: gmr.torch.use() (after counters() when asked),
# then one JSON line: the shim loaded, the warnings, or the exception.
USE_IN_A_FRESH_PROCESS = textwrap.dedent("""\
    import json, sys, warnings
    import gmr, gmr.torch
    from gmr import _lib
    result = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if "counters-first" in sys.argv:
                gmr.torch.counters()
            gmr.torch.use("tracking > cuda(kind=device)")
            result["mode"] = gmr.torch.mode()
        except Exception as e:
            result["error"] = "%s: %s" % (type(e).__name__, e)
    result["loaded"] = _lib.loaded_torch_lib_path()
    result["warnings"] = ["%s: %s" % (w.category.__name__, w.message) for w in caught]
    print(json.dumps(result))
    """)


class UseBuildsTheShimTest(StandInTorchTest):
    """use() builds the shim on first use, once, or says why it cannot (each
    case in a fresh process: a process loads one shim)."""

    def setUp(self):
        super().setUp()
        if not self.real_torch_missing:
            self.skipTest("PyTorch is installed here: the stand-in would not be imported")
        self.log = os.path.join(self.tmp.name, "calls.jsonl")
        self.cache = os.path.join(self.tmp.name, "cache")
        # A library folder with libgmr.so but no torch shim (the runfiles'
        # dist/), and one that has the shim without PyTorch's headers too.
        self.with_shim = os.path.join(self.tmp.name, "lib_with_shim")
        os.makedirs(self.with_shim)
        libdir = os.environ["GMR_LIBRARY_DIR"]
        for name in os.listdir(libdir):
            os.symlink(os.path.join(libdir, name), os.path.join(self.with_shim, name))
        os.symlink(SHIM_WITHOUT_C10, os.path.join(self.with_shim, "libgmr_torch.so"))

    def run_use(self, *args, **env):
        full = dict(os.environ)
        for name in ("GMR_TORCH_LIBRARY", "GMR_TORCH_BUILD"):
            full.pop(name, None)
        full.update(PYTHONPATH=os.pathsep.join([self.tmp.name, full["PYTHONPATH"]]),
                    GMR_TORCH_CACHE_DIR=self.cache, FAKE_CPP_EXTENSION_LOG=self.log,
                    FAKE_CPP_EXTENSION_LIBRARY=SHIM_WITHOUT_C10)
        full.update(env)
        run = subprocess.run([sys.executable, "-c", USE_IN_A_FRESH_PROCESS] + list(args),
                             env=full, capture_output=True, text=True)
        self.assertEqual(0, run.returncode, run.stderr)
        return json.loads(run.stdout.strip().splitlines()[-1])

    def cached_shim(self):
        (folder,) = os.listdir(self.cache)
        self.assertRegex(folder, r"^torch-0\.0\+stand-in-gmr-\d+\.\d+\.\d+-abi1$")
        return os.path.join(self.cache, folder, "libgmr_torch_c10.so")

    def test_first_use_builds_into_the_cache_and_later_uses_load_it(self):
        first = self.run_use()
        self.assertEqual("direct", first.get("mode"), first)
        shim = self.cached_shim()
        self.assertEqual(shim, first["loaded"])
        (call,) = _calls(self.log)
        self.assertEqual(os.path.dirname(shim), call["build_directory"])
        self.assertFalse(call["is_python_module"])
        self.assertFalse(any("failed" in w or "GMR_TORCH_BUILD" in w for w in first["warnings"]),
                         first["warnings"])
        second = self.run_use()
        self.assertEqual(shim, second["loaded"])
        self.assertEqual(1, len(_calls(self.log)), "the cached shim is not built again")

    def test_a_build_in_progress_is_waited_for_and_a_stale_lock_removed(self):
        self.run_use()
        shim = self.cached_shim()
        lock = os.path.join(os.path.dirname(shim), "lock")
        # Another process is building (cpp_extension's lock): go through
        # cpp_extension, which waits for it, instead of loading a half-linked file.
        with open(lock, "w"):
            pass
        self.assertEqual(shim, self.run_use()["loaded"])
        self.assertEqual(2, len(_calls(self.log)))
        # A lock a killed build left an hour ago would make cpp_extension wait forever.
        os.utime(lock, (time.time() - 3600, time.time() - 3600))
        self.assertEqual(shim, self.run_use()["loaded"])
        self.assertFalse(os.path.exists(lock))
        self.assertEqual(2, len(_calls(self.log)), "the cached shim is loaded as it is")

    def test_a_build_that_cannot_run_falls_back_and_says_why(self):
        result = self.run_use(GMR_LIBRARY_DIR=self.with_shim,
                              FAKE_CPP_EXTENSION_ERROR="Ninja is required to load C++ "
                                                       "extensions (pip install ninja to get it)")
        self.assertEqual("direct", result.get("mode"), result)
        self.assertEqual(os.path.join(self.with_shim, "libgmr_torch.so"), result["loaded"])
        (warning,) = [w for w in result["warnings"] if "OutOfMemoryError" in w]
        self.assertTrue(warning.startswith("RuntimeWarning: gmr.torch: out of memory raises "
                                           "RuntimeError, not torch.cuda.OutOfMemoryError"),
                        warning)
        self.assertIn("built without PyTorch's headers", warning)
        self.assertIn("failed: Ninja is required to load C++ extensions", warning)
        self.assertIn(self.cache, warning)
        self.assertEqual(1, len(_calls(self.log)))

    def test_gmr_torch_build_0_falls_back_without_building(self):
        result = self.run_use(GMR_LIBRARY_DIR=self.with_shim, GMR_TORCH_BUILD="0")
        self.assertEqual("direct", result.get("mode"), result)
        self.assertEqual([], _calls(self.log))
        (warning,) = [w for w in result["warnings"] if "OutOfMemoryError" in w]
        self.assertIn("GMR_TORCH_BUILD=0 turns off building it", warning)

    def test_a_shim_loaded_before_use_is_named_in_the_warning(self):
        result = self.run_use("counters-first", GMR_LIBRARY_DIR=self.with_shim)
        self.assertEqual("direct", result.get("mode"), result)
        self.assertEqual([], _calls(self.log))
        (warning,) = [w for w in result["warnings"] if "OutOfMemoryError" in w]
        self.assertIn("was loaded before use()", warning)
        self.assertIn("call gmr.torch.use() first", warning)

    def test_no_shim_at_all_raises_with_both_reasons(self):
        result = self.run_use(FAKE_CPP_EXTENSION_ERROR="Ninja is required")
        self.assertIsNone(result["loaded"])
        self.assertTrue(result["error"].startswith("OSError: gmr: libgmr_torch.so not found"),
                        result["error"])
        self.assertIn("failed: Ninja is required", result["error"])


def main():
    junit_runner.run(__name__, "gmr_python")


if __name__ == "__main__":
    main()
