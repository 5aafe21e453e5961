"""Sleep and wake of a device's GPU memory by tag, for LLM serving engines.

What vLLM's sleep mode (CuMemAllocator, SleepModeBackend) and SGLang's
torch_memory_saver do, over gmr's VMM pool (the default stack "vmm" of
gmr.torch and gmr.cupy, or any stack with vmm or vmm_pages under its
adaptors):
give the physical memory of a model back to the device while it sleeps, and
map it again at the same virtual addresses when it wakes, so that pointers
and CUDA graphs captured before sleep stay valid. Standard library and
ctypes; PyTorch is optional (gmr.torch re-exports these functions).

    import gmr.torch
    gmr.torch.use()                          # direct mode, stack "vmm"
    with gmr.torch.region("weights"):
        model = build_model().cuda()
    with gmr.torch.region("kv_cache"):
        cache = torch.empty(..., device="cuda")
    ...capture CUDA graphs...
    gmr.torch.sleep(backup=["weights"])      # KV cache, graphs and the rest discarded
    ...the GPU serves another process...
    gmr.torch.wake()                         # weights back, bit for bit

Tags: a region names the tag its allocations carry (gmr's C tags 0..63; the
names live here, one table per process). Two names are fixed: "untagged"
(tag 0: memory allocated outside any region) and "graphs" (tag 63: the CUDA
graph pools of gmr.torch's direct mode, GMR_TORCH_GRAPH_POOL_TAG). At sleep
each tag is backed up (copied to host memory), kept (stays mapped and
valid), or discarded (wakes with undefined contents): `backup` and `keep`
name the first two, every other tag is discarded. The default backs up
"untagged", as vLLM's sleep() offloads its default tag. Graph pools hold a
graph's intermediate and output buffers, which its next replay writes:
discarding them is what SGLang does; replay before reading a graph's outputs
after wake.

Host memory: backups are pageable by default, copied through the pool's
pinned staging ring (256 MiB, pinned once and kept) by copy threads: the
ring is all the pinned memory held while awake. host="pinned" pins each
backup (slow to pin: pair it with keep_backup=True, which keeps the backups,
pinned or not, for the next sleep and holds them while awake).

Reserve now, commit later: reserve(nbytes) reserves a range of addresses in
the device's pool whose pages are committed and decommitted later at the
same addresses (a KV cache sized after the CUDA graphs are captured, as
vLLM's extensible KV cache does); Range.tensor() is a PyTorch tensor over it,
valid across commits; the range's tag applies to its committed pages at
sleep and wake.

Rules (gmr/vmm_pool_sleep.h has the C side):
  - sleep synchronises the device first (work still running on the memory
    finishes); during a CUDA graph capture it refuses (RuntimeError when
    this thread's current stream captures, checked before anything changes;
    gmr's GMR_ERR_CAPTURE_UNSAFE otherwise);
  - while asleep, allocations fail (GMR_ERR_BUSY: PyTorch raises
    RuntimeError in direct mode), kept tags included; freeing an asleep
    tensor is allowed and drops its host copy; a second sleep is an error,
    and so is a wake without a sleep;
  - a failed sleep or wake changes nothing (a wake without room on the
    device raises gmr.OutOfMemoryError; free memory and wake again);
  - the tag in force is the device pool's, not the thread's: enter regions
    from one thread at a time, as with torch_memory_saver.
MemPool mode (gmr.torch.mempool): PyTorch caches segments and serves
tensors from them without asking gmr, so a tag applies to the segments a
pool takes while the region is open: give each region a MemPool of its own
(`with gmr.torch.region("kv_cache"), torch.cuda.use_mem_pool(kv_pool):`),
and allocate nothing from pools while asleep (PyTorch cannot know the
memory is gone). docs/serving.md maps vLLM's and torch_memory_saver's calls
to these.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import gmr
from gmr import _capi, _lib
from gmr._ranges import Range

__all__ = ["UNTAGGED", "GRAPHS", "HOST_KINDS", "region", "tag_id", "tags", "tag_tensor",
           "sleep", "wake", "is_asleep", "info", "Range", "reserve"]

UNTAGGED = "untagged"
GRAPHS = "graphs"
HOST_KINDS = ("pageable", "pinned")

_lock = threading.Lock()
_names: Dict[str, int] = {UNTAGGED: 0, GRAPHS: _capi.TORCH_GRAPH_POOL_TAG}
# Per device: the tags of the open regions, innermost last (a token each).
_open: Dict[int, List[Tuple[object, int]]] = {}


def _current_device(device: Optional[int]) -> int:
    if device is not None:
        return int(device)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


def tag_id(name: str) -> int:
    """The C tag (0..63) of a tag name, given the next free one at first use.

    Args:
        name: the tag's name, e.g. "weights"; "untagged" is 0, "graphs" 63.

    Returns:
        The tag number.

    Raises:
        ValueError: `name` is empty or not a str, or the 62 free tags are used up.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("gmr.serving: a tag name is a non-empty str, not %r" % (name,))
    with _lock:
        if name in _names:
            return _names[name]
        used = set(_names.values())
        free = [t for t in range(1, _capi.VMM_MAX_TAG) if t not in used]
        if not free:
            raise ValueError("gmr.serving: no tag left for %r: gmr has %d tags and these are "
                             "taken: %s" % (name, _capi.VMM_MAX_TAG + 1, ", ".join(sorted(_names))))
        _names[name] = free[0]
        return free[0]


