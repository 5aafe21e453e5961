"""CuPy's device memory on gmr (standard library and ctypes; CuPy is imported
only when a function needs it).

    import gmr.cupy
    gmr.cupy.use("pool > cuda(kind=async)")   # cupy.cuda.set_allocator
    ...
    gmr.cupy.stats()

The allocator is a Python callable, as RAPIDS RMM's rmm_cupy_allocator is:
CuPy's C-function allocator passes no stream and no size at free, while the
callable reads CuPy's current stream at each allocation, allocates on it, and
frees on it when CuPy drops the memory (the stream object is kept alive until
then). Memory used on another stream needs the usual ordering, as with CuPy's
own pool. Out of memory raises a cupy.cuda.memory.OutOfMemoryError whose text
is gmr's failure message.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Type

import gmr

__all__ = ["use", "allocator", "stats"]


def _import_cupy() -> Any:
    try:
        import cupy  # noqa: PLC0415 (imported on use: gmr.cupy loads without CuPy)
    except ImportError as e:
        raise ImportError("gmr.cupy needs CuPy: import cupy failed (%s)" % e) from e
    return cupy


class _Block:
    """Owner of one gmr allocation; frees it when CuPy drops the memory."""

    __slots__ = ("ptr", "nbytes", "device", "stream")

    def __init__(self, ptr: int, nbytes: int, device: int, stream: Any) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self.stream = stream  # the cupy Stream: alive until the free names it

    def __del__(self) -> None:
        try:
            gmr.deallocate(self.device, self.ptr, self.nbytes, self.stream.ptr)
        except Exception as e:  # noqa: BLE001 (a finaliser must not raise)
            print("gmr.cupy: freeing %#x failed: %s" % (self.ptr, e), file=sys.stderr)


_oom_class: Optional[Type[BaseException]] = None


def _out_of_memory(cupy: Any, nbytes: int, message: str) -> BaseException:
    global _oom_class
    if _oom_class is None:
        base = cupy.cuda.memory.OutOfMemoryError

        class GmrOutOfMemoryError(base):  # type: ignore[misc, valid-type]
            """cupy.cuda.memory.OutOfMemoryError with gmr's failure message."""

            def __init__(self, size: int, text: str) -> None:  # noqa: D107
                MemoryError.__init__(self, text)
                self.size = size

        _oom_class = GmrOutOfMemoryError
    return _oom_class(nbytes, message)


def allocator(nbytes: int) -> Any:
    """CuPy allocator function: cupy.cuda.set_allocator(gmr.cupy.allocator).

    Allocates on the current device, on CuPy's current stream, and frees on
    that stream when CuPy drops the memory.

    Args:
        nbytes: bytes to allocate.

    Returns:
        A cupy.cuda.MemoryPointer owning the memory.

    Raises:
        cupy.cuda.memory.OutOfMemoryError: out of memory or a limit refused
            it; the text is gmr's failure message.
        gmr.GmrError: any other failure of the stack.
        ImportError: CuPy is not installed.
    """
    cupy = _import_cupy()
    device = cupy.cuda.runtime.getDevice()
    stream = cupy.cuda.get_current_stream()
    try:
        ptr = gmr.allocate(device, nbytes, stream.ptr)
    except gmr.OutOfMemoryError as e:
        raise _out_of_memory(cupy, nbytes, str(e)) from None
    owner = _Block(ptr, nbytes, device, stream)
    mem = cupy.cuda.memory.UnownedMemory(ptr, nbytes, owner, device)
    return cupy.cuda.memory.MemoryPointer(mem, 0)


def use(spec: Optional[str] = None) -> None:
    """Make gmr CuPy's allocator (cupy.cuda.set_allocator).

    Each device's stack is created at its first allocation. May be called
    any time; memory CuPy already holds stays where it came from.

    Args:
        spec: a stack spec; None: the spec set with gmr.set_device_spec,
            else GMR_STACK, else gmr.FRAMEWORK_DEFAULT_SPEC ("vmm").

    Raises:
        gmr.SpecError: `spec` is malformed (checked now).
        ImportError: CuPy is not installed.
    """
    cupy = _import_cupy()
    gmr._use_framework_spec(spec)
    cupy.cuda.set_allocator(allocator)


def stats(device: Optional[int] = None) -> Dict[str, Any]:
    """The counters of a device's stack, as gmr.stack_stats().

    Args:
        device: a CUDA device index (None: CuPy's current device).

    Returns:
        The dict gmr.stack_stats() returns.

    Raises:
        gmr.GmrError: the stack cannot be created or read.
        ImportError: `device` is None and CuPy is not installed.
    """
    if device is None:
        device = _import_cupy().cuda.runtime.getDevice()
    return gmr.stack_stats(device)
