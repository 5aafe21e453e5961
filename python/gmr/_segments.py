"""The "segments" of a memory snapshot (PyTorch's layout) from gmr's own books.

PyTorch's caching allocator describes its memory as segments (what it got
from cudaMalloc) tiled by blocks ('active_allocated', 'active_pending_free',
'inactive'); torch.cuda._memory_viz and pytorch.org/memory_viz draw them.
gmr's stacks lay their memory out in their own ways; this module asks the
topmost layer of a device's stack that can list its memory:

  - pool (gmr_pool_resource_get_blocks): one segment per chunk, tiled by
    the chunk's blocks (allocated, free, or freed and waiting for a recorded
    stream: 'active_pending_free');
  - vmm / vmm_pool (gmr_vmm_pool_resource_get_regions): one segment per run
    of mapped regions of a reserved address range (unmapped holes and
    asleep regions hold no memory and split segments), is_expandable True
    (PyTorch's expandable segments are VMM-backed too);

and places PyTorch's live allocations (the torch shim's table) in them:
an allocated block that is one allocation gets its bytes as asked and its
frames; one that holds several (a graph pool's chunk, the VMM pool's small
chunks) is split into the allocations and 'inactive' gaps; one that is no
allocation of PyTorch's (gmr.allocate, a graph pool's free space) stays
'active_allocated' without frames. A stack no layer of which can list its
memory (cuda(kind=async), fixed_block, graph_arena at the top) gets one
segment per live allocation: the snapshot then shows what PyTorch holds,
not what the stack reserved. The same goes for an allocation no listed
segment holds.

Pure functions over plain tuples (segments_from_blocks, segments_from_regions,
place_allocations) plus layout(), which reads a stack through ctypes.
"""

from __future__ import annotations

import bisect
import ctypes
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from gmr import _capi, _lib

# (address, size, requested bytes, state) of one block; state is one of
# PyTorch's: "active_allocated", "active_pending_free", "inactive".
Block = Tuple[int, int, int, str]
# (address, blocks in address order tiling it, is_expandable).
Extent = Tuple[int, List[Block], bool]
# (address, size, stream, context) of one live allocation of PyTorch's.
Live = Tuple[int, int, int, int]

ALLOCATED = "active_allocated"
PENDING = "active_pending_free"
INACTIVE = "inactive"

_POOL_STATES = {_capi.POOL_BLOCK_ALLOCATED: ALLOCATED, _capi.POOL_BLOCK_FREE: INACTIVE,
                _capi.POOL_BLOCK_DEFERRED: PENDING}


def segments_from_blocks(rows: Sequence[Tuple[int, int, int, int, int, int]]) -> List[Extent]:
    """Segments from a pool's block list.

    Args:
        rows: (chunk, chunk bytes, address, bytes, requested bytes,
            gmr_pool_block_state) per block, chunk by chunk.

    Returns:
        One extent per chunk, by address, its blocks by address.

    Raises:
        ValueError: a block state outside gmr_pool_block_state.
    """
    chunks: Dict[int, List[Block]] = {}
    for chunk, _, addr, size, requested, state in rows:
        if state not in _POOL_STATES:
            raise ValueError("gmr: pool block at %#x has state %d, not a gmr_pool_block_state"
                             % (addr, state))
        name = _POOL_STATES[state]
        asked = requested if name == ALLOCATED else (size if name == PENDING else 0)
        chunks.setdefault(chunk, []).append((addr, size, asked, name))
    return [(chunk, sorted(blocks), False) for chunk, blocks in sorted(chunks.items())]


def segments_from_regions(rows: Sequence[Tuple[int, int, int, int]]) -> List[Extent]:
    """Segments from a VMM pool's region list.

    Args:
        rows: (address, bytes, gmr_vmm_pool_region_kind, VA chunk index) per
            region, in the pool's order (ascending address per VA chunk).

    Returns:
        One extent per run of mapped regions (free, live, zombie) of one VA
        chunk, by address.
    """
    extents: List[Extent] = []
    current: List[Block] = []
    last_chunk: Optional[int] = None
    end = -1

    def close() -> None:
        if current:
            extents.append((current[0][0], list(current), True))
            current.clear()

    for addr, size, kind, chunk in rows:
        if kind in (_capi.VMM_REGION_HOLE, _capi.VMM_REGION_ASLEEP) or chunk != last_chunk or \
                addr != end:
            close()
        last_chunk, end = chunk, addr + size
        if kind == _capi.VMM_REGION_LIVE:
            current.append((addr, size, size, ALLOCATED))
        elif kind in (_capi.VMM_REGION_FREE, _capi.VMM_REGION_ZOMBIE):
            current.append((addr, size, 0, INACTIVE))
    close()
    return sorted(extents)