def tags() -> Dict[str, int]:
    """Every tag name known so far and its C tag.

    Returns:
        {name: tag number}, "untagged" and "graphs" included.
    """
    with _lock:
        return dict(_names)


def _known(names: Iterable[str], what: str) -> List[int]:
    if isinstance(names, str):
        raise ValueError("gmr.serving: %s takes a list of tag names, not the str %r (write [%r])"
                         % (what, names, names))
    out = []
    with _lock:
        for name in names:
            if name not in _names:
                raise ValueError("gmr.serving: %s names the tag %r, which no region or "
                                 "tag_tensor() has used; known tags: %s"
                                 % (what, name, ", ".join(sorted(_names))))
            out.append(_names[name])
    return out


def _mask(ids: Iterable[int]) -> int:
    m = 0
    for t in ids:
        m |= 1 << t
    return m


def _pool(device: int) -> int:
    """The vmm pool under the device's stack (created now if needed)."""
    resource = gmr.device_resource(device)
    # The layer is the pool's handle (a handle starts with its gmr_resource).
    pool = _lib.lib().gmr_resource_find(resource, b"vmm_pool_resource")
    if not pool:
        raise gmr.GmrError("GMR_ERR_UNSUPPORTED",
                           "gmr.serving: the stack of device %d (%s) has no vmm pool; tags, sleep "
                           "and wake need one: use the spec 'vmm' (gmr.torch's default) or put "
                           "'vmm' or 'vmm_pages' at the bottom of yours"
                           % (device, gmr.device_spec(device)))
    return int(pool)


def _set_default_tag(pool: int, tag: int, device: int) -> None:
    st = _lib.lib().gmr_vmm_pool_resource_set_default_tag(pool, tag)
    if st != 0:
        _lib.raise_for(st, "gmr.serving: setting tag %d on device %d: %s"
                       % (tag, device, _lib.status_name(st)))


@contextlib.contextmanager
def region(tag: str, device: Optional[int] = None) -> Iterator[None]:
    """Give every allocation made inside the block the tag `tag`.

    Regions nest: leaving one restores the tag of the region around it (or
    "untagged"). The tag is the device pool's, so allocations other threads
    make meanwhile get it too (torch_memory_saver's rule).

    Args:
        tag: the tag's name (a new name gets the next free C tag).
        device: the CUDA device (None: the current one).

    Yields:
        Nothing; allocations in the block carry the tag.

    Raises:
        ValueError: a bad tag name, or no tag left.
        gmr.GmrError: the device's stack has no vmm pool (GMR_ERR_UNSUPPORTED),
            or cannot be created.
        OSError: libgmr.so cannot be loaded.
    """
    dev = _current_device(device)
    tid = tag_id(tag)
    pool = _pool(dev)
    token = object()
    with _lock:
        stack = _open.setdefault(dev, [])
        stack.append((token, tid))
        _set_default_tag(pool, tid, dev)
    try:
        yield
    finally:
        with _lock:
            stack = _open.get(dev, [])
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] is token:
                    del stack[i]
                    break
            _set_default_tag(pool, stack[-1][1] if stack else 0, dev)


