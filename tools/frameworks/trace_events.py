"""Allocation traces as tools/replay reads them, in Python (standard library only).

The same three formats and the same rules as tools/replay/trace.h, so that a
replay through another allocator (tools/frameworks/torch_replay.py) makes
exactly the calls gmr's replay makes:
  - PyTorch snapshot CSV, header action,addr,size,stream,time_us (decimal):
    alloc -> allocate, free_requested -> free; segment_alloc/segment_map add
    to and segment_free/segment_unmap take from the recording allocator's
    reserve (the reference peak); capture_begin/capture_end mark a CUDA
    graph capture of the row's stream; free_completed, snapshot, oom are
    not replayed;
  - RAPIDS RMM log, header Thread,Time,Action,Pointer,Size,Stream (pointer
    and stream hexadecimal, with or without 0x): allocate, free; 'allocate
    failure' rows are counted and skipped;
  - a PyTorch memory snapshot pickle (first byte 0x80): its device_traces
    entries are the CSV's rows; the only device with entries, or the one
    asked for. It is read by an unpickler that refuses every class (plain
    data only), as gmr's reader does.
Files may be gzip-compressed. Frees pair with their allocation by address;
a free of an address not live is counted as unmatched and skipped.
Malformed lines (wrong column count, bad number, unknown action, an
allocation of 0 bytes or at a live address, a free whose size differs, a
capture begun twice or ended unbegun) fail the read with "FILE:LINE: reason",
or are counted and skipped with skip_malformed.
"""

import gzip
import io
import pickle
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

PYTORCH_HEADER = "action,addr,size,stream,time_us"
RMM_HEADER = "Thread,Time,Action,Pointer,Size,Stream"

ALLOC, FREE, CAPTURE_BEGIN, CAPTURE_END = 0, 1, 2, 3

_PYTORCH_ACTIONS = {
    "alloc": "alloc", "free_requested": "free", "free_completed": None,
    "segment_alloc": "segment+", "segment_free": "segment-", "segment_map": "segment+",
    "segment_unmap": "segment-", "capture_begin": "capture_begin",
    "capture_end": "capture_end", "snapshot": None, "oom": None,
}
_RMM_ACTIONS = {"allocate": "alloc", "free": "free", "allocate failure": "failure"}


class TraceError(ValueError):
    """A trace that cannot be read; the message says where and why."""


