"""Memory tiers and reservations (gmr/tiers/tier_manager.h) from Python.

A tier manager owns memory spaces on the GPU, HOST and DISK tiers and hands
out reservations in them by strategy (cuCascade's memory system):

    import gmr.tiers as tiers
    m = tiers.Manager([
        tiers.space_config("GPU", 0, capacity_bytes=8 << 30),
        tiers.space_config("HOST", 0, capacity_bytes=32 << 30, numa_node=-1),
    ])
    with m.reserve(["GPU", "HOST"], 1 << 30, timeout=5.0) as r:   # GPU first, then HOST
        r.bind(stream)                        # enforce it on `stream`
        p = r.space.allocate(1 << 20, stream)
        ...
        r.space.deallocate(p, 1 << 20, stream)
    m.close()

Where a reservation may go (`where`): a tier name ("GPU": any GPU space, the
most available first), a (tier, index) pair (that space only), a list of tier
names (in that order), or downgrade((tier, index), target=None) (a space to
move data from that source to). Sizes are bytes, timeouts seconds (None: no
limit). Errors raise gmr.GmrError with gmr's message and the status name in
`.status` (GMR_ERR_TIMEOUT, GMR_ERR_SHUTDOWN, GMR_ERR_NO_RESERVATION, ...);
GMR_ERR_LIMIT_EXCEEDED and GMR_ERR_OUT_OF_MEMORY raise gmr.OutOfMemoryError.
A failed call changes nothing. Thread-safe: yes, as the C API (the manager's
mutex); close() only when no other thread uses the manager.

Where gmr differs from cuCascade (docs/tiers.md, "gmr and cuCascade"): a
reservation's default limit policy is "fail", not "ignore" (space_config);
a reservation cannot outlive its manager (close() raises GMR_ERR_BUSY while
one lives); capacities that cannot be real, or a GPU capacity above the
device's memory, are refused when the manager is made. As in cuCascade,
reserve_up_to() with nothing available gives a reservation of 0 bytes that
can grow, and a bound stream's request past both its reservation and the
space's capacity goes to the reservation's policy first ("increase" grows
the reservation as far as the space allows; the request is refused).
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from gmr import _capi, _lib

__all__ = ["TIERS", "space_config", "downgrade", "Manager", "Space", "Reservation"]

TIERS = ("GPU", "HOST", "DISK")
_TIER_COUNT = _capi.TIER_COUNT
_TEXT_BYTES = _capi.SPACE_TEXT_BYTES
_WAIT_FOREVER = (1 << 64) - 1
_STRATEGY_SPACE, _STRATEGY_TIER, _STRATEGY_TIERS, _STRATEGY_DOWNGRADE = 0, 1, 2, 3

# A tier by name ("GPU", "host") or number (0..2); a space by (tier, index).
Tier = Union[str, int]
SpaceKey = Tuple[Tier, int]
# Where a reservation may go (see the module docstring).
Where = Union[Tier, SpaceKey, List[Tier], _capi.ReservationStrategy]


def _tier(name: Tier) -> int:
    if isinstance(name, int) and 0 <= name < _TIER_COUNT:
        return name
    try:
        return TIERS.index(str(name).upper())
    except ValueError:
        raise ValueError("gmr.tiers: unknown tier %r (one of %s)" % (name, ", ".join(TIERS))) \
            from None


def _fail(status: int, failure: Optional[_capi.FailureStruct], what: str) -> None:
    text = failure.message.decode(errors="replace") if failure is not None else ""
    _lib.raise_for(status, "gmr.tiers: %s: %s%s" % (what, _lib.status_name(status),
                                                     ": " + text if text else ""))


def _timeout_ns(timeout: Optional[float]) -> int:
    if timeout is None:
        return _WAIT_FOREVER
    if timeout < 0:
        raise ValueError("gmr.tiers: a timeout of %r s (None: no limit; 0: do not wait)" % timeout)
    return int(timeout * 1e9)


def _limit_policy(name: str) -> _capi.LimitPolicy:
    p = _capi.LimitPolicy()
    st = _lib.lib().gmr_limit_policy_from_name(name.encode(), ctypes.byref(p))
    if st != 0:
        raise ValueError("gmr.tiers: unknown limit policy %r (fail, ignore, increase, or a "
                         "registered name)" % name)
    return p


_CONFIG_FIELDS = {
    "capacity_bytes", "reservation_limit_fraction", "downgrade_trigger_fraction",
    "downgrade_stop_fraction", "require_reservation", "max_stream_slots", "stream_count",
    "stream_device", "stack_spec", "downgrade_numa_node", "numa_node", "block_bytes",
    "blocks_per_chunk", "initial_chunk_count", "mount_path", "on_limit", "on_oom",
}


def space_config(tier: Tier, index: int = 0, **fields: Any) -> _capi.MemorySpaceConfig:
    """A memory space's config: gmr_memory_space_config_default(tier, index) with `fields` set.

    on_limit, the reservations' default limit policy, is "fail" by default,
    on purpose (cuCascade's default is "ignore"): a request past its
    reservation is refused on the stream that made it, instead of taking
    bytes the space promised to other reservations. Pass on_limit="ignore"
    for cuCascade's behaviour. The manager checks the values when it is made.

    Args:
        tier: "GPU", "HOST" or "DISK" (or 0..2).
        index: the space's index in its tier (for GPU: the device).
        **fields: the C names: capacity_bytes (0 detects it; at most
            INT64_MAX / 2, and for GPU at most the device's memory),
            reservation_limit_fraction, downgrade_trigger_fraction,
            downgrade_stop_fraction, require_reservation, max_stream_slots,
            stream_count, stream_device, stack_spec (GPU), downgrade_numa_node
            (GPU), numa_node, block_bytes, blocks_per_chunk,
            initial_chunk_count (HOST), mount_path (DISK); on_limit and on_oom
            by policy name.

    Returns:
        The config (a ctypes gmr_memory_space_config) for Manager().

    Raises:
        TypeError: an unknown field.
        ValueError: an unknown tier or policy, or a stack_spec or mount_path
            too long for the C struct.
        OSError: libgmr.so cannot be loaded.
    """
    unknown = set(fields) - _CONFIG_FIELDS
    if unknown:
        raise TypeError("gmr.tiers.space_config: unknown field(s) %s (known: %s)"
                        % (", ".join(sorted(unknown)), ", ".join(sorted(_CONFIG_FIELDS))))
    c: _capi.MemorySpaceConfig = _lib.optional_lib("tiers").gmr_memory_space_config_default(_tier(tier), index)
    for name, value in fields.items():
        if name in ("stack_spec", "mount_path"):
            data = value.encode()
            if len(data) >= _TEXT_BYTES:
                raise ValueError("gmr.tiers.space_config: %s is %d bytes (at most %d)"
                                 % (name, len(data), _TEXT_BYTES - 1))
            setattr(c, name, data)
        elif name == "on_limit":
            c.on_limit = _limit_policy(value)
        elif name == "on_oom":
            p = _capi.OomPolicy()
            if _lib.lib().gmr_oom_policy_from_name(value.encode(), ctypes.byref(p)) != 0:
                raise ValueError("gmr.tiers.space_config: unknown OOM policy %r (fail, retry, "
                                 "trim_retry, wait, or a registered name)" % value)
            c.on_oom = p
        else:
            setattr(c, name, value)
    return c


def downgrade(source: SpaceKey, target: Optional[Tier] = None) -> _capi.ReservationStrategy:
    """Where to move data from a space to: a strategy for Manager.reserve().

    Args:
        source: the space data moves from, a (tier, index) pair.
        target: the tier to move it to (None: the next slower tier).

    Returns:
        The strategy.

    Raises:
        ValueError: an unknown tier.
    """
    s = _capi.ReservationStrategy()
    s.kind = _STRATEGY_DOWNGRADE
    s.space = _capi.MemorySpaceId(_tier(source[0]), source[1])
    if target is not None:
        s.tiers[0] = _tier(target)
        s.tier_count = 1
    return s


def _strategy(where: Where) -> _capi.ReservationStrategy:
    if isinstance(where, _capi.ReservationStrategy):
        return where
    s = _capi.ReservationStrategy()
    if isinstance(where, tuple):
        s.kind = _STRATEGY_SPACE
        s.space = _capi.MemorySpaceId(_tier(where[0]), where[1])
    elif isinstance(where, list):
        if not 1 <= len(where) <= _TIER_COUNT:
            raise ValueError("gmr.tiers: a list of 1..%d tiers, not %r" % (_TIER_COUNT, where))
        s.kind = _STRATEGY_TIERS
        for k, t in enumerate(where):
            s.tiers[k] = _tier(t)
        s.tier_count = len(where)
    else:
        s.kind = _STRATEGY_TIER
        s.tiers[0] = _tier(where)
        s.tier_count = 1
    return s


def _as_dict(struct: ctypes.Structure) -> Dict[str, Any]:
    out = {}
    for name, *_ in struct._fields_:
        if name in ("size", "version"):
            continue
        v = getattr(struct, name)
        if isinstance(v, _capi.MemorySpaceId):
            v = (TIERS[v.tier] if 0 <= v.tier < _TIER_COUNT else v.tier, v.index)
        elif isinstance(v, bytes):
            v = v.decode(errors="replace")
        out[name] = v
    return out


class Manager:
    """A tier manager over memory spaces (gmr_tier_manager).

    `spaces` lists its Space objects. Usable as a context manager (closes on exit).

    Args:
        configs: the spaces' configs (space_config() results).

    Raises:
        GmrError: GMR_ERR_INVALID_ARGUMENT with the config and the reason
            (duplicate ids, bad fractions, a missing device, a bad spec, a
            capacity above INT64_MAX / 2 or, for GPU, above the device's
            memory...).
        OSError: libgmr.so cannot be loaded.
    """

    def __init__(self, configs: Iterable[_capi.MemorySpaceConfig]) -> None:
        configs = list(configs)
        array = (_capi.MemorySpaceConfig * len(configs))(*configs)
        handle = ctypes.c_void_p()
        failure = _capi.FailureStruct()
        lib = _lib.optional_lib("tiers")
        st = lib.gmr_tier_manager_create(array, len(configs), ctypes.byref(handle),
                                         ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "cannot create a tier manager of %d space(s)" % len(configs))
        self._handle: Optional[int] = handle.value
        n = lib.gmr_tier_manager_get_space_count(self._handle)
        self.spaces: List[Space] = [Space(self, lib.gmr_tier_manager_get_space_at(self._handle, k))
                                    for k in range(n)]

    @property
    def handle(self) -> int:
        """The gmr_tier_manager * as an int; ValueError once closed."""
        if self._handle is None:
            raise ValueError("gmr.tiers: the manager is closed")
        return self._handle

    def space(self, tier: Tier, index: int = 0) -> Space:
        """The space (tier, index) of this manager.

        Args:
            tier: "GPU", "HOST" or "DISK" (or 0..2).
            index: its index in the tier.

        Returns:
            The space.

        Raises:
            KeyError: the manager has no such space.
            ValueError: an unknown tier.
        """
        key = (TIERS[_tier(tier)], index)
        for s in self.spaces:
            if s.id == key:
                return s
        raise KeyError("gmr.tiers: no space %s in this manager (it has %s)"
                       % (key, ", ".join(str(s.id) for s in self.spaces)))

    def _reserve(self, mode: str, where: Where, nbytes: int,
                 timeout: Optional[float]) -> Reservation:
        strategy = _strategy(where)
        rid = ctypes.c_uint64(0)
        got = ctypes.c_size_t(0)
        failure = _capi.FailureStruct()
        lib = _lib.optional_lib("tiers")
        if mode == "block":
            st = lib.gmr_tier_manager_reserve(self.handle, ctypes.byref(strategy), nbytes,
                                              _timeout_ns(timeout), ctypes.byref(rid),
                                              ctypes.byref(failure))
        elif mode == "try":
            st = lib.gmr_tier_manager_try_reserve(self.handle, ctypes.byref(strategy), nbytes,
                                                  ctypes.byref(rid), ctypes.byref(failure))
        else:
            st = lib.gmr_tier_manager_reserve_up_to(self.handle, ctypes.byref(strategy), nbytes,
                                                    ctypes.byref(rid), ctypes.byref(got),
                                                    ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "reserving %d bytes in %r" % (nbytes, where))
        return Reservation(self, rid.value)

    def reserve(self, where: Where, nbytes: int, timeout: Optional[float] = None) -> Reservation:
        """Reserve `nbytes` where `where` says, waiting for room.

        Args:
            where: a tier name, a (tier, index) pair, a list of tier names
                (in that order), or a downgrade() strategy.
            nbytes: bytes to reserve.
            timeout: seconds to wait for room (None: no limit; 0: do not wait).

        Returns:
            The reservation.

        Raises:
            GmrError: GMR_ERR_TIMEOUT, GMR_ERR_SHUTDOWN, or bad input.
            OutOfMemoryError: above every candidate's limit.
            ValueError: an unknown tier, or a negative timeout.
        """
        return self._reserve("block", where, nbytes, timeout)

    def try_reserve(self, where: Where, nbytes: int) -> Reservation:
        """Reserve now, without waiting.

        Args:
            where: as in reserve().
            nbytes: bytes to reserve.

        Returns:
            The reservation.

        Raises:
            OutOfMemoryError: no room now (the message says what is available).
            GmrError: GMR_ERR_SHUTDOWN, or bad input.
            ValueError: an unknown tier.
        """
        return self._reserve("try", where, nbytes, None)

    def reserve_up_to(self, where: Where, nbytes: int) -> Reservation:
        """Reserve as much as is available, up to `nbytes`.

        When nothing is available the reservation has 0 bytes (cuCascade's
        behaviour): grow() it later, or bind() it with on_limit="increase".

        Args:
            where: as in reserve().
            nbytes: the most to reserve.

        Returns:
            The reservation (Reservation.nbytes says how much it got).

        Raises:
            OutOfMemoryError: every candidate is a DISK space with nothing
                available (DISK reservations cannot grow).
            GmrError: GMR_ERR_SHUTDOWN, or bad input.
            ValueError: an unknown tier.
        """
        return self._reserve("up_to", where, nbytes, None)

    def stats(self) -> Dict[str, Any]:
        """The manager's counters (gmr_tier_manager_stats).

        Returns:
            A dict: reserve_count, wait_count, wait_ns, reserve_latency_ns
            (waits included), immediate_reserve_count and _latency_ns (no
            wait), timeout_count...

        Raises:
            ValueError: the manager is closed.
            GmrError: the C call refused.
        """
        s = _capi.TierManagerStats(ctypes.sizeof(_capi.TierManagerStats),
                                   _capi.TIER_MANAGER_STATS_VERSION)
        st = _lib.optional_lib("tiers").gmr_tier_manager_get_stats(self.handle, ctypes.byref(s))
        if st != 0:
            _fail(st, None, "manager stats")
        return _as_dict(s)

    def shutdown(self) -> None:
        """Wake every waiter with GMR_ERR_SHUTDOWN and refuse new reservations.

        Raises:
            ValueError: the manager is closed.
        """
        _lib.optional_lib("tiers").gmr_tier_manager_shutdown(self.handle)

    def close(self) -> None:
        """Destroy the manager.

        A reservation cannot outlive its manager (cuCascade's can): release
        every one first. Closing twice is a no-op.

        Raises:
            GmrError: GMR_ERR_BUSY, reservations, lent streams, waiters or live
                memory remain (nothing changed; the manager and its
                reservations still work).
        """
        if self._handle is None:
            return
        st = _lib.optional_lib("tiers").gmr_tier_manager_destroy(self._handle)
        if st != 0:
            _fail(st, None, "closing the manager (release every reservation, return every "
                  "stream and free every allocation first)")
        self._handle = None

    def __enter__(self) -> Manager:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Space:
    """One memory space of a manager (Manager.spaces, Manager.space()).

    `id` is its (tier name, index).

    Args:
        manager: the manager that owns it.
        handle: the gmr_memory_space * as an int.
    """

    def __init__(self, manager: Manager, handle: int) -> None:
        self._manager = manager
        self._handle = handle
        sid = _lib.optional_lib("tiers").gmr_memory_space_get_id(handle)
        self.id: Tuple[str, int] = (TIERS[sid.tier], sid.index)

    def __repr__(self) -> str:
        return "<gmr.tiers.Space %s %d>" % self.id

    @property
    def handle(self) -> int:
        """The gmr_memory_space * as an int."""
        return self._handle

    @property
    def resource(self) -> int:
        """The space's gmr_resource * as an int: the handle itself, since every
        gmr handle starts with its gmr_resource (gmr_resource_downcast in C)."""
        return self._handle or 0

    @property
    def capacity_bytes(self) -> int:
        """The space's capacity."""
        return int(_lib.optional_lib("tiers").gmr_memory_space_get_capacity_bytes(self._handle))

    @property
    def available_bytes(self) -> int:
        """What a new reservation may take now."""
        return int(_lib.optional_lib("tiers").gmr_memory_space_get_available_bytes(self._handle))

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        """Allocate through the space on a stream.

        Charged to the reservation bound to `stream`, or untracked. A request
        past the reservation goes to its policy before the capacity is
        checked: "increase" grows the reservation as far as the space allows
        even when the request is then refused (the growth stays; the message
        says how much).

        Args:
            nbytes: bytes to allocate.
            stream: the cudaStream_t, as an int (0: the default stream).

        Returns:
            The address (0 for 0 bytes).

        Raises:
            GmrError: GMR_ERR_NO_RESERVATION, GMR_ERR_UNSUPPORTED (DISK).
            OutOfMemoryError: past the reservation by its policy, or past the capacity.
        """
        out = ctypes.c_void_p()
        failure = _capi.FailureStruct()
        st = _lib.lib().gmr_resource_allocate_ex(self.resource, nbytes, 0, stream or None,
                                        ctypes.byref(out), ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "allocating %d bytes in space %s" % (nbytes, self.id))
        return out.value or 0

    def deallocate(self, ptr: int, nbytes: int, stream: int = 0) -> None:
        """Free memory from allocate().

        Args:
            ptr: its address.
            nbytes: the bytes it was allocated with.
            stream: the stream it was last used on (0: the default stream).

        Raises:
            GmrError: the space refused the free.
        """
        st = _lib.lib().gmr_resource_deallocate(self.resource, ptr, nbytes, 0, stream or None)
        if st != 0:
            _fail(st, None, "freeing %#x (%d bytes) in space %s" % (ptr, nbytes, self.id))

    def poll_downgrade(self) -> Tuple[bool, int]:
        """The downgrade state, with hysteresis: starts above the trigger, stops at the stop level.

        Returns:
            (downgrading, bytes_to_downgrade).

        Raises:
            GmrError: the C call refused.
        """
        d = ctypes.c_bool(False)
        amount = ctypes.c_size_t(0)
        st = _lib.optional_lib("tiers").gmr_memory_space_poll_downgrade(self._handle, ctypes.byref(d),
                                                        ctypes.byref(amount))
        if st != 0:
            _fail(st, None, "polling the downgrade state")
        return bool(d.value), amount.value

    def acquire_stream(self, grow: bool = False, timeout: Optional[float] = None) -> int:
        """Borrow a stream of the space's pool; give it back with release_stream().

        Args:
            grow: create one more when all are lent.
            timeout: seconds to wait for one (None: no limit).

        Returns:
            The cudaStream_t, as an int.

        Raises:
            ValueError: the space has no stream pool (stream_count 0), or a
                negative timeout.
            GmrError: GMR_ERR_TIMEOUT, GMR_ERR_SHUTDOWN.
        """
        lib = _lib.optional_lib("tiers")
        pool = lib.gmr_memory_space_get_stream_pool(self._handle)
        if not pool:
            raise ValueError("gmr.tiers: space %s has no stream pool (stream_count 0)"
                             % (self.id,))
        s = ctypes.c_void_p()
        st = lib.gmr_stream_pool_acquire(pool, 1 if grow else 0, _timeout_ns(timeout),
                                         ctypes.byref(s))
        if st != 0:
            _fail(st, None, "acquiring a stream of space %s" % (self.id,))
        return s.value or 0

    def release_stream(self, stream: int) -> None:
        """Give back a stream from acquire_stream().

        Args:
            stream: the stream, as acquire_stream() returned it.

        Raises:
            GmrError: GMR_ERR_INVALID_ARGUMENT (not a stream of this pool),
                GMR_ERR_DOUBLE_FREE (not lent now).
        """
        lib = _lib.optional_lib("tiers")
        st = lib.gmr_stream_pool_release(lib.gmr_memory_space_get_stream_pool(self._handle),
                                         stream)
        if st != 0:
            _fail(st, None, "returning stream %#x to space %s" % (stream or 0, self.id))

    def stats(self) -> Dict[str, Any]:
        """The space's accounting (gmr_memory_space_stats).

        Returns:
            A dict with the C struct's fields (id as (tier name, index)).

        Raises:
            GmrError: the C call refused.
        """
        s = _capi.MemorySpaceStats(ctypes.sizeof(_capi.MemorySpaceStats),
                                   _capi.MEMORY_SPACE_STATS_VERSION)
        st = _lib.optional_lib("tiers").gmr_memory_space_get_stats(self._handle, ctypes.byref(s))
        if st != 0:
            _fail(st, None, "space stats")
        return _as_dict(s)


class Reservation:
    """A live reservation (Manager.reserve...).

    As a context manager it is released on exit (unless released already).
    It belongs to its manager's books and cannot outlive it: release it
    before Manager.close(). `id` is its id, `space` its Space, `released`
    whether release() was called.

    Args:
        manager: the manager that made it.
        rid: its id.

    Raises:
        GmrError: the manager knows no reservation `rid`.
    """

    def __init__(self, manager: Manager, rid: int) -> None:
        self._manager = manager
        self.id = rid
        self.released = False
        info = self.info()
        self.space: Space = manager.space(*info["space"])

    def __repr__(self) -> str:
        return "<gmr.tiers.Reservation %d in %s>" % (self.id, self.space.id)

    @property
    def nbytes(self) -> int:
        """Its size now."""
        return int(self.info()["bytes"])

    def info(self) -> Dict[str, Any]:
        """The reservation's state (gmr_reservation_info).

        Returns:
            A dict: bytes, allocated_bytes, bound, stream, raise/overage/refusal
            counts, space, path (DISK).

        Raises:
            GmrError: released already, or the manager is closed.
        """
        s = _capi.ReservationInfo(ctypes.sizeof(_capi.ReservationInfo),
                                  _capi.RESERVATION_INFO_VERSION)
        st = _lib.optional_lib("tiers").gmr_reservation_get_info(self._manager.handle, self.id, ctypes.byref(s))
        if st != 0:
            _fail(st, None, "reservation %d (released?)" % self.id)
        return _as_dict(s)

    def bind(self, stream: int, on_limit: Optional[str] = None) -> None:
        """Enforce the reservation on a stream.

        Args:
            stream: the cudaStream_t, as an int.
            on_limit: the limit policy's name (None: the space's).

        Raises:
            ValueError: an unknown policy.
            GmrError: GMR_ERR_BUSY (bound already), GMR_ERR_UNSUPPORTED (a DISK
                reservation), GMR_ERR_INVALID_ARGUMENT (released).
        """
        failure = _capi.FailureStruct()
        policy = None if on_limit is None else ctypes.byref(_limit_policy(on_limit))
        st = _lib.optional_lib("tiers").gmr_reservation_bind_stream(self._manager.handle, self.id,
                                                    stream or None, policy,
                                                    ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "binding reservation %d" % self.id)

    def unbind(self) -> None:
        """Stop enforcing the reservation on its stream.

        Raises:
            GmrError: not bound, or the reservation is gone.
        """
        st = _lib.optional_lib("tiers").gmr_reservation_unbind_stream(self._manager.handle, self.id)
        if st != 0:
            _fail(st, None, "unbinding reservation %d" % self.id)

    def grow(self, nbytes: int) -> None:
        """Grow the reservation.

        Args:
            nbytes: bytes to add.

        Raises:
            OutOfMemoryError: GMR_ERR_LIMIT_EXCEEDED, they do not fit now (the
                message says what is available).
            GmrError: GMR_ERR_UNSUPPORTED (DISK), GMR_ERR_SHUTDOWN,
                GMR_ERR_INVALID_ARGUMENT (released, or 0 bytes).
        """
        failure = _capi.FailureStruct()
        st = _lib.optional_lib("tiers").gmr_reservation_grow(self._manager.handle, self.id, nbytes,
                                             ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "growing reservation %d by %d bytes" % (self.id, nbytes))

    def shrink(self, new_nbytes: int) -> None:
        """Shrink the reservation.

        Args:
            new_nbytes: its new size.

        Raises:
            GmrError: GMR_ERR_INVALID_ARGUMENT (0, above its size, or
                released), GMR_ERR_UNSUPPORTED (DISK), GMR_ERR_BUSY (below the
                bytes allocated on its bound stream).
        """
        failure = _capi.FailureStruct()
        st = _lib.optional_lib("tiers").gmr_reservation_shrink(self._manager.handle, self.id, new_nbytes,
                                               ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "shrinking reservation %d to %d bytes" % (self.id, new_nbytes))

    def release(self) -> None:
        """Give the reservation back (waiters wake).

        Raises:
            GmrError: GMR_ERR_DOUBLE_FREE the second time.
        """
        failure = _capi.FailureStruct()
        st = _lib.optional_lib("tiers").gmr_reservation_release(self._manager.handle, self.id,
                                                ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "releasing reservation %d" % self.id)
        self.released = True

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.released:
            self.release()
