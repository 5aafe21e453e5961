"""cuda.core's memory resources on gmr (standard library and ctypes; cuda.core
is imported only when a function needs it).

    from cuda.core import Device            # cuda.core.experimental in older releases
    import gmr.cuda_core

    dev = Device(0)
    dev.set_current()
    mr = gmr.cuda_core.memory_resource(0, "pool > cuda(kind=async)")
    buf = mr.allocate(1 << 20, stream=dev.default_stream)   # a cuda.core Buffer
    ...
    buf.close()                                              # back to the gmr stack

memory_resource() returns a cuda.core MemoryResource (the class
gmr.cuda_core.GmrMemoryResource, built at first use from ResourceMethods and
cuda.core's MemoryResource), so code written against cuda.core's memory
resources runs on the device's gmr stack: allocate and deallocate are
stream-ordered on the stream given, Buffer.from_handle makes the buffers
(they free through the resource when closed or collected), and device_id,
is_device_accessible, is_host_accessible and is_managed describe them.
cupy_allocator(mr) makes CuPy allocate from any cuda.core memory resource.

The stack is the device's gmr stack (gmr.device_resource), shared with
gmr.torch, gmr.cupy and gmr.numba in the process. Works with cuda.core's
`cuda.core` namespace and with the older `cuda.core.experimental` one.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any, Callable, Optional

import gmr

__all__ = ["memory_resource", "resource_class", "cupy_allocator", "ResourceMethods"]


def _import_core() -> Any:
    """cuda.core's module holding MemoryResource and Buffer: `cuda.core`, or
    `cuda.core.experimental` in releases before they moved."""
    errors = []
    for name in ("cuda.core", "cuda.core.experimental"):
        try:
            module = importlib.import_module(name)
        except ImportError as e:
            errors.append("%s: %s" % (name, e))
            continue
        if hasattr(module, "MemoryResource") and hasattr(module, "Buffer"):
            return module
        errors.append("%s has no MemoryResource" % name)
    raise ImportError("gmr.cuda_core needs cuda.core (the cuda-core package): %s"
                      % "; ".join(errors))


def _stream_handle(stream: Any) -> int:
    """The cudaStream_t of `stream` as an int: a cuda.core Stream (its
    __cuda_stream__ protocol), a GraphBuilder (its stream), a CuPy stream
    (.ptr), an int, or None (0, the default stream)."""
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        value = protocol() if callable(protocol) else protocol
        return int(value[1])
    for attribute in ("stream", "handle", "ptr"):
        inner = getattr(stream, attribute, None)
        if inner is not None and inner is not stream:
            return _stream_handle(inner) if attribute == "stream" else int(inner)
    raise TypeError("gmr.cuda_core: %r is not a stream: pass a cuda.core Stream or GraphBuilder, "
                    "an object with __cuda_stream__, or a cudaStream_t as an int" % (stream,))


class _ForeignStream:
    """A stream handle in the __cuda_stream__ protocol, for Device.create_stream."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> Any:
        return (0, self.handle)


def _core_stream(core: Any, stream: Any, device: int) -> Any:
    """`stream` as cuda.core's Stream (or GraphBuilder): as it is when it is
    one; None: the device's default stream; otherwise a cuda.core Stream
    over its handle (not owning it)."""
    if stream is None:
        return core.Device(device).default_stream
    # A GraphBuilder (cuda.core.GraphBuilder, later cuda.core.graph's) is
    # taken as it is: allocation during its capture is stream-ordered too.
    if isinstance(stream, core.Stream) or hasattr(stream, "begin_building"):
        return stream
    handle = _stream_handle(stream)
    from_handle = getattr(core.Stream, "from_handle", None)
    if from_handle is not None:
        return from_handle(handle)
    return core.Device(device).create_stream(_ForeignStream(handle))