def tag_tensor(obj: Union[int, Any], tag: str, device: Optional[int] = None) -> None:
    """Tag one allocation after the fact (gmr_vmm_pool_resource_set_tag).

    Args:
        obj: the allocation's start address, or an object with data_ptr()
            (a torch.Tensor that owns its storage from offset 0, a CuPy array's
            memory pointer as int).
        tag: the tag's name.
        device: the CUDA device (None: the tensor's, else the current one).

    Raises:
        ValueError: a bad tag name.
        gmr.GmrError: GMR_ERR_UNKNOWN_POINTER, the address is not the start of
            an allocation of the device's pool (a view, or a tensor of another
            allocator); GMR_ERR_UNSUPPORTED, no vmm pool.
        OSError: libgmr.so cannot be loaded.
    """
    if device is None and hasattr(obj, "device") and getattr(obj.device, "index", None) is not None:
        device = obj.device.index
    ptr = int(obj.data_ptr()) if hasattr(obj, "data_ptr") else int(obj)
    dev = _current_device(device)
    tid = tag_id(tag)
    st = _lib.lib().gmr_vmm_pool_resource_set_tag(_pool(dev), ptr, tid)
    if st != 0:
        _lib.raise_for(st, "gmr.serving: tagging %#x as %r on device %d: %s (it must be the start "
                       "of an allocation of this device's pool)"
                       % (ptr, tag, dev, _lib.status_name(st)))


def _check_not_capturing(verb: str) -> None:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("gmr.serving.%s: the current stream is capturing a CUDA graph; end "
                           "the capture (leave torch.cuda.graph) first" % verb)


def _raise_failure(st: int, what: str, failure: _capi.FailureStruct) -> None:
    message = failure.message.decode(errors="replace")
    _lib.raise_for(st, "gmr.serving.%s: %s%s" % (what, _lib.status_name(st),
                                                 ": " + message if message else ""))


def sleep(backup: Iterable[str] = (UNTAGGED,), keep: Iterable[str] = (), host: str = "pageable",
          device: Optional[int] = None, keep_backup: bool = False,
          staging_bytes: Optional[int] = None, copy_threads: Optional[int] = None) -> None:
    """Give the device memory of every tag not kept back to the device.

    The device is synchronised first (work on every stream finishes before
    anything is unmapped); the tags in `backup` are copied to host memory;
    the tags in `keep` stay mapped and valid; every other tag is discarded
    (its memory wakes with undefined contents). Addresses stay. Reserved
    ranges (reserve()) sleep with their tag.

    Args:
        backup: tag names to copy to host memory ("untagged": memory outside
            any region; "graphs": CUDA graph pools).
        keep: tag names that stay mapped (their memory is not released).
        host: "pageable" (the default: ordinary memory, copied through the
            pool's pinned staging ring; no pinned memory but the ring) or
            "pinned" (cudaHostAlloc per backup: pinning is slow unless the
            backups are kept).
        device: the CUDA device (None: the current one).
        keep_backup: keep this sleep's backups after the wake, for the next
            sleep to reuse (holds them, pinned or pageable, while awake).
        staging_bytes: the staging ring's size in bytes for pageable backups
            (None: 256 MiB; kept by the pool across cycles).
        copy_threads: host threads copying between the ring and pageable
            backups (None: the CPUs, at most 16; at most 64).

    Raises:
        ValueError: an unknown tag name, a tag both backed up and kept, a
            str instead of a list, an unknown host kind, or a negative
            staging_bytes or copy_threads.
        RuntimeError: the current stream is capturing a CUDA graph.
        gmr.OutOfMemoryError: host memory for the copies ran out (nothing
            changed).
        gmr.GmrError: GMR_ERR_BUSY, asleep already; GMR_ERR_CAPTURE_UNSAFE,
            another stream captures; GMR_ERR_CUDA, a CUDA call failed
            (nothing changed); GMR_ERR_UNSUPPORTED, no vmm pool.
        OSError: libgmr.so cannot be loaded.
    """
    save = _known(backup, "backup")
    kept = _known(keep, "keep")
    both = set(save) & set(kept)
    if both:
        names = sorted(n for n, t in tags().items() if t in both)
        raise ValueError("gmr.serving.sleep: %s both backed up and kept; name each tag once"
                         % ", ".join(names))
    if host not in HOST_KINDS:
        raise ValueError("gmr.serving.sleep: host=%r is none of %s" % (host, ", ".join(HOST_KINDS)))
    for name, value in (("staging_bytes", staging_bytes), ("copy_threads", copy_threads)):
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ValueError("gmr.serving.sleep: %s=%r is not a count >= 0" % (name, value))
    _check_not_capturing("sleep")
    dev = _current_device(device)
    pool = _pool(dev)
    o = _capi.VmmSleepOptions()
    o.save_tag_mask = _mask(save)
    o.keep_tag_mask = _mask(kept)
    o.host = _capi.VMM_HOST_PINNED if host == "pinned" else _capi.VMM_HOST_PAGEABLE
    o.keep_backup = bool(keep_backup)
    o.staging_bytes = staging_bytes or 0
    o.copy_threads = copy_threads or 0
    failure = _capi.FailureStruct()
    st = _lib.lib().gmr_vmm_pool_resource_sleep(pool, ctypes.byref(o), ctypes.byref(failure))
    if st != 0:
        _raise_failure(st, "sleep", failure)