class Trace:
    """A parsed trace: events in file order and what they add up to.

    Attributes:
        path: where it was read from.
        format: "pytorch", "rmm" or "snapshot".
        events: (op, alloc index, size, stream index) per event; op is
            ALLOC, FREE, CAPTURE_BEGIN or CAPTURE_END (markers: index and
            size 0); a FREE names the ALLOC (by its index) it frees.
        streams: the recorded stream value of each stream index (0: the
            default stream).
        Counters: alloc_count, free_count, unmatched_free_count,
            live_at_end_count, alloc_failure_row_count, malformed_count,
            capture_count, min_size, max_size, peak_live_bytes,
            reference_peak_reserved_bytes (None without segment rows).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.format: Optional[str] = None
        self.events: List[Tuple[int, int, int, int]] = []
        self.streams: List[int] = []
        self.alloc_count = self.free_count = self.unmatched_free_count = 0
        self.live_at_end_count = self.alloc_failure_row_count = self.malformed_count = 0
        self.capture_count = 0
        self.min_size = self.max_size = self.peak_live_bytes = 0
        self.reference_peak_reserved_bytes: Optional[int] = None
        self.first_malformed = ""

    @property
    def request_count(self) -> int:
        """Calls a replay makes: allocations and paired frees."""
        return self.alloc_count + self.free_count


class _Builder:
    def __init__(self, trace: Trace) -> None:
        self.t = trace
        self.live: Dict[int, Tuple[int, int, int]] = {}  # addr -> (alloc index, size, line)
        self.stream_index: Dict[int, int] = {}
        self.capturing: Dict[int, int] = {}  # stream value -> line of its capture_begin
        self.live_bytes = 0
        self.reserved = 0

    def stream(self, value: int) -> int:
        index = self.stream_index.get(value)
        if index is None:
            index = self.stream_index[value] = len(self.t.streams)
            self.t.streams.append(value)
        return index

    def apply(self, kind: str, addr: int, size: int, stream: int, line: int, where: str) -> None:
        t = self.t
        if kind == "alloc":
            if size == 0:
                raise TraceError("allocation of 0 bytes")
            if addr in self.live:
                shown = "0x%x" % addr if t.format == "rmm" else str(addr)
                raise TraceError("allocation at address %s which is already live (allocated at "
                                 "%s %d)" % (shown, where, self.live[addr][2]))
            self.live[addr] = (t.alloc_count, size, line)
            t.events.append((ALLOC, t.alloc_count, size, self.stream(stream)))
            t.min_size = size if t.alloc_count == 0 else min(t.min_size, size)
            t.max_size = max(t.max_size, size)
            t.alloc_count += 1
            self.live_bytes += size
            t.peak_live_bytes = max(t.peak_live_bytes, self.live_bytes)
        elif kind == "free":
            found = self.live.get(addr)
            if found is None:
                t.unmatched_free_count += 1
                return
            index, allocated, at = found
            if allocated != size:
                raise TraceError("free of %d bytes does not match the allocation of %d bytes at "
                                 "%s %d" % (size, allocated, where, at))
            t.events.append((FREE, index, size, self.stream(stream)))
            del self.live[addr]
            t.free_count += 1
            self.live_bytes -= size
        elif kind in ("capture_begin", "capture_end"):
            begun = self.capturing.get(stream)
            if kind == "capture_begin" and begun is not None:
                raise TraceError("capture_begin on stream %d, which is already capturing (since "
                                 "%s %d)" % (stream, where, begun))
            if kind == "capture_end" and begun is None:
                raise TraceError("capture_end on stream %d, which is not capturing" % stream)
            op = CAPTURE_BEGIN if kind == "capture_begin" else CAPTURE_END
            t.events.append((op, 0, 0, self.stream(stream)))
            if op == CAPTURE_BEGIN:
                self.capturing[stream] = line
                t.capture_count += 1
            else:
                del self.capturing[stream]
        elif kind == "segment+":
            self.reserved += size
            t.reference_peak_reserved_bytes = max(t.reference_peak_reserved_bytes or 0,
                                                  self.reserved)
        elif kind == "segment-":
            self.reserved = max(0, self.reserved - size)
            t.reference_peak_reserved_bytes = t.reference_peak_reserved_bytes or 0
        elif kind == "failure":
            t.alloc_failure_row_count += 1


def _number(text: str, name: str, base: int) -> int:
    digits = text[2:] if base == 16 and text[:2] in ("0x", "0X") and len(text) > 2 else text
    valid = "0123456789abcdefABCDEF" if base == 16 else "0123456789"
    if not digits or any(c not in valid for c in digits):
        raise TraceError("field '%s' is not a %s number: \"%s\"" % (
            name, "hexadecimal" if base == 16 else "decimal", text[:40]))
    value = int(digits, base)
    if value >= 1 << 64:
        raise TraceError("field '%s' is out of range for 64 bits: \"%s\"" % (name, text[:40]))
    return value


def _csv_row(fields: List[str], fmt: str) -> Tuple[Optional[str], int, int, int]:
    """(kind, addr, size, stream) of one CSV row."""
    if fmt == "pytorch":
        if len(fields) != 5:
            raise TraceError("expected 5 columns, found %d" % len(fields))
        if fields[0] not in _PYTORCH_ACTIONS:
            raise TraceError("unknown action \"%s\"" % fields[0][:40])
        values = [_number(f, n, 10) for f, n in zip(fields[1:], ("addr", "size", "stream",
                                                                 "time_us"))]
        return _PYTORCH_ACTIONS[fields[0]], values[0], values[1], values[2]
    if len(fields) != 6:
        raise TraceError("expected 6 columns, found %d" % len(fields))
    if fields[2] not in _RMM_ACTIONS:
        raise TraceError("unknown action \"%s\"" % fields[2][:40])
    _number(fields[0], "Thread", 10)
    if not fields[1] or any(c not in "0123456789:." for c in fields[1]):
        raise TraceError("field 'Time' is not a time of day: \"%s\"" % fields[1][:40])
    return (_RMM_ACTIONS[fields[2]], _number(fields[3], "Pointer", 16),
            _number(fields[4], "Size", 10), _number(fields[5], "Stream", 16))


class _DataOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise TraceError("the pickle needs the Python class %s.%s: a snapshot is plain data, "
                         "refused" % (module, name))


def _snapshot_entries(data: Any, path: str, device: Optional[int]) -> Tuple[int, Any]:
    if not isinstance(data, dict):
        raise TraceError("%s: not a PyTorch memory snapshot: the pickle holds a %s, expected a "
                         "dict with 'device_traces'" % (path, type(data).__name__))
    if "device_traces" not in data:
        raise TraceError("%s: not a PyTorch memory snapshot: no 'device_traces' key (keys: %s)"
                         % (path, ", ".join(repr(k) for k in data) or "none"))
    traces = data["device_traces"]
    if not isinstance(traces, (list, tuple)):
        raise TraceError("%s: 'device_traces' is a %s, expected a list"
                         % (path, type(traces).__name__))
    if device is not None:
        if not 0 <= device < len(traces):
            raise TraceError("%s: no device %d in the snapshot: it has traces for %d devices; "
                             "choose one with --snapshot-device" % (path, device, len(traces)))
        return device, traces[device]
    used = [(d, t) for d, t in enumerate(traces) if t]
    if not used:
        raise TraceError("%s: no allocations in the snapshot (device_traces is empty: was "
                         "torch.cuda.memory._record_memory_history() on?)" % path)
    if len(used) > 1:
        raise TraceError("%s: the snapshot has traces for %d devices (%s); choose one with "
                         "--snapshot-device" % (path, len(used), ", ".join(
                             "%d: %d entries" % (d, len(t)) for d, t in used)))
    return used[0]


def _entry_row(entry: Any) -> Tuple[Optional[str], int, int, int]:
    if not isinstance(entry, dict):
        raise TraceError("a %s, expected a dict" % type(entry).__name__)
    if "action" not in entry:
        raise TraceError("no 'action'")
    action = entry["action"]
    if not isinstance(action, str) or action not in _PYTORCH_ACTIONS:
        raise TraceError("unknown action \"%s\"" % str(action)[:40])
    values = []
    for name in ("addr", "size", "stream"):
        if name == "addr" and action == "oom":
            values.append(0)  # PyTorch writes 'device_free' there
            continue
        if name not in entry:
            raise TraceError("no '%s'" % name)
        v = entry[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TraceError("'%s' is %r, expected an integer >= 0" % (name, v))
        values.append(v)
    return (_PYTORCH_ACTIONS[action],) + tuple(values)


def read(path: str, skip_malformed: bool = False, snapshot_device: Optional[int] = None) -> Trace:
    """Read and parse the trace at `path` (gzip or plain).

    Args:
        path: the trace file.
        skip_malformed: count and skip malformed lines instead of failing.
        snapshot_device: a snapshot's device_traces index (None: the only
            device with entries).

    Returns:
        The Trace.

    Raises:
        TraceError: the file is not a trace, or (strict) a line is malformed;
            the message names the file and line.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise TraceError("%s: corrupt gzip data: %s" % (path, e)) from None
    trace = Trace(path)
    builder = _Builder(trace)
    if raw[:1] == b"\x80":
        trace.format = "snapshot"
        try:
            data = _DataOnly(io.BytesIO(raw)).load()
        except TraceError as e:
            raise TraceError("%s: pickle: %s" % (path, e)) from None
        except Exception as e:  # noqa: BLE001 (any unpickling failure: a damaged file)
            raise TraceError("%s: pickle: %s" % (path, e)) from None
        device, entries = _snapshot_entries(data, path, snapshot_device)
        rows: Iterator[Tuple[int, Callable[[], Tuple[Optional[str], int, int, int]]]] = (
            (n, lambda e=e: _entry_row(e)) for n, e in enumerate(entries, 1))
        where, prefix = "entry", "%s: device_traces[%d] entry " % (path, device)
    else:
        text = raw.decode("utf-8", errors="replace")
        lines = text.splitlines()
        if not lines:
            raise TraceError("%s: empty file (no header line)" % path)
        header = lines[0].lstrip("\ufeff")
        if header == PYTORCH_HEADER:
            trace.format = "pytorch"
        elif header == RMM_HEADER:
            trace.format = "rmm"
        else:
            raise TraceError("%s:1: unknown header \"%s\"; expected \"%s\" (PyTorch snapshot "
                             "CSV) or \"%s\" (RMM log)" % (path, header[:40], PYTORCH_HEADER,
                                                           RMM_HEADER))
        # Split at every comma, as tools/replay does (trace writers never quote).
        rows = ((n, lambda line=line: _csv_row(line.split(","), trace.format))
                for n, line in enumerate(lines[1:], 2) if line.strip())
        where, prefix = "line", "%s:" % path
    for number, parse in rows:
        try:
            kind, addr, size, stream = parse()
            if kind is not None:
                builder.apply(kind, addr, size, stream, number, where)
        except TraceError as e:
            if not skip_malformed:
                raise TraceError("%s%d: %s" % (prefix, number, e)) from None
            if trace.malformed_count == 0:
                trace.first_malformed = "%s%d: %s" % (prefix, number, e)
            trace.malformed_count += 1
    trace.live_at_end_count = len(builder.live)
    if trace.alloc_count == 0:
        raise TraceError("%s: no allocations in the trace" % path)
    return trace
