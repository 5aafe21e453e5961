"""gmr.numba (Numba's External Memory Management plugin) and gmr.cuda_core (a
cuda.core MemoryResource) on the simulation (GMR_CUDA_SIM=devices=2,memory=1GiB,
set by run_python_test.sh), against stand-in numba, cuda.core and CuPy
modules that follow the real ones' interfaces (the real ones run on the GPU
machine: tools/frameworks/reach_check.sh). Writes a JUnit XML report to
$XML_OUTPUT_FILE when Bazel asks for one.
"""

import contextlib
import ctypes
import gc
import importlib
import importlib.util
import io
import os
import sys
import tempfile
import textwrap
import unittest

import junit_runner

import gmr
import gmr.cuda_core
import gmr.numba
from gmr import _lib

MIB = 1 << 20

# numba.cuda as far as an EMM plugin sees it (numba-cuda's driver module:
# BaseCUDAMemoryManager and its abstract methods, HostOnlyCUDAMemoryManager,
# GetIpcHandleMixin, MemoryPointer with its finaliser, MemoryInfo,
# set_memory_manager and how a Context picks the manager, including
# NUMBA_CUDA_MEMORY_MANAGER).
FAKE_NUMBA = {
    "numba/__init__.py": "",
    "numba/cuda/__init__.py": textwrap.dedent("""\
        from numba.cuda.cudadrv.driver import (BaseCUDAMemoryManager, HostOnlyCUDAMemoryManager,
            GetIpcHandleMixin, MemoryPointer, MemoryInfo, IpcHandle, set_memory_manager)
        """),
    "numba/cuda/cudadrv/__init__.py": "",
    "numba/cuda/cudadrv/driver.py": textwrap.dedent("""\
        import contextlib, importlib, os, weakref
        from abc import ABCMeta, abstractmethod
        from collections import namedtuple

        USE_NV_BINDING = os.environ.get("FAKE_NUMBA_NV_BINDING") == "1"
        if USE_NV_BINDING:
            class _Binding:
                class CUdeviceptr:
                    def __init__(self, value=0):
                        self.value = value
                    def __int__(self):
                        return self.value
            binding = _Binding()

        MemoryInfo = namedtuple("MemoryInfo", "free,total")
        IPC_FAILS = []   # tests append a message: get_ipc_handle raises it

        class CudaAPIError(Exception):
            pass

        class BaseCUDAMemoryManager(metaclass=ABCMeta):
            def __init__(self, *args, **kwargs):
                if "context" not in kwargs:
                    raise RuntimeError("Memory manager requires a context")
                self.context = kwargs.pop("context")
            for _name in ("memalloc", "memhostalloc", "mempin", "initialize", "get_ipc_handle",
                          "get_memory_info", "reset", "defer_cleanup"):
                locals()[_name] = abstractmethod(lambda self, *a, **k: None)
            interface_version = property(abstractmethod(lambda self: None))

        class HostOnlyCUDAMemoryManager(BaseCUDAMemoryManager):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.host_resets = 0
                self.host_deferring = 0
            def memhostalloc(self, size, mapped=False, portable=False, wc=False):
                return ("host", size)
            def mempin(self, owner, pointer, size, mapped=False):
                return ("pinned", size)
            def reset(self):
                self.host_resets += 1
            @contextlib.contextmanager
            def defer_cleanup(self):
                self.host_deferring += 1
                try:
                    yield
                finally:
                    self.host_deferring -= 1

        class IpcHandle:
            def __init__(self, base, handle, size, source_info=None, offset=0):
                self.base, self.handle, self.size, self.offset = base, handle, size, offset

        class GetIpcHandleMixin:
            def get_ipc_handle(self, memory):
                if IPC_FAILS:
                    raise CudaAPIError(IPC_FAILS[0])
                return IpcHandle(memory, b"handle", memory.size)

        class MemoryPointer:
            def __init__(self, context, pointer, size, owner=None, finalizer=None):
                self.context = context
                self.device_pointer = pointer
                self.handle = pointer
                self.size = size
                self.is_managed = finalizer is not None
                if finalizer is not None:
                    self._finalizer = weakref.finalize(self, finalizer)
            @property
            def device_pointer_value(self):
                return int(self.device_pointer) if USE_NV_BINDING else self.device_pointer.value

        _memory_manager = None

        def set_memory_manager(mm_plugin):
            global _memory_manager
            dummy = mm_plugin(context=None)
            if dummy.interface_version != 1:
                raise RuntimeError("EMM Plugin interface has version %d - version 1 required"
                                   % dummy.interface_version)
            _memory_manager = mm_plugin

        class Device:
            def __init__(self, devnum):
                self.id = devnum

        class Context:
            def __init__(self, devnum):
                global _memory_manager
                if _memory_manager is None:
                    name = os.environ.get("NUMBA_CUDA_MEMORY_MANAGER", "default")
                    set_memory_manager(importlib.import_module(name)._numba_memory_manager)
                self.device = Device(devnum)
                self.memory_manager = _memory_manager(context=self)
                self.memory_manager.initialize()
        """),
}

