"""Stand-in numba, cuda.core and CuPy modules for the Python tests of
gmr.numba and gmr.cuda_core (numba_test.py, cuda_core_test.py): each follows
the real module's interface as far as gmr uses it, so the tests run on the
simulation without the frameworks (the real ones run on the GPU machine:
tools/frameworks/reach_check.sh). FrameworkTest puts a set of them first on
sys.path for a test and forgets them afterwards.
"""

import ctypes
import gc
import os
import sys
import tempfile
import textwrap
import unittest

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

        USE_NV_BINDING = os.environ.get("FAKE_NUMBA_NV_BINDING") in ("1", "2")
        if os.environ.get("FAKE_NUMBA_NV_BINDING") == "1":   # "2": no `binding` here
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

# NVIDIA's driver binding, where a Numba without a `binding` attribute leads.
FAKE_BINDINGS = {
    "cuda/__init__.py": "",
    "cuda/bindings/__init__.py": "",
    "cuda/bindings/driver.py": textwrap.dedent("""\
        class CUdeviceptr:
            def __init__(self, value=0):
                self.value = value
            def __int__(self):
                return self.value
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
        def begin_building(self, mode="relaxed"):
            return self

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


def write(folder, files):
    for path, text in files.items():
        full = os.path.join(folder, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def forget_fakes():
    for name in [m for m in sys.modules if m.split(".")[0] in _FAKE_PREFIXES]:
        del sys.modules[name]
    gmr.numba._manager_class = None
    gmr.cuda_core._resource_class = None


def tracked(device):
    """Bytes the top tracking layer of a device's stack counts as live."""
    layers = gmr.stack_stats(device)["layers"]
    return next(l for l in layers if l["type"] == "tracking_adaptor")["bytes"]["current"]


def stream():
    """A stream of the simulation, as an int."""
    s = ctypes.c_void_p()
    assert _lib.lib().gmr_cuda_stream_create(ctypes.byref(s)) == 0
    return s.value


class FrameworkTest(unittest.TestCase):
    """Puts the stand-ins `files` first on sys.path; forgets them afterwards."""

    files = {}

    def setUp(self):
        os.environ.pop("GMR_STACK", None)
        gmr.set_device_spec(None)
        forget_fakes()
        self.tmp = tempfile.TemporaryDirectory()
        write(self.tmp.name, self.files)
        sys.path.insert(0, self.tmp.name)

    def tearDown(self):
        gc.collect()
        forget_fakes()
        sys.path.remove(self.tmp.name)
        self.tmp.cleanup()
        for name in ("NUMBA_CUDA_MEMORY_MANAGER", "FAKE_NUMBA_NV_BINDING"):
            os.environ.pop(name, None)
        gmr.release_all()
        gmr.set_device_spec(None)
