"""gmr from Python: the per-device resources of libgmr.so through ctypes.

Standard library only. Frameworks have their own modules:
  gmr.torch   PyTorch's CUDA allocator on gmr (gmr.torch.use(spec), gmr.torch.mempool(spec))
  gmr.cupy    CuPy's allocator on gmr (gmr.cupy.use(spec))
  gmr.scoped  scoped per-thread pools (Registry, scope(), pool(); docs/tiers.md)
  gmr.tiers   memory tiers and reservations (Manager, reserve(); docs/tiers.md)

Each device's stack comes from gmr's per-device registry: the spec given to
set_device_spec() (or gmr.torch.use / gmr.cupy.use), else GMR_STACK, else
the library's one default, "vmm" (FRAMEWORK_DEFAULT_SPEC; "pool >
cuda(kind=async)" on a device without virtual memory management); it is
created at the device's first use. Without a
GPU, GMR_LIBRARY=/path/to/libgmr_testing.so (the test build, which holds gmr's
host simulation) and GMR_CUDA_SIM=1, both set before the first call, run
everything on the simulation; the installed libgmr.so ignores GMR_CUDA_SIM.
docs/frameworks.md has the details.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Dict, Optional

from gmr._lib import GmrError, OutOfMemoryError, SpecError  # noqa: F401  (re-exported)
from gmr import _capi, _lib

__all__ = [
    "GmrError", "OutOfMemoryError", "SpecError", "version", "simulated", "device_count",
    "check_spec", "set_device_spec", "device_spec", "device_resource", "allocate", "deallocate",
    "record_stream", "trim", "stack_stats", "release_all", "load_library",
]


def version() -> str:
    """The version of the loaded libgmr.so.

    Returns:
        "major.minor.patch".

    Raises:
        OSError: libgmr.so cannot be loaded (the message names where it looked).
    """
    v = _lib.lib().gmr_version()
    return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)


def simulated() -> bool:
    """Whether gmr runs on its host simulation (GMR_CUDA_SIM), not a GPU.

    Returns:
        True on the simulation.

    Raises:
        OSError: libgmr.so cannot be loaded.
    """
    return bool(_lib.lib().gmr_cuda_is_simulated())


def device_count() -> int:
    """Number of CUDA devices gmr sees.

    Returns:
        The count; 0 without a GPU or driver.

    Raises:
        GmrError: cudaGetDeviceCount failed otherwise.
        OSError: libgmr.so cannot be loaded.
    """
    n = ctypes.c_int(0)
    st = _lib.lib().gmr_device_get_count(ctypes.byref(n))
    if st != 0:
        _lib.raise_for(st, "gmr: cudaGetDeviceCount failed")
    return n.value


def load_library(name: str) -> None:
    """Load one of gmr's optional libraries into the process, once.

    libgmr never loads a library by itself: a spec that names cumem,
    symmetric or chunk_listener needs load_library("nccl") first (the library
    registers them in libgmr's default context as it loads). gmr.tiers and
    gmr.scoped load theirs on their own.

    Args:
        name: "nccl", "tiers" or "scoped".

    Raises:
        ValueError: `name` is not one of gmr's optional libraries.
        OSError: libgmr.so or the library cannot be loaded (the message names
            where it looked).
    """
    _lib.optional_lib(name)


def check_spec(spec: str) -> None:
    """Check a stack spec without building the stack.

    Args:
        spec: a stack spec, e.g. "tracking > pool > cuda(kind=async)"; the
            components of an optional library need it loaded first
            (load_library).

    Raises:
        SpecError: `spec` is malformed (gmr's "spec:1:7: ..." message).
        OSError: libgmr.so cannot be loaded.
    """
    err = _capi.SpecErrorStruct()
    st = _lib.lib().gmr_stack_check(spec.encode(), ctypes.byref(err))
    if st != 0:
        _lib.raise_for(st, err.message.decode(errors="replace"), spec_error=True)


# The stack every device gets when neither the program (spec, or
# set_device_spec) nor GMR_STACK names one: libgmr's default
# (GMR_DEVICE_RESOURCE_DEFAULT_SPEC), the same for C, gmr.torch and
# gmr.cupy; on a device without virtual memory management libgmr falls back
# to "pool > cuda(kind=async)" (BENCHMARKS.md, "One default").
FRAMEWORK_DEFAULT_SPEC = "vmm"


def set_device_spec(spec: Optional[str]) -> None:
    """Use `spec` for every device stack created from now on.

    Stacks already created keep theirs.

    Args:
        spec: a stack spec, or None for GMR_STACK or the default.

    Raises:
        SpecError: `spec` is malformed (the previous spec stays).
        OSError: libgmr.so cannot be loaded.
    """
    err = _capi.SpecErrorStruct()
    st = _lib.lib().gmr_device_resource_set_spec(
        None if spec is None else spec.encode(), ctypes.byref(err))
    if st != 0:
        _lib.raise_for(st, err.message.decode(errors="replace"), spec_error=True)


def _use_framework_spec(spec: Optional[str]) -> None:
    """set_device_spec(spec) when `spec` names one: what
    gmr.torch and gmr.cupy do with the spec they are given. Raises SpecError."""
    if spec is not None:
        set_device_spec(spec)


def device_spec(device: int) -> Optional[str]:
    """The spec a device's stack was created from.

    Args:
        device: a CUDA device index.

    Returns:
        The spec, or None when that device has no stack yet.

    Raises:
        OSError: libgmr.so cannot be loaded.
    """
    s = _lib.lib().gmr_device_resource_get_spec(device)
    return None if s is None else s.decode()


def device_resource(device: int) -> int:
    """Address of a device's resource (gmr_resource *), creating it if needed.

    Args:
        device: a CUDA device index.

    Returns:
        The address, as an int.

    Raises:
        SpecError: the spec (set_device_spec or GMR_STACK) is malformed.
        GmrError: the stack cannot be created (e.g. no such device).
        OSError: libgmr.so cannot be loaded.
    """
    r = ctypes.c_void_p()
    err = _capi.SpecErrorStruct()
    st = _lib.lib().gmr_device_resource_get(device, ctypes.byref(r), ctypes.byref(err))
    if st != 0:
        text = err.message.decode(errors="replace")
        _lib.raise_for(st, "gmr: cannot create the memory resource of device %d: %s"
                       % (device, text), spec_error=_is_spec_error(err, text))
    return r.value or 0


def _is_spec_error(err: _capi.SpecErrorStruct, text: str) -> bool:
    return err.line > 0 or text.startswith(("spec:", "GMR_STACK:"))


def allocate(device: int, nbytes: int, stream: int = 0) -> int:
    """Allocate device memory from a device's stack; 256-byte aligned.

    Args:
        device: a CUDA device index.
        nbytes: bytes to allocate.
        stream: the cudaStream_t it is used on, as an int (0: the default stream).

    Returns:
        The address (0 for 0 bytes).

    Raises:
        OutOfMemoryError: out of memory, or a limit refused it (gmr's failure
            message, the refusing layer and the stack's spec).
        SpecError: the device's stack cannot be created from its spec.
        GmrError: any other failure.
        OSError: libgmr.so cannot be loaded.
    """
    r = device_resource(device)
    out = ctypes.c_void_p()
    failure = _capi.FailureStruct()
    st = _lib.lib().gmr_resource_allocate_ex(r, nbytes, 0, stream or None, ctypes.byref(out),
                                    ctypes.byref(failure))
    if st != 0:
        where = _lib.lib().gmr_resource_get_type_name(failure.where).decode() if failure.where else ""
        message = "gmr: %s allocating %d bytes on device %d%s%s" % (
            _lib.status_name(st), nbytes, device, "; refused by " + where if where else "",
            ": " + failure.message.decode(errors="replace") if failure.message else "")
        spec = device_spec(device)
        if spec:
            message += "; stack: " + spec
        _lib.raise_for(st, message)
    return out.value or 0


def deallocate(device: int, ptr: int, nbytes: int, stream: int = 0) -> None:
    """Give back memory from allocate().

    Args:
        device: the device it was allocated on.
        ptr: its address.
        nbytes: the bytes it was allocated with.
        stream: the stream it was last used on (0: the default stream).

    Raises:
        GmrError: the stack refused the free (nothing was freed), e.g.
            GMR_ERR_UNKNOWN_POINTER from a tracking layer.
        OSError: libgmr.so cannot be loaded.
    """
    st = _lib.lib().gmr_resource_deallocate(device_resource(device), ptr, nbytes, 0, stream or None)
    if st != 0:
        _lib.raise_for(st, "gmr: freeing %#x (%d bytes) on device %d: %s"
                       % (ptr, nbytes, device, _lib.status_name(st)))


def record_stream(device: int, ptr: int, stream: int) -> bool:
    """Tell the stack that `ptr` is also used on `stream` (gmr_resource_record_stream).

    Args:
        device: the device it was allocated on.
        ptr: its address.
        stream: the other cudaStream_t, as an int.

    Returns:
        True when recorded; False when the stack cannot honour it
        (GMR_ERR_UNSUPPORTED): order the streams yourself then.

    Raises:
        GmrError: any other failure.
        OSError: libgmr.so cannot be loaded.
    """
    st = _lib.lib().gmr_resource_record_stream(device_resource(device), ptr, stream or None)
    if st == 0:
        return True
    if _lib.status_name(st) == "GMR_ERR_UNSUPPORTED":
        return False
    _lib.raise_for(st, "gmr: record_stream(%#x) on device %d: %s"
                   % (ptr, device, _lib.status_name(st)))


def trim(device: int) -> int:
    """Give cached free memory of a device's stack back to CUDA.

    Args:
        device: a CUDA device index.

    Returns:
        The bytes given back.

    Raises:
        GmrError: the stack refused.
        OSError: libgmr.so cannot be loaded.
    """
    released = ctypes.c_size_t(0)
    st = _lib.lib().gmr_resource_trim(device_resource(device), ctypes.byref(released))
    if st != 0:
        _lib.raise_for(st, "gmr: trimming device %d: %s" % (device, _lib.status_name(st)))
    return released.value


def stack_stats(device: int) -> Dict[str, Any]:
    """The counters of a device's stack (gmr_resource_write_stats_json).

    Args:
        device: a CUDA device index.

    Returns:
        A dict: device, spec, held_bytes, peak_held_bytes, memory, layers (top
        first; tracking layers with bytes/allocations current/peak/total and
        per-owner counters).

    Raises:
        GmrError: the stack cannot be created or read.
        OSError: libgmr.so cannot be loaded.
    """
    r = device_resource(device)
    size = 4096
    while True:
        buf = ctypes.create_string_buffer(size)
        needed = ctypes.c_size_t(0)
        st = _lib.lib().gmr_resource_write_stats_json(r, buf, size, ctypes.byref(needed))
        if st != 0:
            _lib.raise_for(st, "gmr: reading the counters of device %d: %s"
                           % (device, _lib.status_name(st)))
        if needed.value < size:
            data: Dict[str, Any] = json.loads(buf.value.decode())
            data["device"] = device
            data["spec"] = device_spec(device)
            return data
        size = needed.value + 1024


def release_all() -> None:
    """Destroy the stacks gmr created (gmr_device_resource_release_all).

    For tests and the end of a program.

    Raises:
        GmrError: GMR_ERR_BUSY, a stack still has live allocations (nothing
            was destroyed).
        OSError: libgmr.so cannot be loaded.
    """
    st = _lib.lib().gmr_device_resource_release_all()
    if st != 0:
        _lib.raise_for(st, "gmr: a device stack still has live allocations")