# cuda.core's memory interfaces: MemoryResource, Buffer.from_handle (freeing
# through the resource at close or collection), Stream, Device, GraphBuilder;
# in the current layout (`cuda.core`, stream keyword) or the older one
# (`cuda.core.experimental`, stream passed positionally to deallocate).
_FAKE_CORE = textwrap.dedent("""\
    NEW_API = %(new)s

    class Stream:
        def __init__(self, handle):
            self._handle = handle
        @property
        def handle(self):
            return self._handle
        def __cuda_stream__(self):
            return (0, self._handle)
        if NEW_API:
            @classmethod
            def from_handle(cls, handle):
                return cls(handle)

    class GraphBuilder:
        def __init__(self, stream):
            self.stream = stream

    class Device:
        current = 0
        def __init__(self, device_id=None):
            self.device_id = Device.current if device_id is None else device_id
        @property
        def default_stream(self):
            return Stream(0)
        def create_stream(self, obj):
            return Stream(obj.__cuda_stream__()[1])

    class MemoryResource:
        def allocate(self, size, *, stream):
            raise TypeError("must be implemented by subclasses")
        def deallocate(self, ptr, size, *, stream):
            raise TypeError("must be implemented by subclasses")
        @property
        def device_id(self):
            raise TypeError("must be implemented by subclasses")

    FAIL_FROM_HANDLE = []   # tests append an exception: from_handle raises it

    class Buffer:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("Buffer objects cannot be instantiated directly")
        @classmethod
        def _make(cls, ptr, size, mr, stream):
            if FAIL_FROM_HANDLE:
                raise FAIL_FROM_HANDLE.pop()
            b = cls.__new__(cls)
            b._ptr, b._size, b._mr, b._stream = int(ptr), size, mr, stream
            return b
        if NEW_API:
            @staticmethod
            def from_handle(ptr, size, mr=None, owner=None, *, stream=None):
                if stream is not None and not isinstance(stream, (Stream, GraphBuilder)):
                    raise TypeError("stream must be a Stream or GraphBuilder")
                return Buffer._make(ptr, size, mr, stream)
        else:
            @staticmethod
            def from_handle(ptr, size, mr=None):
                return Buffer._make(ptr, size, mr, None)
        @property
        def handle(self):
            return self._ptr
        @property
        def size(self):
            return self._size
        @property
        def memory_resource(self):
            return self._mr
        @property
        def device_id(self):
            return self._mr.device_id
        @property
        def is_device_accessible(self):
            return self._mr.is_device_accessible
        def close(self, stream=None):
            if self._mr is None:
                return
            mr, self._mr = self._mr, None
            if NEW_API:
                mr.deallocate(self._ptr, self._size, stream=stream or self._stream or Stream(0))
            else:
                mr.deallocate(self._ptr, self._size, stream)
        def __del__(self):
            self.close()
    """)

FAKE_CORE_NEW = {
    "cuda/__init__.py": "",
    "cuda/core/__init__.py": _FAKE_CORE % {"new": True},
}
FAKE_CORE_OLD = {
    "cuda/__init__.py": "",
    "cuda/core/__init__.py": "",
    "cuda/core/experimental/__init__.py": _FAKE_CORE % {"new": False},
}

