"""PyTorch's allocator queries answered from gmr's figures in direct mode.

Under a pluggable allocator PyTorch's C++ refuses the calls that CUDA graph
trees (torch.compile(mode="reduce-overhead"), torch/_inductor/cudagraph_trees.py)
and the memory statistics make: checkPoolLiveAllocations, getCheckpointState,
setCheckpointPoolState, getDeviceStats, resetPeakStats, resetAccumulatedStats
and snapshot ("pluggable does not yet support ..."). PyTorch's Python looks the
bindings up in torch._C at every call, so gmr.torch.use() puts these functions
there in their place; they answer from the torch shim's graph pools and
counters (integrations/torch/gmr_torch.h). install() is called only once gmr
is PyTorch's allocator; uninstall() puts PyTorch's bindings back.

What each replacement does, and its PyTorch source
(c10/cuda/CUDACachingAllocator.cpp, torch/csrc/cuda/Module.cpp), is in its
docstring; docs/frameworks.md lists what is filled and what is not.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from gmr import _capi, _lib

# The torch._C bindings replaced, and PyTorch's originals while installed.
_NAMES = (
    "_cuda_checkPoolLiveAllocations",
    "_cuda_getCheckpointState",
    "_cuda_setCheckpointPoolState",
    "_cuda_memoryStats",
    "_cuda_resetPeakMemoryStats",
    "_cuda_resetAccumulatedMemoryStats",
    "_cuda_memorySnapshot",
)
_originals: Dict[str, Any] = {}
_lock = threading.Lock()
# reserved_bytes peak since the last reset_peak_memory_stats, per device:
# (stack peak when reset, held bytes when reset).
_reserved_reset: Dict[int, Tuple[int, int]] = {}

_UNKNOWN_POINTER = "GMR_ERR_UNKNOWN_POINTER"


class PoolCheckpoint:
    """gmr's state of one graph pool: its allocated blocks, by address.

    PyTorch's opaque AllocatorState; only handed back to setCheckpointPoolState.

    Args:
        device: the pool's device.
        pool: the pool's id (PyTorch's MempoolId_t, two ints).
        blocks: {ptr: (bytes, stream)} of its allocated blocks.
    """

    __slots__ = ("device", "pool", "blocks")

    def __init__(self, device: int, pool: Tuple[int, int],
                 blocks: Dict[int, Tuple[int, int]]) -> None:
        self.device = device
        self.pool = pool
        self.blocks = blocks  # ptr -> (bytes, stream)

    def __repr__(self) -> str:
        return "gmr.torch.PoolCheckpoint(device=%d, pool=%r, blocks=%d)" % (
            self.device, self.pool, len(self.blocks))


def _pool_id(pool: Iterable[int]) -> Tuple[int, int]:
    first, second = tuple(pool)
    return int(first), int(second)


def _fetch(call: Callable[..., int], ctype: Any,
           columns: int) -> Tuple[int, List[Tuple[int, ...]]]:
    """Call a shim function of the form f(..., col_0, ..., col_k, capacity,
    &count) until its arrays hold every row: (status, rows as tuples)."""
    count = ctypes.c_size_t(0)
    while True:
        n = count.value + 16
        arrays = [(ctype * n)() for _ in range(columns)]
        st = call(*arrays, n, ctypes.byref(count))
        if st != 0:
            return st, []
        if count.value <= n:
            return 0, list(zip(*(a[:count.value] for a in arrays)))


def pool_blocks(device: int, pool: Iterable[int]) -> Optional[Dict[int, Tuple[int, int]]]:
    """The allocated blocks of a graph pool.

    Args:
        device: the pool's device.
        pool: the pool's id (two ints).

    Returns:
        {ptr: (bytes, stream)}; None when gmr knows no such pool (never
        begun, or released).

    Raises:
        gmr.GmrError: the shim refused (bad device).
    """
    first, second = _pool_id(pool)
    st, rows = _fetch(lambda *a: _lib.torch_lib().gmr_torch_get_pool_blocks(device, first, second,
                                                                           *a),
                      ctypes.c_size_t, 3)
    if st != 0:
        if _lib.status_name(st) == _UNKNOWN_POINTER:
            return None
        _lib.raise_for(st, "gmr.torch: reading graph pool %r of device %d" % (pool, device))
    return {ptr: (nbytes, stream) for ptr, nbytes, stream in rows}


def check_pool_live_allocations(device: int, pool: Iterable[int], expected: Iterable[int]) -> bool:
    """torch._C._cuda_checkPoolLiveAllocations (PyTorch's checkPoolLiveAllocations).

    CUDA graph trees check their live outputs with it.

    Args:
        device: the pool's device.
        pool: the pool's id (two ints).
        expected: the data pointers that should be allocated in it.

    Returns:
        True when the blocks allocated in the pool are exactly `expected`.

    Raises:
        gmr.GmrError: the shim refused (bad device).
    """
    blocks = pool_blocks(int(device), pool) or {}
    wanted = {int(p) for p in expected}
    return set(blocks) == wanted


def get_checkpoint_state(device: int, pool: Iterable[int]) -> PoolCheckpoint:
    """torch._C._cuda_getCheckpointState (PyTorch's getCheckpointState).

    Args:
        device: the pool's device.
        pool: the pool's id (two ints).

    Returns:
        The allocated blocks of the pool, to go back to with
        set_checkpoint_pool_state.

    Raises:
        RuntimeError: gmr knows no such pool (PyTorch refuses too).
        gmr.GmrError: the shim refused (bad device).
    """
    device = int(device)
    blocks = pool_blocks(device, pool)
    if blocks is None:
        raise RuntimeError("gmr.torch: getCheckpointState: device %d has no graph pool %r"
                           % (device, tuple(pool)))
    return PoolCheckpoint(device, _pool_id(pool), blocks)


def _torch() -> Any:
    import torch  # noqa: PLC0415 (loaded already: this runs inside PyTorch calls)
    return torch


def _storage_error(code: int, what: str) -> RuntimeError:
    if code == -2:
        return RuntimeError(
            "gmr.torch: %s needs the torch shim built against PyTorch's headers "
            "(libgmr_torch_c10.so, which gmr.torch.use() builds; its warning said why it "
            "could not); %s is loaded"
            % (what, _lib.loaded_torch_lib_path()))
    return RuntimeError(what)


def set_checkpoint_pool_state(device: int, state: PoolCheckpoint, stale_storages: Iterable[int],
                              storages_to_add_deleters_to: Iterable[int]) -> None:
    """torch._C._cuda_setCheckpointPoolState: put graph pool state.pool back as
    it was at the checkpoint (PyTorch's setCheckpointPoolState and its binding,
    which CUDA graph trees call before recording after a replay):

    - every block allocated now that the checkpoint did not have (as the same
      block) is freed; its storage must be among `stale_storages`
      (StorageImpl addresses), whose deleters are taken away;
    - every block the checkpoint had that is not allocated now is allocated
      again at its address (through PyTorch's raw_alloc, so PyTorch records it);
    - each storage of `storages_to_add_deleters_to` whose data pointer is a
      block of the checkpoint becomes its owner again; the checkpoint's other
      blocks stay allocated for the caller to free (graph trees do).

    Args:
        device: the pool's device.
        state: a checkpoint from get_checkpoint_state.
        stale_storages: StorageImpl addresses of the tensors that die.
        storages_to_add_deleters_to: StorageImpl addresses of the live tensors.

    Raises:
        TypeError: `state` is not a gmr checkpoint.
        RuntimeError: a block would be freed without its stale storage (PyTorch's
            "Any stale tensors which are being manually freed must be passed to
            set checkpoint"), a storage owns its memory already, the pool no
            longer holds a block's bytes free, or the shim lacks PyTorch's
            headers. Checked before anything changes where it can be.
    """
    torch = _torch()
    shim = _lib.torch_lib()
    device = int(device)
    if not isinstance(state, PoolCheckpoint):
        raise TypeError("gmr.torch: setCheckpointPoolState needs a state from "
                        "torch._C._cuda_getCheckpointState under gmr, not %r" % (state,))
    now = pool_blocks(device, state.pool)
    if now is None:
        raise RuntimeError("gmr.torch: setCheckpointPoolState: device %d has no graph pool %r"
                           % (device, state.pool))
    wanted = state.blocks
    to_free = [p for p, (n, _) in now.items() if p not in wanted or wanted[p][0] != n]
    to_make = sorted(p for p, (n, _) in wanted.items() if p not in now or now[p][0] != n)
    stale = list(dict.fromkeys(int(s) for s in stale_storages))
    definitely_freed = sum(1 for p in now if p not in wanted)
    if len(stale) < definitely_freed:
        raise RuntimeError("Any stale tensors which are being manually freed must be passed to "
                           "set checkpoint")
    for address in stale:
        data_ptr = torch.UntypedStorage._new_with_weak_ptr(address).data_ptr()
        if data_ptr not in now:
            raise RuntimeError("gmr.torch: setCheckpointPoolState: a stale storage's memory "
                               "(%#x) is not allocated in the pool" % data_ptr)
        code = shim.gmr_torch_storage_disown(address)
        if code != 0:
            raise _storage_error(code, "Unexpected deleter function on storage, could not swap "
                                       "function")
    for p in to_free:
        torch._C._cuda_cudaCachingAllocator_raw_delete(p)
    first, second = state.pool
    with torch.cuda.device(device):
        for p in to_make:
            nbytes, stream = wanted[p]
            st = shim.gmr_torch_expect_address(device, first, second, p)
            if st != 0:
                _lib.raise_for(st, "gmr.torch: setCheckpointPoolState")
            q = torch._C._cuda_cudaCachingAllocator_raw_alloc(nbytes, stream)
            if q != p:
                raise RuntimeError("gmr.torch: setCheckpointPoolState: a block of %d bytes came "
                                   "back at %#x, not %#x" % (nbytes, q, p))
    for address in dict.fromkeys(int(s) for s in storages_to_add_deleters_to):
        storage = torch.UntypedStorage._new_with_weak_ptr(address)
        if storage.data_ptr() in wanted:
            code = shim.gmr_torch_storage_adopt(address)
            if code != 0:
                raise _storage_error(code, " Not expecting deleter function")


def _device_stats(device: int) -> _capi.TorchDeviceStats:
    s = _capi.TorchDeviceStats()
    s.size = ctypes.sizeof(s)
    s.version = _capi.TORCH_DEVICE_STATS_VERSION
    st = _lib.torch_lib().gmr_torch_get_device_stats(device, ctypes.byref(s))
    if st != 0:
        _lib.raise_for(st, "gmr.torch: reading the counters of device %d" % device)
    return s


def _footprint(device: int) -> Tuple[int, int]:
    """(held, peak held) bytes of device's stack; (0, 0) before it exists."""
    lib = _lib.lib()
    r = ctypes.c_void_p()
    if lib.gmr_device_resource_get(device, ctypes.byref(r), None) != 0:
        return 0, 0
    f = _capi.FootprintStruct()
    if lib.gmr_resource_get_footprint(r, ctypes.byref(f)) != 0:
        return 0, 0
    return f.held_bytes, f.peak_held_bytes


def _stat(current: int = 0, peak: int = 0, allocated: int = 0, freed: int = 0) -> Dict[str, int]:
    return {"current": current, "peak": peak, "allocated": allocated, "freed": freed}


def memory_stats(device: int) -> Dict[str, Any]:
    """torch._C._cuda_memoryStats: PyTorch's nested statistics (what
    torch.cuda.memory_stats, memory_allocated, max_memory_reserved and
    memory_summary read) from gmr's figures:

    - allocation / active: live tensors (current, peak, allocated, freed);
    - allocated_bytes / active_bytes / requested_bytes: their bytes as asked;
    - reserved_bytes: what the device's stack holds from CUDA (its footprint;
      the peak since reset_peak_memory_stats is exact once it passes the peak
      at the reset, and the held bytes at the reset before that);
    - num_ooms: failed allocations; num_alloc_retries: retries after giving
      released graph pools back; segment, inactive_split and the other counts: 0.

    Everything is under "all" and "large_pool" (gmr has no small pool).

    Args:
        device: a CUDA device index.

    Returns:
        PyTorch's nested dict of statistics.

    Raises:
        gmr.GmrError: the shim refused (bad device).
    """
    device = int(device)
    s = _device_stats(device)
    held, peak_held = _footprint(device)
    with _lock:
        reset = _reserved_reset.get(device)
    if reset is not None and peak_held <= reset[0]:
        peak_held = max(reset[1], held)
    count = _stat(s.live_count, s.peak_live_count, s.allocation_count, s.free_count)
    nbytes = _stat(s.live_bytes, s.peak_live_bytes, s.allocated_bytes, s.freed_bytes)
    reserved = _stat(held, peak_held)
    figures = {
        "allocation": count, "active": count, "allocated_bytes": nbytes, "active_bytes": nbytes,
        "requested_bytes": nbytes, "reserved_bytes": reserved, "segment": _stat(),
        "inactive_split": _stat(), "inactive_split_bytes": _stat(),
    }
    out: Dict[str, Any] = {}
    for name, stat in figures.items():
        out[name] = {"all": dict(stat), "small_pool": _stat(), "large_pool": dict(stat)}
    out["oversize_allocations"] = _stat()
    out["oversize_segments"] = _stat()
    out["num_alloc_retries"] = s.retry_count
    out["num_ooms"] = s.failed_allocation_count
    out["max_split_size"] = -1
    out["num_sync_all_streams"] = 0
    out["num_device_alloc"] = 0
    out["num_device_free"] = 0
    return out


def reset_peak_memory_stats(device: int) -> None:
    """torch._C._cuda_resetPeakMemoryStats: peaks start again from now.

    Args:
        device: a CUDA device index.

    Raises:
        gmr.GmrError: the shim refused (bad device).
    """
    device = int(device)
    st = _lib.torch_lib().gmr_torch_reset_peak_stats(device)
    if st != 0:
        _lib.raise_for(st, "gmr.torch: reset_peak_memory_stats(%d)" % device)
    held, peak_held = _footprint(device)
    with _lock:
        _reserved_reset[device] = (peak_held, held)


def reset_accumulated_memory_stats(device: int) -> None:
    """torch._C._cuda_resetAccumulatedMemoryStats: counts and sums start again.

    Args:
        device: a CUDA device index.

    Raises:
        gmr.GmrError: the shim refused (bad device).
    """
    device = int(device)
    st = _lib.torch_lib().gmr_torch_reset_accumulated_stats(device)
    if st != 0:
        _lib.raise_for(st, "gmr.torch: reset_accumulated_memory_stats(%d)" % device)


def _pool_segments(device: int, pool: Tuple[int, ...]) -> List[Tuple[int, ...]]:
    """(stream, held bytes) of each memory of the pool ([] if gmr knows none)."""
    return _fetch(lambda *a: _lib.torch_lib().gmr_torch_get_pool_segments(device, pool[0],
                                                                         pool[1], *a),
                  ctypes.c_size_t, 2)[1]


def memory_snapshot(*args: Any, **kwargs: Any) -> Dict[str, Any]:
    """torch._C._cuda_memorySnapshot: PyTorch's snapshot layout for gmr's graph
    pools: one segment per memory of a pool (a capture's forked streams get
    memories of their own, as PyTorch's per-stream segments), its size the
    bytes the memory holds, its blocks the pool's live blocks on that stream
    (CUDA graph trees' slow-path check reads segment_pool_id, address and the
    blocks' states); no device traces. Ordinary allocations are not listed:
    gmr's stacks do not lay out their chunks in this call (gmr.torch.stats()
    has their figures).

    Args:
        *args: PyTorch's arguments (ignored).
        **kwargs: PyTorch's keyword arguments (ignored).

    Returns:
        PyTorch's snapshot dict: segments, device_traces, allocator_settings,
        external_annotations.

    Raises:
        gmr.GmrError: the shim refused.
    """
    del args, kwargs
    torch = _torch()
    segments = []
    for device in range(torch.cuda.device_count()):
        for pool, blocks in _pools_of(device):
            pieces = _pool_segments(device, pool) or [(0, 0)]
            for stream, held in pieces:
                mine = sorted((p, b) for p, b in blocks.items()
                              if b[1] == stream or len(pieces) == 1)
                listed = [{"address": p, "size": n, "requested_size": n,
                           "state": "active_allocated", "frames": []} for p, (n, _) in mine]
                live = sum(n for _, (n, _) in mine)
                address = mine[0][0] if mine else 0
                segments.append({"device": device, "address": address,
                                 "total_size": max(held, live), "allocated_size": live,
                                 "active_size": live, "requested_size": live, "stream": stream,
                                 "segment_type": "large", "segment_pool_id": pool,
                                 "is_expandable": False, "frames": [], "blocks": listed})
    return {"segments": segments, "device_traces": [], "allocator_settings": {},
            "external_annotations": []}


def _pools_of(device: int) -> Iterator[Tuple[Tuple[int, ...], Dict[int, Tuple[int, int]]]]:
    """(pool id, blocks) of every graph pool of `device` that has memory."""
    st, pools = _fetch(lambda *a: _lib.torch_lib().gmr_torch_get_pool_ids(device, *a),
                       ctypes.c_uint64, 2)
    if st != 0:
        _lib.raise_for(st, "gmr.torch: listing the graph pools of device %d" % device)
    for pool in pools:
        blocks = pool_blocks(device, pool)
        if blocks is not None and (blocks or _pool_segments(device, pool)):
            yield pool, blocks


_REPLACEMENTS = {
    "_cuda_checkPoolLiveAllocations": check_pool_live_allocations,
    "_cuda_getCheckpointState": get_checkpoint_state,
    "_cuda_setCheckpointPoolState": set_checkpoint_pool_state,
    "_cuda_memoryStats": memory_stats,
    "_cuda_resetPeakMemoryStats": reset_peak_memory_stats,
    "_cuda_resetAccumulatedMemoryStats": reset_accumulated_memory_stats,
    "_cuda_memorySnapshot": memory_snapshot,
}


def install(torch: Any) -> None:
    """Put gmr's answers in torch._C in place of PyTorch's (direct mode only).

    Args:
        torch: the torch module.
    """
    with _lock:
        if _originals:
            return
        for name in _NAMES:
            if hasattr(torch._C, name):
                _originals[name] = getattr(torch._C, name)
                setattr(torch._C, name, _REPLACEMENTS[name])


def uninstall(torch: Any) -> None:
    """Give torch._C its own bindings back.

    Args:
        torch: the torch module.
    """
    with _lock:
        for name, original in _originals.items():
            setattr(torch._C, name, original)
        _originals.clear()


def installed() -> bool:
    """Whether gmr's answers are in torch._C now.

    Returns:
        True while installed.
    """
    return bool(_originals)