def wake(tags: Optional[Iterable[str]] = None, device: Optional[int] = None) -> None:
    """Map the memory of the asleep tags again and copy backed-up contents back.

    Args:
        tags: tag names to wake (None: all). The device stays asleep (no
            allocation) until every tag woke.
        device: the CUDA device (None: the current one).

    Raises:
        ValueError: an unknown tag name, or a str instead of a list.
        RuntimeError: the current stream is capturing a CUDA graph.
        gmr.OutOfMemoryError: the device has no room for the memory (nothing
            changed: free device memory and call wake again).
        gmr.GmrError: GMR_ERR_INVALID_ARGUMENT, the device is not asleep;
            GMR_ERR_CUDA or GMR_ERR_CAPTURE_UNSAFE, a CUDA call failed
            (nothing changed); GMR_ERR_UNSUPPORTED, no vmm pool.
        OSError: libgmr.so cannot be loaded.
    """
    o = _capi.VmmWakeOptions()
    if tags is not None:
        o.wake_all = False
        o.wake_tag_mask = _mask(_known(tags, "wake"))
    _check_not_capturing("wake")
    dev = _current_device(device)
    pool = _pool(dev)
    failure = _capi.FailureStruct()
    st = _lib.lib().gmr_vmm_pool_resource_wake(pool, ctypes.byref(o), ctypes.byref(failure))
    if st != 0:
        _raise_failure(st, "wake", failure)


def is_asleep(device: Optional[int] = None) -> bool:
    """Whether the device's pool is asleep (from sleep until every tag woke).

    Args:
        device: the CUDA device (None: the current one).

    Returns:
        True while asleep.

    Raises:
        gmr.GmrError: the device's stack has no vmm pool, or cannot be created.
        OSError: libgmr.so cannot be loaded.
    """
    return bool(_lib.lib().gmr_vmm_pool_resource_is_asleep(_pool(_current_device(device))))


def _tag_figures(pool: int, mask: int) -> Dict[str, Any]:
    s = _capi.VmmTagStats()
    st = _lib.lib().gmr_vmm_pool_resource_get_tag_stats(pool, mask, ctypes.byref(s))
    if st != 0:
        _lib.raise_for(st, "gmr.serving: reading tag figures: %s" % _lib.status_name(st))
    return {"live_bytes": s.live_bytes, "live_count": s.live_count,
            "asleep_bytes": s.asleep_bytes, "asleep_count": s.asleep_count,
            "saved_bytes": s.saved_bytes, "saved_count": s.saved_count,
            "saved_pinned": bool(s.saved_pinned)}


