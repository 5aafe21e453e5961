"""PyTorch's memory snapshots of gmr's own books, for PyTorch's memory tools.

PyTorch users look at GPU memory with torch.cuda.memory._record_memory_history(),
torch.cuda.memory._dump_snapshot() and the viewer at pytorch.org/memory_viz
(or torch.cuda._memory_viz); under a pluggable allocator such as gmr.torch
those raise. This module writes the same pickle from what gmr knows, with
nothing but the standard library (no PyTorch needed to write or read it):

    import gmr.torch
    gmr.torch.use("pool > cuda(kind=async)")
    gmr.torch.record_memory_history()      # torch.cuda.memory._record_memory_history()
    ...                                    # the workload
    gmr.torch.dump_snapshot("snapshot.pickle")   # torch.cuda.memory._dump_snapshot()

then drag snapshot.pickle onto pytorch.org/memory_viz, run
`python -m torch.cuda._memory_viz trace_plot snapshot.pickle -o trace.html`,
or replay it through gmr's stacks: `tools/replay snapshot.pickle`.

What is filled (docs/memory_viz.md has the whole table):
  device_traces  one list per device of the allocations PyTorch made through
                 gmr while recording: 'alloc', 'free_requested',
                 'free_completed' and 'oom' entries with 'addr' ('oom':
                 'device_free' instead), 'size' (bytes as asked), 'stream',
                 'time_us' and 'frames' (the Python frames of the allocating
                 thread when context is on; free entries carry the
                 allocation's). No 'segment_*' entries: gmr's layers take and
                 give back memory without telling the torch shim.
  segments       the device stacks' memory now (gmr._segments: a pool's
                 chunks, a VMM pool's mapped runs, else one per live
                 allocation), tiled by blocks with PyTorch's states.
  allocator_settings  {'gmr_spec': [each device's stack spec or None]}.
The history is the torch shim's (integrations/torch/gmr_torch.h,
gmr_torch_record_history); the live allocations its pointer table.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import pickle
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import gmr
from gmr import _capi, _lib, _segments

__all__ = ["record_memory_history", "snapshot", "dump_snapshot", "build_snapshot",
           "DEFAULT_MAX_ENTRIES", "MAX_FRAMES"]

# Entries the history keeps by default (56 bytes each in C): PyTorch keeps
# every entry unless told otherwise; gmr bounds the ring.
DEFAULT_MAX_ENTRIES = 1_000_000
# Python frames kept per allocation, innermost first.
MAX_FRAMES = 64

# The pickle protocol written: what torch.cuda.memory._dump_snapshot writes
# by default, readable by Python 3.4+ and by tools/replay (protocols 2..5).
PICKLE_PROTOCOL = 4

# One entry of the history: (action, device, addr, size, stream, time_us,
# context, device_free).
Entry = Tuple[str, int, int, int, int, int, int, int]


class _FrameTable:
    """Python stacks by number: every distinct stack is kept once, so memory
    grows with the program's allocation sites, not with its allocations."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: Dict[Tuple[Tuple[str, int, str], ...], int] = {}
        self._stacks: List[Tuple[Tuple[str, int, str], ...]] = [()]
        self._dicts: Dict[int, List[Dict[str, Any]]] = {0: []}

    def gather(self) -> int:
        """The number of the calling thread's Python stack (0: none)."""
        try:
            frame = sys._getframe(2)  # skip this method and the ctypes callback
        except ValueError:
            return 0  # a thread with no Python frame (C++ worker threads)
        stack = []
        while frame is not None and len(stack) < MAX_FRAMES:
            code = frame.f_code
            stack.append((code.co_filename, frame.f_lineno, code.co_name))
            frame = frame.f_back
        key = tuple(stack)
        with self._lock:
            number = self._ids.get(key)
            if number is None:
                number = len(self._stacks)
                self._ids[key] = number
                self._stacks.append(key)
            return number

    def frames(self, number: int) -> List[Dict[str, Any]]:
        """PyTorch's frame dicts of a stack number ([] for 0 or unknown)."""
        with self._lock:
            done = self._dicts.get(number)
            if done is None:
                stack = self._stacks[number] if 0 <= number < len(self._stacks) else ()
                done = [{"filename": f, "line": line, "name": name} for f, line, name in stack]
                self._dicts[number] = done
            return done


_frames = _FrameTable()
_callbacks: List[Any] = []  # every context function handed to the shim (see gmr_torch.h)
_atexit_registered = False


def _context() -> int:
    try:
        return _frames.gather()
    except Exception:  # noqa: BLE001 (a callback from C must not raise)
        return 0