# CuPy as gmr.cuda_core.cupy_allocator uses it.
FAKE_CUPY = {
    "cupy/__init__.py": "from cupy import cuda\n",
    "cupy/cuda/__init__.py": textwrap.dedent("""\
        from cupy.cuda import memory, runtime
        class _Stream:
            def __init__(self, ptr):
                self.ptr = ptr
        CURRENT = [_Stream(0)]
        def get_current_stream():
            return CURRENT[0]
        """),
    "cupy/cuda/runtime.py": "def getDevice():\n    return 1\n",
    "cupy/cuda/memory.py": textwrap.dedent("""\
        class UnownedMemory:
            def __init__(self, ptr, size, owner, device_id=-1):
                self.ptr, self.size, self._owner, self.device_id = ptr, size, owner, device_id
        class MemoryPointer:
            def __init__(self, mem, offset):
                self.mem, self.ptr = mem, mem.ptr + offset
        """),
}

_FAKE_PREFIXES = ("numba", "cuda", "cupy")


def _write(folder, files):
    for path, text in files.items():
        full = os.path.join(folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def _forget_fakes():
    for name in [m for m in sys.modules if m.split(".")[0] in _FAKE_PREFIXES]:
        del sys.modules[name]
    gmr.numba._manager_class = None
    gmr.cuda_core._resource_class = None


def _tracked(device):
    """Bytes the top tracking layer of a device's stack counts as live."""
    layers = gmr.stack_stats(device)["layers"]
    return next(l for l in layers if l["type"] == "tracking_adaptor")["bytes"]["current"]


def _stream():
    """A stream of the simulation, as an int."""
    s = ctypes.c_void_p()
    assert _lib.lib().gmr_stream_create(ctypes.byref(s)) == 0
    return s.value


class FrameworkTest(unittest.TestCase):
    """Puts the stand-ins `files` first on sys.path; forgets them afterwards."""

    files = {}

    def setUp(self):
        os.environ.pop("GMR_STACK", None)
        gmr.set_device_spec(None)
        _forget_fakes()
        self.tmp = tempfile.TemporaryDirectory()
        _write(self.tmp.name, self.files)
        sys.path.insert(0, self.tmp.name)

    def tearDown(self):
        gc.collect()
        _forget_fakes()
        sys.path.remove(self.tmp.name)
        self.tmp.cleanup()
        for name in ("NUMBA_CUDA_MEMORY_MANAGER", "FAKE_NUMBA_NV_BINDING"):
            os.environ.pop(name, None)
        gmr.release_all()
        gmr.set_device_spec(None)


class WithoutTheFrameworksTest(FrameworkTest):
    def test_the_modules_import_and_say_what_is_missing_when_used(self):
        if importlib.util.find_spec("numba") is None:
            with self.assertRaises(ImportError) as cm:
                gmr.numba.use()
            self.assertIn("gmr.numba needs Numba's CUDA target", str(cm.exception))
            with self.assertRaises(ImportError):
                getattr(gmr.numba, "_numba_memory_manager")
        if importlib.util.find_spec("cuda") is None:
            with self.assertRaises(ImportError) as cm:
                gmr.cuda_core.memory_resource(0)
            self.assertIn("gmr.cuda_core needs cuda.core", str(cm.exception))
        with self.assertRaises(AttributeError):
            getattr(gmr.numba, "no_such_name")
        with self.assertRaises(AttributeError):
            getattr(gmr.cuda_core, "no_such_name")


class NumbaTest(FrameworkTest):
    files = FAKE_NUMBA

    def context(self, device=0):
        from numba.cuda.cudadrv import driver  # noqa: PLC0415 (the stand-in)
        return driver.Context(device)

    def test_use_makes_gmr_numbas_memory_manager(self):
        import numba.cuda  # noqa: PLC0415
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        ctx = self.context(1)
        manager = ctx.memory_manager
        self.assertIsInstance(manager, numba.cuda.HostOnlyCUDAMemoryManager)
        self.assertIsInstance(manager, gmr.numba.DeviceMemoryManager)
        self.assertEqual(1, manager.interface_version)
        self.assertEqual("tracking > pool > cuda(kind=async)", gmr.device_spec(1))
        pointer = manager.memalloc(MIB)
        self.assertNotEqual(0, pointer.device_pointer_value)
        self.assertEqual(MIB, pointer.size)
        self.assertEqual(MIB, _tracked(1))
        self.assertEqual(1, manager.live_allocations())
        self.assertEqual(("host", 64), manager.memhostalloc(64))   # Numba's own
        del pointer
        gc.collect()
        self.assertEqual(0, _tracked(1))
        self.assertEqual(0, manager.live_allocations())

    def test_numba_cuda_memory_manager_names_the_module(self):
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gmr.numba"
        ctx = self.context(0)
        self.assertIs(gmr.numba.memory_manager(), type(ctx.memory_manager))
        # No spec chosen: initialize() gave the device the frameworks' default.
        self.assertEqual(gmr.FRAMEWORK_DEFAULT_SPEC, gmr.device_spec(0))
        pointer = ctx.memory_manager.memalloc(4096)
        self.assertNotEqual(0, pointer.device_pointer_value)

    def test_gmr_stack_is_kept_when_set(self):
        os.environ["GMR_STACK"] = "tracking > cuda(kind=device)"
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gmr.numba"
        ctx = self.context(0)
        self.assertEqual("tracking > cuda(kind=device)", gmr.device_spec(0))
        pointer = ctx.memory_manager.memalloc(256)
        self.assertEqual(256, _tracked(0))
        del pointer

    def test_pointer_types_of_both_bindings(self):
        gmr.numba.use("pool > cuda(kind=async)")
        pointer = self.context().memory_manager.memalloc(512)
        self.assertIsInstance(pointer.device_pointer, ctypes.c_uint64)
        _forget_fakes()
        os.environ["FAKE_NUMBA_NV_BINDING"] = "1"
        gmr.numba.use()
        pointer = self.context().memory_manager.memalloc(512)
        self.assertEqual("CUdeviceptr", type(pointer.device_pointer).__name__)
        self.assertNotEqual(0, int(pointer.device_pointer))

    def test_memory_outliving_its_manager_still_goes_back(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        ctx = self.context()
        pointer = ctx.memory_manager.memalloc(MIB)
        del ctx
        gc.collect()
        self.assertEqual(MIB, _tracked(0))
        del pointer
        gc.collect()
        self.assertEqual(0, _tracked(0))

    def test_zero_bytes_allocate_nothing(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        pointer = manager.memalloc(0)
        self.assertEqual(0, pointer.device_pointer_value)
        self.assertFalse(pointer.is_managed)
        self.assertEqual(0, manager.live_allocations())

    def test_defer_cleanup_holds_frees_until_the_outermost_block_ends(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        a, b = manager.memalloc(MIB), manager.memalloc(2 * MIB)
        with manager.defer_cleanup():
            self.assertEqual(1, manager.host_deferring)   # Numba's host deferral too
            with manager.defer_cleanup():
                del a
                gc.collect()
            self.assertEqual(3 * MIB, _tracked(0))
            del b
            gc.collect()
            self.assertEqual(3 * MIB, _tracked(0))
            self.assertEqual(2, manager.live_allocations())
        self.assertEqual(0, manager.host_deferring)
        self.assertEqual(0, _tracked(0))
        self.assertEqual(0, manager.live_allocations())

    def test_defer_cleanup_gives_back_when_the_block_raises(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        a = manager.memalloc(MIB)
        with self.assertRaises(KeyError):
            with manager.defer_cleanup():
                del a
                gc.collect()
                raise KeyError("in the block")
        self.assertEqual(0, _tracked(0))

    def test_reset_gives_everything_back_and_later_drops_free_nothing(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        a, b = manager.memalloc(MIB), manager.memalloc(MIB)
        manager.reset()
        self.assertEqual(1, manager.host_resets)
        self.assertEqual(0, _tracked(0))
        c = manager.memalloc(MIB)   # may reuse a's address
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            del a, b
            gc.collect()
        self.assertEqual("", err.getvalue())
        self.assertEqual(MIB, _tracked(0))
        del c

    def test_out_of_memory_raises_gmrs_error_and_keeps_nothing(self):
        gmr.numba.use("tracking > limiting(limit=1MiB) > cuda(kind=async)")
        manager = self.context().memory_manager
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            manager.memalloc(2 * MIB)
        self.assertIsInstance(cm.exception, MemoryError)
        self.assertIn("GMR_ERR_LIMIT_EXCEEDED", str(cm.exception))
        self.assertEqual(0, manager.live_allocations())

    def test_a_malformed_spec_changes_nothing(self):
        from numba.cuda.cudadrv import driver  # noqa: PLC0415
        with self.assertRaises(gmr.SpecError) as cm:
            gmr.numba.use("pool > cuda(kidn=async)")
        self.assertIn("kidn", str(cm.exception))
        self.assertIsNone(driver._memory_manager)
        self.assertFalse(gmr._spec_chosen)

    def test_a_malformed_gmr_stack_fails_at_initialize(self):
        os.environ["GMR_STACK"] = "pool > cuda(kidn=async)"
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gmr.numba"
        with self.assertRaises(gmr.SpecError) as cm:
            self.context(0)
        self.assertIn("GMR_STACK", str(cm.exception))

    def test_memory_info_counts_what_the_stack_holds_free(self):
        gmr.numba.use("pool > cuda(kind=async)")
        manager = self.context().memory_manager
        pointer = manager.memalloc(64 * MIB)
        del pointer
        gc.collect()
        info = manager.get_memory_info()
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.assertEqual(0, _lib.lib().gmr_device_get_memory_info(ctypes.byref(free),
                                                                  ctypes.byref(total)))
        cached = gmr.stack_stats(0)["memory"]["free_bytes"]
        self.assertGreaterEqual(cached, 64 * MIB)
        self.assertEqual(1 << 30, info.total)
        self.assertEqual(free.value + cached, info.free)

    def test_ipc_handles_and_the_stacks_that_have_none(self):
        from numba.cuda.cudadrv import driver  # noqa: PLC0415
        gmr.numba.use("pool > cuda(kind=device)")
        manager = self.context().memory_manager
        pointer = manager.memalloc(4096)
        self.assertEqual(4096, manager.get_ipc_handle(pointer).size)
        driver.IPC_FAILS.append("CUDA_ERROR_INVALID_VALUE")
        with self.assertRaises(gmr.GmrError) as cm:
            manager.get_ipc_handle(pointer)
        self.assertEqual("GMR_ERR_UNSUPPORTED", cm.exception.status)
        self.assertIn("cuda(kind=device)", str(cm.exception))
        self.assertIn("CUDA_ERROR_INVALID_VALUE", str(cm.exception))
        self.assertIn("pool > cuda(kind=device)", str(cm.exception))

    def test_the_instance_without_a_context_only_answers_its_version(self):
        cls = gmr.numba.memory_manager()
        dummy = cls(context=None)
        self.assertEqual(1, dummy.interface_version)
        with self.assertRaises(RuntimeError) as cm:
            dummy.memalloc(256)
        self.assertIn("no context", str(cm.exception))


class CudaCoreTest(FrameworkTest):
    files = FAKE_CORE_NEW

    def core(self):
        return gmr.cuda_core._import_core()

    def test_a_memory_resource_over_the_device_stack(self):
        core = self.core()
        mr = gmr.cuda_core.memory_resource(1, "tracking(per=stream) > pool > cuda(kind=async)")
        self.assertIsInstance(mr, core.MemoryResource)
        self.assertIs(gmr.cuda_core.GmrMemoryResource, type(mr))
        self.assertEqual((1, True, False, False), (mr.device_id, mr.is_device_accessible,
                                                    mr.is_host_accessible, mr.is_managed))
        self.assertEqual("tracking(per=stream) > pool > cuda(kind=async)", gmr.device_spec(1))
        s = _stream()
        buf = mr.allocate(4096, stream=core.Stream(s))
        self.assertIs(mr, buf.memory_resource)
        self.assertEqual((4096, 1, True), (buf.size, buf.device_id, buf.is_device_accessible))
        self.assertNotEqual(0, buf.handle)
        owners = gmr.stack_stats(1)["layers"][1]["owners"]
        self.assertEqual(4096, owners["%#x" % s]["bytes"]["current"])
        buf.close()
        self.assertEqual(0, _tracked(1))
        self.assertIn("device_id=1", repr(mr))

    def test_a_collected_buffer_goes_back(self):
        mr = gmr.cuda_core.memory_resource(0, "tracking > pool > cuda(kind=async)")
        buf = mr.allocate(MIB)
        self.assertEqual(MIB, _tracked(0))
        del buf
        gc.collect()
        self.assertEqual(0, _tracked(0))

    def test_streams_in_every_form(self):
        core = self.core()
        mr = gmr.cuda_core.memory_resource(0, "tracking(per=stream) > pool > cuda(kind=async)")
        s = _stream()

        class Protocol:
            def __cuda_stream__(self):
                return (0, s)

        for form in (s, Protocol(), core.GraphBuilder(core.Stream(s))):
            with self.subTest(form=type(form).__name__):
                buf = mr.allocate(256, stream=form)
                owners = gmr.stack_stats(0)["layers"][1]["owners"]
                self.assertEqual(256, owners["%#x" % s]["bytes"]["current"])
                buf.close()
        with self.assertRaises(TypeError) as cm:
            mr.allocate(256, stream="stream 1")
        self.assertIn("not a stream", str(cm.exception))
        self.assertEqual(0, _tracked(0))

    def test_bad_devices_are_refused(self):
        cls = gmr.cuda_core.resource_class()
        for bad in (-1, "0", True, None):
            with self.subTest(device=bad):
                with self.assertRaises(ValueError) as cm:
                    cls(bad)
                self.assertIn("device_id must be", str(cm.exception))
        self.assertEqual(1, cls(self.core().Device(1)).device_id)
        self.core().Device.current = 1
        try:
            self.assertEqual(1, gmr.cuda_core.memory_resource().device_id)
        finally:
            self.core().Device.current = 0

    def test_out_of_memory_and_a_malformed_spec(self):
        mr = gmr.cuda_core.memory_resource(0, "tracking > limiting(limit=1MiB) > cuda(kind=async)")
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            mr.allocate(2 * MIB)
        self.assertIn("GMR_ERR_LIMIT_EXCEEDED", str(cm.exception))
        self.assertEqual(0, _tracked(0))
        gmr.release_all()
        gmr.set_device_spec(None)
        with self.assertRaises(gmr.SpecError):
            gmr.cuda_core.memory_resource(0, "pool > cuda(kidn=async)")
        self.assertFalse(gmr._spec_chosen)
        self.assertIsNone(gmr.device_spec(0))

    def test_a_failed_buffer_gives_the_memory_back(self):
        core = self.core()
        mr = gmr.cuda_core.memory_resource(0, "tracking > pool > cuda(kind=async)")
        core.FAIL_FROM_HANDLE.append(RuntimeError("no context is current"))
        with self.assertRaises(RuntimeError):
            mr.allocate(MIB)
        self.assertEqual(0, _tracked(0))

    def test_a_bad_free_is_refused(self):
        mr = gmr.cuda_core.memory_resource(0, "tracking > cuda(kind=device)")
        with self.assertRaises(gmr.GmrError) as cm:
            mr.deallocate(0x1000, 64, None)
        self.assertEqual("GMR_ERR_UNKNOWN_POINTER", cm.exception.status)


class OlderCudaCoreTest(FrameworkTest):
    """cuda.core.experimental: no stream keyword in from_handle, the stream
    passed positionally to deallocate."""

    files = FAKE_CORE_OLD

    def test_allocate_and_close_on_a_stream(self):
        core = gmr.cuda_core._import_core()
        self.assertEqual("cuda.core.experimental", core.__name__)
        mr = gmr.cuda_core.memory_resource(0, "tracking(per=stream) > pool > cuda(kind=async)")
        s = _stream()
        buf = mr.allocate(4096, core.Stream(s))
        self.assertEqual(4096, _tracked(0))
        buf.close(core.Stream(s))
        self.assertEqual(0, _tracked(0))
        buf = mr.allocate(4096)   # the default stream, closed on it
        del buf
        gc.collect()
        self.assertEqual(0, _tracked(0))


class CupyOverCudaCoreTest(FrameworkTest):
    files = dict(FAKE_CORE_NEW, **FAKE_CUPY)

    def test_cupy_allocates_from_the_memory_resource_on_its_stream(self):
        import cupy  # noqa: PLC0415 (the stand-in)
        mr = gmr.cuda_core.memory_resource(1, "tracking(per=stream) > pool > cuda(kind=async)")
        s = _stream()
        cupy.cuda.CURRENT[0] = cupy.cuda._Stream(s)
        allocate = gmr.cuda_core.cupy_allocator(mr)
        pointer = allocate(8192)
        self.assertNotEqual(0, pointer.ptr)
        self.assertEqual(1, pointer.mem.device_id)
        owners = gmr.stack_stats(1)["layers"][1]["owners"]
        self.assertEqual(8192, owners["%#x" % s]["bytes"]["current"])
        del pointer
        gc.collect()
        self.assertEqual(0, _tracked(1))


if __name__ == "__main__":
    junit_runner.run(__name__, "gmr_frameworks_python")