def info(device: Optional[int] = None) -> Dict[str, Any]:
    """What the device's pool holds, per tag, awake and asleep.

    Args:
        device: the CUDA device (None: the current one).

    Returns:
        A dict: device; asleep (bool); held_bytes (device memory the pool
        holds now for allocations); host_bytes (backups held for asleep
        memory) and host_pinned (whether they are pinned); host_pinned_bytes
        and host_pageable_bytes (all the host memory the pool holds for
        sleep: the staging ring, backups asleep or kept); staging_bytes;
        kept_backup_bytes; ranges ({count, reserved_bytes, committed_bytes,
        mapped_bytes}: reserved ranges, not in held_bytes); tags ({name:
        {live_bytes, live_count, asleep_bytes, asleep_count, saved_bytes,
        saved_count}} for every known name); other (the same for tags no
        name covers).

    Raises:
        gmr.GmrError: the device's stack has no vmm pool, or cannot be created.
        OSError: libgmr.so cannot be loaded.
    """
    dev = _current_device(device)
    pool = _pool(dev)
    lib = _lib.lib()
    footprint = _capi.FootprintStruct()
    # A handle is its gmr_resource (the resource is the handle's first member).
    st = lib.gmr_resource_get_footprint(pool, ctypes.byref(footprint))
    if st != 0:
        _lib.raise_for(st, "gmr.serving: reading the footprint of device %d" % dev)
    known = tags()
    per_tag = {}
    for name, tid in sorted(known.items(), key=lambda kv: kv[1]):
        figures = _tag_figures(pool, 1 << tid)
        del figures["saved_pinned"]
        per_tag[name] = figures
    everything = _tag_figures(pool, (1 << (_capi.VMM_MAX_TAG + 1)) - 1)
    stats = _capi.VmmPoolStats()
    st = lib.gmr_vmm_pool_resource_get_stats(pool, ctypes.byref(stats))
    if st != 0:
        _lib.raise_for(st, "gmr.serving: reading the statistics of device %d" % dev)
    other = _tag_figures(pool, ((1 << (_capi.VMM_MAX_TAG + 1)) - 1) & ~_mask(known.values()))
    del other["saved_pinned"]
    return {
        "device": dev,
        "asleep": bool(lib.gmr_vmm_pool_resource_is_asleep(pool)),
        "held_bytes": footprint.held_bytes,
        "host_bytes": everything["saved_bytes"],
        "host_pinned": everything["saved_pinned"],
        "host_pinned_bytes": stats.host_pinned_bytes,
        "host_pageable_bytes": stats.host_pageable_bytes,
        "staging_bytes": stats.staging_bytes,
        "kept_backup_bytes": stats.kept_backup_bytes,
        "ranges": {"count": stats.range_count, "reserved_bytes": stats.range_reserved_bytes,
                   "committed_bytes": stats.range_committed_bytes,
                   "mapped_bytes": stats.range_mapped_bytes},
        "tags": per_tag,
        "other": other,
    }


# ---- reserve now, commit later (gmr/vmm_pool_range.h; Range: gmr/_ranges.py) ----------

def reserve(nbytes: int, tag: Optional[str] = None, page_bytes: Optional[int] = None,
            device: Optional[int] = None) -> Range:
    """Reserve device addresses in the device's pool, to commit later.

    Nothing is committed: commit the pages a capture needs, capture, then
    commit the final size at the same addresses (vLLM's extensible KV cache).

    Args:
        nbytes: bytes to reserve (rounded up to whole pages).
        tag: the tag of the range's pages (None: the tag of the region in
            force, else "untagged").
        page_bytes: the commit granularity, one physical allocation per page
            (None: the pool's page, 2 MiB; else a power of two and a multiple
            of the device's VMM granularity).
        device: the CUDA device (None: the current one).

    Returns:
        The Range.

    Raises:
        ValueError: nbytes is not positive, page_bytes is negative, or a bad
            tag name.
        gmr.OutOfMemoryError: no addresses left.
        gmr.GmrError: GMR_ERR_INVALID_ARGUMENT, a bad page_bytes;
            GMR_ERR_UNSUPPORTED, the device's stack has no vmm pool.
        OSError: libgmr.so cannot be loaded.
    """
    if not isinstance(nbytes, int) or nbytes <= 0:
        raise ValueError("gmr.serving.reserve: nbytes=%r is not a positive int" % (nbytes,))
    if page_bytes is not None and (not isinstance(page_bytes, int) or page_bytes < 0):
        raise ValueError("gmr.serving.reserve: page_bytes=%r is not a count >= 0" % (page_bytes,))
    tid = tag_id(tag) if tag is not None else None
    dev = _current_device(device)
    pool = _pool(dev)
    base = ctypes.c_void_p()
    failure = _capi.FailureStruct()
    lib = _lib.lib()
    st = lib.gmr_vmm_pool_resource_reserve_range(pool, nbytes, page_bytes or 0,
                                                 ctypes.byref(base), ctypes.byref(failure))
    if st != 0:
        _raise_failure(st, "reserve", failure)
    out = _capi.VmmRangeInfo()
    st = lib.gmr_vmm_pool_resource_get_range_info(pool, base, 0, ctypes.byref(out))
    if st == 0 and tid is not None:
        st = lib.gmr_vmm_pool_resource_set_tag(pool, base, tid)
    if st != 0:
        lib.gmr_vmm_pool_resource_free_range(pool, base, None)
        _lib.raise_for(st, "gmr.serving.reserve: %s" % _lib.status_name(st))
    return Range(pool, int(base.value), int(out.reserved_bytes), int(out.page_bytes), dev)