def _shim() -> ctypes.CDLL:
    path = _lib.loaded_torch_lib_path()
    if path is None:
        raise RuntimeError(
            "gmr.torch.record_memory_history(): gmr is not PyTorch's allocator yet: call "
            "gmr.torch.use() (or gmr.torch.mempool()) first. Recording before that would load "
            "the torch shim early and keep use() from loading the one built for this PyTorch")
    return _lib.torch_lib()


def _stop_context_at_exit() -> None:
    """Stop recording as the interpreter ends: the shim must call no Python then."""
    shim = _lib.torch_lib() if _lib.loaded_torch_lib_path() else None
    if shim is not None and _callbacks:
        shim.gmr_torch_record_history(0, 0, None)


def record_memory_history(enabled: Union[str, bool, None] = "all",
                          context: Union[str, bool, None] = "all", stacks: str = "python",
                          max_entries: int = DEFAULT_MAX_ENTRIES,
                          clear_history: bool = False) -> None:
    """Start or stop recording PyTorch's allocations through gmr (the shim's history).

    torch.cuda.memory._record_memory_history()'s arguments, for gmr.torch.
    Recording costs one mutex per allocation and free, plus, with context,
    a walk of the allocating thread's Python frames (which takes the GIL, as
    PyTorch's context='python' does). Entries live in a ring of
    `max_entries` in the torch shim; the oldest go first.

    Args:
        enabled: "all" (or True) records from now on; None (or False) stops,
            keeping the entries for snapshot(). "state" (PyTorch's: no
            history, frames of live blocks only) is not offered.
        context: "all", "alloc", "state" or True: keep the Python frames of
            each allocation (free entries carry the allocation's, as
            PyTorch's "alloc"); None or False: no frames.
        stacks: "python" (PyTorch's "all" adds C++ frames, which gmr does not
            gather).
        max_entries: entries kept, 1 to gmr._capi.TORCH_HISTORY_MAX_ENTRIES.
        clear_history: forget what was recorded so far first.

    Raises:
        ValueError: an argument outside the values above (nothing changed).
        RuntimeError: gmr.torch is not PyTorch's allocator yet (call
            gmr.torch.use() or gmr.torch.mempool() first).
        gmr.GmrError: the shim refused (nothing changed).
        OSError: the torch shim cannot be loaded.
    """
    global _atexit_registered
    on = {"all": True, True: True, None: False, False: False}
    if enabled not in on:
        raise ValueError("gmr.torch.record_memory_history(enabled=%r): use 'all' (or True) to "
                         "record, None (or False) to stop; gmr has no 'state'-only mode"
                         % (enabled,))
    frames = {"all": True, "alloc": True, "state": True, True: True, None: False, False: False}
    if context not in frames:
        raise ValueError("gmr.torch.record_memory_history(context=%r): use 'all', 'alloc', "
                         "'state' or True for Python frames, None or False for none" % (context,))
    if stacks != "python":
        raise ValueError("gmr.torch.record_memory_history(stacks=%r): gmr gathers Python frames "
                         "only: use stacks='python'" % (stacks,))
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or \
            not 1 <= max_entries <= _capi.TORCH_HISTORY_MAX_ENTRIES:
        raise ValueError("gmr.torch.record_memory_history(max_entries=%r): give an int from 1 to "
                         "%d" % (max_entries, _capi.TORCH_HISTORY_MAX_ENTRIES))
    shim = _shim()
    if clear_history:
        shim.gmr_torch_clear_history()
    callback = None
    if on[enabled] and frames[context]:
        callback = _capi.TORCH_CONTEXT_FN(_context)
        _callbacks.append(callback)  # the shim may call it after it is replaced
        if not _atexit_registered:
            atexit.register(_stop_context_at_exit)
            _atexit_registered = True
    address = ctypes.cast(callback, ctypes.c_void_p) if callback is not None else None
    st = shim.gmr_torch_record_history(1 if on[enabled] else 0, max_entries, address)
    if st != 0:
        _lib.raise_for(st, "gmr.torch.record_memory_history(max_entries=%d): %s"
                       % (max_entries, _lib.status_name(st)))


def _history() -> Tuple[List[Entry], int]:
    """The shim's entries (oldest first) and how many the ring dropped."""
    if _lib.loaded_torch_lib_path() is None:
        return [], 0
    shim = _lib.torch_lib()
    count = ctypes.c_size_t(0)
    dropped = ctypes.c_uint64(0)
    while True:
        n = count.value + 256
        rows = (_capi.TorchHistoryEntry * n)()
        st = shim.gmr_torch_get_history(rows, n, ctypes.byref(count), ctypes.byref(dropped))
        if st != 0:
            _lib.raise_for(st, "gmr.torch: reading the allocation history failed")
        if count.value <= n:
            break
    names = _capi.TORCH_HISTORY_ACTIONS
    return [(names[e.action] if 0 <= e.action < len(names) else "unknown", e.device, e.addr,
             e.size, e.stream, e.time_us, e.context, e.device_free)
            for e in rows[:count.value]], dropped.value