class ResourceMethods:
    """gmr's side of GmrMemoryResource: a cuda.core MemoryResource over the gmr
    stack of one device.

    resource_class() combines it with cuda.core's MemoryResource; create
    instances with memory_resource(). Thread-safe: yes (the gmr stack's own
    guarantee; the resource keeps no state of its own but its device).

    Args:
        device_id: the CUDA device (an int or a cuda.core Device).
    """

    def __init__(self, device_id: Any) -> None:
        super().__init__()
        device = getattr(device_id, "device_id", device_id)
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ValueError("gmr.cuda_core: device_id must be a device index (an int >= 0) "
                             "or a cuda.core Device, not %r" % (device_id,))
        self._device = device

    def allocate(self, size: int, stream: Any = None) -> Any:
        """Allocate a buffer from the device's gmr stack, ordered on `stream`.

        Args:
            size: bytes (0: a buffer with a null pointer).
            stream: a cuda.core Stream or GraphBuilder (keyword or positional,
                as the cuda.core release calls it), an object with
                __cuda_stream__, a cudaStream_t as an int, or None (the
                device's default stream). The buffer's deallocation is
                ordered on it too, unless Buffer.close names another.

        Returns:
            A cuda.core Buffer (Buffer.from_handle) owned by this resource.

        Raises:
            gmr.OutOfMemoryError: out of memory, or a limit refused it (gmr's
                failure message, the refusing layer and the spec).
            gmr.SpecError: the device's stack cannot be created from its spec.
            gmr.GmrError: any other failure of the stack.
            TypeError: `stream` is not a stream.
            ImportError: cuda.core is not installed.
        """
        core = _import_core()
        stream = _core_stream(core, stream, self._device)
        handle = _stream_handle(stream)
        address = gmr.allocate(self._device, size, handle)
        try:
            try:
                return core.Buffer.from_handle(address, size, self, stream=stream)
            except TypeError as e:
                if "stream" not in str(e):
                    raise
                # Releases before the keyword record no deallocation stream:
                # they pass the stream to deallocate() at close().
                return core.Buffer.from_handle(address, size, self)
        except BaseException:
            gmr.deallocate(self._device, address, size, handle)
            raise

    def deallocate(self, ptr: Any, size: int, stream: Any = None) -> None:
        """Give a buffer's memory back to the gmr stack, ordered on `stream`.

        cuda.core calls it when a buffer of this resource is closed or
        collected.

        Args:
            ptr: the buffer's address (an int or a CUdeviceptr).
            size: the bytes it was allocated with.
            stream: the stream to order the free on (as in allocate); None:
                the default stream.

        Raises:
            gmr.GmrError: the stack refused the free (nothing was freed), e.g.
                GMR_ERR_UNKNOWN_POINTER from a tracking layer.
            TypeError: `stream` is not a stream.
        """
        gmr.deallocate(self._device, int(ptr), size, _stream_handle(stream))

    @property
    def device_id(self) -> int:
        """The device whose gmr stack the buffers come from."""
        return self._device

    @property
    def is_device_accessible(self) -> bool:
        """True: the buffers are device memory."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """False: gmr's per-device stacks give device memory (a managed or
        pinned leaf would be reachable from the host, but is not reported so)."""
        return False

    @property
    def is_managed(self) -> bool:
        """False: not reported as CUDA managed memory."""
        return False

    def __repr__(self) -> str:
        return "<gmr.cuda_core.GmrMemoryResource device_id=%d spec=%r>" % (
            self._device, gmr.device_spec(self._device))


_resource_class: Optional[type] = None
_class_lock = threading.Lock()


def resource_class() -> type:
    """The class GmrMemoryResource: ResourceMethods on cuda.core's MemoryResource.

    Returns:
        The class (built at the first call), a subclass of cuda.core's
        MemoryResource.

    Raises:
        ImportError: cuda.core is not installed.
    """
    global _resource_class
    with _class_lock:
        if _resource_class is None:
            core = _import_core()
            _resource_class = type("GmrMemoryResource", (ResourceMethods, core.MemoryResource),
                                   {"__module__": __name__,
                                    "__doc__": "cuda.core MemoryResource over a gmr device "
                                               "stack (gmr.cuda_core.ResourceMethods)."})
        return _resource_class


def memory_resource(device: Optional[int] = None, spec: Optional[str] = None) -> Any:
    """A cuda.core MemoryResource over a device's gmr stack.

    Args:
        device: the CUDA device index (None: cuda.core's current device).
        spec: a stack spec; None: the spec set with gmr.set_device_spec,
            else GMR_STACK, else gmr.FRAMEWORK_DEFAULT_SPEC ("vmm"). A stack
            already created for the device keeps its spec.

    Returns:
        A GmrMemoryResource; its device's stack is created now.

    Raises:
        gmr.SpecError: `spec` is malformed (checked before anything changes).
        gmr.GmrError: the device's stack cannot be created (e.g. no such device).
        ValueError: `device` is not a device index.
        ImportError: cuda.core is not installed.
    """
    if spec is not None:
        gmr.check_spec(spec)
    cls = resource_class()
    if device is None:
        device = int(_import_core().Device().device_id)
    mr = cls(device)
    gmr._use_framework_spec(spec)
    gmr.device_resource(mr.device_id)
    return mr


class _CupyOwner:
    """What CuPy's memory keeps alive: the buffer, and the CuPy stream its free
    is ordered on; closes the buffer first when CuPy drops the memory."""

    __slots__ = ("buffer", "stream")

    def __init__(self, buffer: Any, stream: Any) -> None:
        self.buffer = buffer
        self.stream = stream

    def __del__(self) -> None:
        try:
            self.buffer.close()
        except Exception as e:  # noqa: BLE001 (a finaliser must not raise)
            print("gmr.cuda_core: closing a CuPy buffer failed: %s" % e, file=sys.stderr)


def cupy_allocator(mr: Any) -> Callable[[int], Any]:
    """A CuPy allocator over a cuda.core memory resource (any, gmr's or not).

    cupy.cuda.set_allocator(gmr.cuda_core.cupy_allocator(mr)) makes CuPy
    allocate with mr.allocate on CuPy's current stream (and free on it when
    CuPy drops the memory).

    Args:
        mr: a cuda.core MemoryResource.

    Returns:
        The allocator: nbytes -> cupy.cuda.MemoryPointer.

    Raises:
        ImportError: CuPy or cuda.core is not installed.
    """
    from gmr import cupy as gmr_cupy  # noqa: PLC0415 (CuPy's import lives there)

    cupy = gmr_cupy._import_cupy()
    core = _import_core()

    def allocator(nbytes: int) -> Any:
        device = int(cupy.cuda.runtime.getDevice())
        cupy_stream = cupy.cuda.get_current_stream()
        buffer = mr.allocate(nbytes, stream=_core_stream(core, cupy_stream.ptr, device))
        owner = _CupyOwner(buffer, cupy_stream)
        memory = cupy.cuda.memory.UnownedMemory(int(buffer.handle), nbytes, owner, device)
        return cupy.cuda.memory.MemoryPointer(memory, 0)

    return allocator


def __getattr__(name: str) -> Any:
    # gmr.cuda_core.GmrMemoryResource: the class, built at its first use.
    if name == "GmrMemoryResource":
        return resource_class()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
