"""Numba's CUDA device memory on gmr: an External Memory Management (EMM)
plugin (standard library and ctypes; Numba is imported only when the plugin
is used).

Select it the way Numba selects RMM's, before Numba creates a CUDA context:

    NUMBA_CUDA_MEMORY_MANAGER=gmr.numba python app.py

or in the program:

    import gmr.numba
    gmr.numba.use("pool > cuda(kind=async)")   # numba.cuda.set_memory_manager(...)

Numba's device arrays (cuda.device_array, cuda.to_device, ...) then come from
the device's gmr stack: the spec given to use(), else one chosen with
gmr.set_device_spec() or GMR_STACK, else gmr.FRAMEWORK_DEFAULT_SPEC ("vmm"),
as for gmr.torch and gmr.cupy. Pinned and mapped host memory (memhostalloc,
mempin) stay Numba's own (numba.cuda.HostOnlyCUDAMemoryManager).

Allocation and free are on the default stream (0), as the EMM interface has
no stream: memory used on another stream needs the usual ordering, as with
RMM's plugin. A free goes back to the gmr stack when Numba drops the last
reference; inside numba.cuda.defer_cleanup() frees are held and given back
when the outermost block ends. Out of memory raises gmr.OutOfMemoryError (a
MemoryError) with gmr's message. IPC handles (get_ipc_handle) exist only for
memory from cudaMalloc: a stack whose bottom is cuda(kind=device) (e.g.
"pool > cuda(kind=device)"); other stacks raise gmr.GmrError saying so.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import itertools
import sys
import threading
import weakref
from typing import Any, Dict, Iterator, List, Optional, Tuple

import gmr
from gmr import _lib

__all__ = ["use", "memory_manager", "DeviceMemoryManager"]

# The EMM interface version this plugin implements (Numba checks it).
INTERFACE_VERSION = 1


def _import_numba_cuda() -> Any:
    try:
        return importlib.import_module("numba.cuda")
    except ImportError as e:
        raise ImportError("gmr.numba needs Numba's CUDA target (numba-cuda): import numba.cuda "
                          "failed (%s)" % e) from e


def _device_pointer(address: int) -> Any:
    """`address` as the pointer type Numba's driver layer uses: a CUdeviceptr
    of cuda.bindings (NVIDIA's binding, Numba's default) or a ctypes integer
    (Numba's older ctypes binding)."""
    driver = importlib.import_module("numba.cuda.cudadrv.driver")
    if getattr(driver, "USE_NV_BINDING", True):
        binding = getattr(driver, "binding", None)
        if binding is None:
            binding = importlib.import_module("cuda.bindings.driver")
        return binding.CUdeviceptr(address)
    return ctypes.c_uint64(address)


class _Books:
    """The live allocations of one manager and the frees held by
    defer_cleanup(). Memory pointers' finalisers hold it (not the manager),
    so a free still reaches gmr when the manager is gone first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: Dict[int, Tuple[int, int, int]] = {}  # token -> (device, address, bytes)
        self.held: List[int] = []  # tokens freed inside defer_cleanup()
        self.deferring = 0
        self.tokens = itertools.count(1)

    def add(self, device: int, address: int, size: int) -> int:
        with self.lock:
            token = next(self.tokens)
            self.live[token] = (device, address, size)
            return token

    def release(self, token: int) -> None:
        """Give allocation `token` back, or hold it while cleanup is deferred;
        nothing when it was given back already (reset)."""
        with self.lock:
            if self.deferring:
                self.held.append(token)
                return
            entry = self.live.pop(token, None)
        if entry is not None:
            _give_back([entry])


def _give_back(entries: List[Tuple[int, int, int]]) -> None:
    """Free (device, address, bytes) entries on stream 0, printing failures
    (called from finalisers, which must not raise)."""
    for device, address, size in entries:
        try:
            gmr.deallocate(device, address, size, 0)
        except Exception as e:  # noqa: BLE001 (a finaliser must not raise)
            print("gmr.numba: freeing %#x (%d bytes) on device %d failed: %s"
                  % (address, size, device, e), file=sys.stderr)


class _Free:
    """A MemoryPointer's finaliser: gives allocation `token` back."""

    __slots__ = ("books", "token")

    def __init__(self, books: _Books, token: int) -> None:
        self.books = books
        self.token = token

    def __call__(self) -> None:
        self.books.release(self.token)


class DeviceMemoryManager:
    """gmr's side of the Numba plugin: device memory from the gmr stack of the
    context's device.

    memory_manager() combines it with numba.cuda.HostOnlyCUDAMemoryManager
    (pinned and mapped host memory, Numba's own) and GetIpcHandleMixin; that
    class is what Numba instantiates, once per context. Thread-safe: yes (an
    internal lock guards the live allocations and the deferred frees).

    Args:
        *args: passed on to Numba's base class.
        context: the Numba context this manager serves (None for the
            instance numba.cuda.set_memory_manager makes to read
            interface_version).
        **kwargs: passed on to Numba's base class.
    """

    def __init__(self, *args: Any, context: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, context=context, **kwargs)  # type: ignore[call-arg]
        self._books = _Books()

    def _device(self) -> int:
        if self.context is None:  # type: ignore[attr-defined]
            raise RuntimeError("gmr.numba: this memory manager has no context (Numba makes one "
                               "without a context only to read interface_version)")
        return int(self.context.device.id)  # type: ignore[attr-defined]

    def initialize(self) -> None:
        """Create the device's gmr stack now, so that a malformed spec fails here.

        Numba calls it before the first allocation of the context, maybe
        more than once; later calls change nothing. Without a spec chosen
        (use(), gmr.set_device_spec() or GMR_STACK) the device gets the
        library's default, gmr.FRAMEWORK_DEFAULT_SPEC, as everywhere.

        Raises:
            gmr.SpecError: the spec is malformed.
            gmr.GmrError: the stack cannot be created (e.g. no such device).
            RuntimeError: the manager has no context.
        """
        gmr.device_resource(self._device())

    def memalloc(self, size: int) -> Any:
        """Allocate device memory from the context's gmr stack, on stream 0.

        Args:
            size: bytes to allocate (0: a null pointer, nothing allocated).

        Returns:
            A numba.cuda.MemoryPointer whose finaliser gives the memory back
            to gmr (on stream 0) when Numba drops its last reference.

        Raises:
            gmr.OutOfMemoryError: out of memory, or a limit refused it (gmr's
                failure message, the refusing layer and the spec).
            gmr.SpecError: the device's stack cannot be created from its spec.
            gmr.GmrError: any other failure of the stack.
            RuntimeError: the manager has no context.
        """
        cuda = _import_numba_cuda()
        device = self._device()
        context = weakref.proxy(self.context)  # type: ignore[attr-defined]
        if size == 0:
            return cuda.MemoryPointer(context, _device_pointer(0), 0)
        address = gmr.allocate(device, size, 0)
        token = self._books.add(device, address, size)
        return cuda.MemoryPointer(context, _device_pointer(address), size,
                                  finalizer=_Free(self._books, token))

    def live_allocations(self) -> int:
        """Number of this manager's allocations not yet given back to gmr.

        Returns:
            The count, frees held by defer_cleanup() included.
        """
        with self._books.lock:
            return len(self._books.live)

    def reset(self) -> None:
        """Give back every allocation of this context (Numba's context reset).

        Memory pointers still alive afterwards free nothing when dropped.
        Numba's host allocations are cleaned up as well.

        A free gmr refuses is printed to stderr, not raised; the rest are
        still given back.

        Raises:
            numba.cuda.cudadrv.driver.CudaAPIError: Numba's cleanup of its
                host memory failed (the device memory was given back first).
        """
        books = self._books
        with books.lock:
            entries = list(books.live.values())
            books.live.clear()
            books.held.clear()
        _give_back(entries)
        super().reset()  # type: ignore[misc]

    @contextlib.contextmanager
    def defer_cleanup(self) -> Iterator[None]:
        """Hold frees while the block runs; give them back when the outermost
        block ends (with Numba's deferral of host memory cleanup).

        A free into a gmr pool never synchronises, but one that reaches
        cudaFree (a cuda(kind=device) leaf with nothing above it, or a trim)
        does: deferring keeps such a block free of synchronisation.

        Yields:
            None, inside the block.

        Raises:
            Exception: whatever the block raises, after the held frees were
                given back (when it was the outermost block).
        """
        books = self._books
        with super().defer_cleanup():  # type: ignore[misc]
            with books.lock:
                books.deferring += 1
            try:
                yield
            finally:
                with books.lock:
                    books.deferring -= 1
                    held = books.held if books.deferring == 0 else []
                    if books.deferring == 0:
                        books.held = []
                    entries = [books.live.pop(t) for t in held if t in books.live]
                _give_back(entries)

    def get_memory_info(self) -> Any:
        """Free and total memory of the context's device, as gmr sees it.

        free is what the device has free (cudaMemGetInfo) plus what the gmr
        stack holds free for its own allocations; total is the device's.
        Numba calls it with the context current.

        Returns:
            numba.cuda.MemoryInfo(free, total), in bytes.

        Raises:
            gmr.GmrError: cudaMemGetInfo or reading the stack's counters failed.
            RuntimeError: the manager has no context.
        """
        cuda = _import_numba_cuda()
        device = self._device()
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        st = _lib.lib().gmr_device_get_memory_info(ctypes.byref(free), ctypes.byref(total))
        if st != 0:
            _lib.raise_for(st, "gmr.numba: cudaMemGetInfo on device %d failed: %s"
                           % (device, _lib.status_name(st)))
        memory = gmr.stack_stats(device).get("memory") or {}
        return cuda.MemoryInfo(free=free.value + int(memory.get("free_bytes", 0)),
                               total=total.value)

    def get_ipc_handle(self, memory: Any) -> Any:
        """A CUDA IPC handle for memory this manager allocated.

        Numba's GetIpcHandleMixin finds the base of the CUDA allocation
        (cuMemGetAddressRange) and asks for its handle (cuIpcGetMemHandle),
        which exists only for cudaMalloc memory.

        Args:
            memory: a MemoryPointer from memalloc().

        Returns:
            A numba.cuda.IpcHandle.

        Raises:
            gmr.GmrError: (GMR_ERR_UNSUPPORTED) CUDA gave no handle, e.g. for
                memory of cuda(kind=async) or vmm stacks; the message says
                which stack to use instead.
            RuntimeError: the manager has no context.
        """
        device = self._device()
        try:
            return super().get_ipc_handle(memory)  # type: ignore[misc]
        except Exception as e:  # noqa: BLE001 (the driver's error type depends on the binding)
            raise gmr.GmrError(
                "GMR_ERR_UNSUPPORTED",
                "gmr.numba: no CUDA IPC handle for this memory of device %d (%s): CUDA gives "
                "handles only for cudaMalloc memory; use a stack whose bottom is "
                "cuda(kind=device), e.g. 'pool > cuda(kind=device)' (this device's stack: %s)"
                % (device, e, gmr.device_spec(device))) from e

    @property
    def interface_version(self) -> int:
        """The EMM interface version this plugin implements (1)."""
        return INTERFACE_VERSION


_manager_class: Optional[type] = None
_class_lock = threading.Lock()


def memory_manager() -> type:
    """The EMM plugin class Numba instantiates (gmr.numba._numba_memory_manager).

    Built at the first call from DeviceMemoryManager, Numba's
    GetIpcHandleMixin and HostOnlyCUDAMemoryManager.

    Returns:
        The class, a numba.cuda.HostOnlyCUDAMemoryManager subclass.

    Raises:
        ImportError: Numba's CUDA target (numba-cuda) is not installed.
    """
    global _manager_class
    with _class_lock:
        if _manager_class is None:
            cuda = _import_numba_cuda()
            _manager_class = type("GmrNumbaMemoryManager",
                                  (DeviceMemoryManager, cuda.GetIpcHandleMixin,
                                   cuda.HostOnlyCUDAMemoryManager),
                                  {"__module__": __name__,
                                   "__doc__": "Numba's EMM plugin on gmr (gmr.numba)."})
        return _manager_class


def use(spec: Optional[str] = None) -> None:
    """Make gmr Numba's CUDA memory manager (numba.cuda.set_memory_manager).

    Call it before Numba creates a CUDA context: contexts keep the manager
    they were created with (numba.cuda.close() drops them).

    Args:
        spec: a stack spec; None: the spec set with gmr.set_device_spec,
            else GMR_STACK, else gmr.FRAMEWORK_DEFAULT_SPEC ("vmm").

    Raises:
        gmr.SpecError: `spec` is malformed (checked now; Numba is left as it was).
        ImportError: Numba's CUDA target (numba-cuda) is not installed.
        RuntimeError: Numba refused the plugin (its message).
    """
    if spec is not None:
        gmr.check_spec(spec)
    cls = memory_manager()
    gmr._use_framework_spec(spec)
    _import_numba_cuda().set_memory_manager(cls)


def __getattr__(name: str) -> Any:
    # NUMBA_CUDA_MEMORY_MANAGER=gmr.numba: Numba imports this module and reads
    # _numba_memory_manager (the class is built on that first read).
    if name == "_numba_memory_manager":
        return memory_manager()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