def _live(device: int) -> List[_segments.Live]:
    """PyTorch's live allocations on `device` (the shim's table)."""
    if _lib.loaded_torch_lib_path() is None:
        return []
    shim = _lib.torch_lib()
    count = ctypes.c_size_t(0)
    while True:
        n = count.value + 64
        cols = [(ctypes.c_size_t * n)() for _ in range(3)] + [(ctypes.c_uint64 * n)()]
        st = shim.gmr_torch_get_live_allocations(device, *cols, n, ctypes.byref(count))
        if st != 0:
            _lib.raise_for(st, "gmr.torch: listing the live allocations of device %d failed"
                           % device)
        if count.value <= n:
            return list(zip(*(c[:count.value] for c in cols)))


def build_snapshot(entries: Sequence[Entry], devices: Dict[int, Tuple[Optional[str], Any, Any]],
                   device_count: int, frames_of: Any = None) -> Dict[str, Any]:
    """PyTorch's snapshot dict from gmr's books (no C call: tests build one by hand).

    Args:
        entries: the history, oldest first, as (action, device, addr, size,
            stream, time_us, context, device_free).
        devices: per device with books, (its stack spec, its extents
            (gmr._segments) or None, its live allocations as (addr, size,
            stream, context)).
        device_count: the devices device_traces lists at least.
        frames_of: a function from a context number to PyTorch's frame dicts
            (None: no frames).

    Returns:
        {'segments', 'device_traces', 'allocator_settings',
        'external_annotations'} as torch.cuda.memory._snapshot() gives them.

    Raises:
        ValueError: an entry names an action PyTorch has no name for.
    """
    frames = frames_of if frames_of is not None else (lambda _: [])
    count = max([device_count] + [d + 1 for d in devices] + [e[1] + 1 for e in entries])
    traces: List[List[Dict[str, Any]]] = [[] for _ in range(count)]
    for action, device, addr, size, stream, time_us, context, device_free in entries:
        if action not in _capi.TORCH_HISTORY_ACTIONS:
            raise ValueError("gmr: a history entry of device %d has action %r" % (device, action))
        entry: Dict[str, Any] = {"action": action}
        if action == "oom":
            entry["device_free"] = device_free
        else:
            entry["addr"] = addr
        entry.update(size=size, stream=stream, time_us=time_us, frames=frames(context))
        traces[device].append(entry)
    segments: List[Dict[str, Any]] = []
    specs: List[Optional[str]] = [None] * count
    for device in sorted(devices):
        spec, extents, live = devices[device]
        specs[device] = spec
        segments.extend(_segments.place_allocations(device, extents, live, frames))
    return {"segments": segments, "device_traces": traces,
            "allocator_settings": {"gmr_spec": specs}, "external_annotations": []}


def snapshot() -> Dict[str, Any]:
    """gmr's memory now, and the history recorded, in PyTorch's snapshot layout.

    torch.cuda.memory._snapshot() for gmr.torch: what docs/memory_viz.md
    lists is filled. Devices without a stack are listed without segments
    (no stack is created here).

    Returns:
        The snapshot dict (plain data: dicts, lists, tuples, ints, strs,
        bools, None).

    Raises:
        gmr.GmrError: a stack or the shim refused to list its memory.
        OSError: libgmr.so cannot be loaded.
    """
    entries, _ = _history()
    device_count = gmr.device_count()
    devices: Dict[int, Tuple[Optional[str], Any, Any]] = {}
    seen = {e[1] for e in entries}
    for device in range(max([device_count] + [d + 1 for d in seen])):
        spec = gmr.device_spec(device) if device < device_count else None
        live = _live(device) if device < 64 else []
        if spec is None and not live:
            continue
        extents = _segments.layout(gmr.device_resource(device)) if spec is not None else None
        devices[device] = (spec, extents, live)
    return build_snapshot(entries, devices, device_count, _frames.frames)


def dump_snapshot(path: str) -> None:
    """Write snapshot() to `path` as a pickle (torch.cuda.memory._dump_snapshot).

    Args:
        path: the file to write (replaced if it exists).

    Raises:
        OSError: the file cannot be written (nothing is left half-written:
            the pickle goes to a temporary file renamed into place), or
            libgmr.so cannot be loaded.
        gmr.GmrError: a stack or the shim refused to list its memory.
    """
    data = snapshot()
    folder = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(folder, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    try:
        with open(temporary, "wb") as f:
            pickle.dump(data, f, protocol=PICKLE_PROTOCOL)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