def _split(block: Block, inside: List[Live], frames_of: Callable[[int], List[Any]]
           ) -> List[Dict[str, Any]]:
    """An allocated block as PyTorch's blocks: the allocations inside it and
    inactive gaps (or the block itself when it is one allocation or none)."""
    addr, size, requested, state = block
    if not inside:
        return [_block(addr, size, requested, state, [])]
    if len(inside) == 1 and inside[0][0] == addr and inside[0][1] <= size:
        return [_block(addr, size, inside[0][1], state, frames_of(inside[0][3]))]
    out = []
    cursor = addr
    for p, n, _, context in inside:
        if p > cursor:
            out.append(_block(cursor, p - cursor, 0, INACTIVE, []))
        out.append(_block(p, n, n, ALLOCATED, frames_of(context)))
        cursor = p + n
    if cursor < addr + size:
        out.append(_block(cursor, addr + size - cursor, 0, INACTIVE, []))
    return out


def _block(addr: int, size: int, requested: int, state: str, frames: List[Any]) -> Dict[str, Any]:
    return {"address": addr, "size": size, "requested_size": requested, "state": state,
            "frames": frames}


def _segment(device: int, address: int, blocks: List[Dict[str, Any]], stream: int,
             expandable: bool) -> Dict[str, Any]:
    allocated = [b for b in blocks if b["state"] == ALLOCATED]
    active = [b for b in blocks if b["state"] != INACTIVE]
    return {
        "device": device,
        "address": address,
        "total_size": sum(b["size"] for b in blocks),
        "allocated_size": sum(b["size"] for b in allocated),
        "active_size": sum(b["size"] for b in active),
        "requested_size": sum(b["requested_size"] for b in allocated),
        "stream": stream,
        "segment_type": "large",
        "segment_pool_id": (0, 0),
        "is_expandable": expandable,
        "frames": [],
        "blocks": blocks,
    }


def place_allocations(device: int, extents: Optional[List[Extent]], live: Sequence[Live],
                      frames_of: Callable[[int], List[Any]]) -> List[Dict[str, Any]]:
    """PyTorch's segment dicts: the extents with the live allocations placed.

    Args:
        device: the device index the segments belong to.
        extents: the stack's segments (segments_from_blocks or
            segments_from_regions), or None when no layer lists its memory.
        live: PyTorch's live allocations on the device, any order.
        frames_of: the frames (PyTorch's list of dicts) of a context number.

    Returns:
        Segment dicts as torch.cuda.memory._snapshot() gives them, by address;
        an allocation no extent holds gets a segment of its own.
    """
    live = sorted(live)
    starts = [p for p, _, _, _ in live]
    placed = [False] * len(live)
    segments = []
    for address, blocks, expandable in extents or []:
        out: List[Dict[str, Any]] = []
        for block in blocks:
            if block[3] != ALLOCATED:
                out.append(_block(*block, []))
                continue
            lo = bisect.bisect_left(starts, block[0])
            hi = bisect.bisect_left(starts, block[0] + block[1])
            inside = [a for a in live[lo:hi] if a[0] + a[1] <= block[0] + block[1]]
            for i in range(lo, hi):
                placed[i] = placed[i] or live[i][0] + live[i][1] <= block[0] + block[1]
            out.extend(_split(block, inside, frames_of))
        segments.append(_segment(device, address, out, 0, expandable))
    for (p, n, stream, context), done in zip(live, placed):
        if not done:
            segments.append(_segment(device, p, [_block(p, n, n, ALLOCATED, frames_of(context))],
                                     stream, False))
    return sorted(segments, key=lambda s: s["address"])


def _fetch_rows(call: Callable[..., int], struct: Any, what: str) -> List[Any]:
    """Call f(array, capacity, &count) until the array holds every row."""
    count = ctypes.c_size_t(0)
    while True:
        n = count.value + 64
        rows = (struct * n)()
        st = call(rows, n, ctypes.byref(count))
        if st != 0:
            _lib.raise_for(st, "gmr: listing the %s failed: %s" % (what, _lib.status_name(st)))
        if count.value <= n:
            return list(rows[:count.value])


def layout(resource: int) -> Optional[List[Extent]]:
    """The segments of the stack headed by `resource`, from its topmost layer
    that lists its memory (a pool's blocks, a VMM pool's regions).

    Args:
        resource: the address of the stack's top gmr_resource.

    Returns:
        The extents, or None when no layer of the stack lists its memory.

    Raises:
        gmr.GmrError: a layer refused to list its memory.
        OSError: libgmr.so cannot be loaded.
    """
    lib = _lib.lib()
    r = resource
    while r:
        pool = lib.gmr_resource_downcast(r, b"pool_resource")
        if pool:
            blocks = _fetch_rows(lambda a, n, c: lib.gmr_pool_resource_get_blocks(pool, a, n, c),
                                 _capi.PoolBlockInfo, "pool's blocks")
            return segments_from_blocks([(b.chunk or 0, b.chunk_bytes, b.addr or 0, b.bytes,
                                          b.requested_bytes, b.state) for b in blocks])
        vmm = lib.gmr_resource_downcast(r, b"vmm_pool_resource")
        if vmm:
            regions = _fetch_rows(
                lambda a, n, c: lib.gmr_vmm_pool_resource_get_regions(vmm, a, n, c),
                _capi.VmmPoolRegion, "VMM pool's regions")
            return segments_from_regions([(g.addr or 0, g.bytes, g.kind, g.va_chunk_index)
                                          for g in regions])
        r = lib.gmr_resource_get_upstream(r)
    return None
