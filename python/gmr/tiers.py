"""Memory tiers and reservations (gmr/tier_manager.h) from Python.

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

import ctypes
import threading

from gmr import _lib

__all__ = ["TIERS", "space_config", "downgrade", "Manager", "Space", "Reservation"]

TIERS = ("GPU", "HOST", "DISK")
_TIER_COUNT = 3
_TEXT_BYTES = 256
_PATH_BYTES = 320
_WAIT_FOREVER = (1 << 64) - 1
_TIER_MANAGER_STATS_VERSION = 2
_MEMORY_SPACE_STATS_VERSION = 1
_RESERVATION_INFO_VERSION = 1
_STRATEGY_SPACE, _STRATEGY_TIER, _STRATEGY_TIERS, _STRATEGY_DOWNGRADE = 0, 1, 2, 3


class _SpaceId(ctypes.Structure):
    _fields_ = [("tier", ctypes.c_int), ("index", ctypes.c_int)]


class _LimitPolicy(ctypes.Structure):
    """gmr_limit_policy (gmr/policy.h); built by gmr_limit_policy_from_name."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("name", ctypes.c_void_p),
        ("decide", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
        ("padding_factor", ctypes.c_double),
        ("cap_bytes", ctypes.c_size_t),
        ("release", ctypes.c_void_p),
    ]


class _OomPolicy(ctypes.Structure):
    """gmr_oom_policy (gmr/policy.h); built by gmr_oom_policy_from_name."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("name", ctypes.c_void_p),
        ("decide", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
        ("max_attempts", ctypes.c_uint32),
        ("wait_timeout_ns", ctypes.c_uint64),
        ("callback", ctypes.c_void_p),
        ("callback_ctx", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
    ]


class _SpaceConfig(ctypes.Structure):
    """gmr_memory_space_config (gmr/memory_space.h)."""

    _fields_ = [
        ("id", _SpaceId),
        ("capacity_bytes", ctypes.c_size_t),
        ("reservation_limit_fraction", ctypes.c_double),
        ("downgrade_trigger_fraction", ctypes.c_double),
        ("downgrade_stop_fraction", ctypes.c_double),
        ("require_reservation", ctypes.c_bool),
        ("max_stream_slots", ctypes.c_size_t),
        ("on_limit", _LimitPolicy),
        ("on_oom", _OomPolicy),
        ("stream_count", ctypes.c_size_t),
        ("stream_device", ctypes.c_int),
        ("upstream", ctypes.c_void_p),
        ("stack_spec", ctypes.c_char * _TEXT_BYTES),
        ("downgrade_numa_node", ctypes.c_int),
        ("numa_node", ctypes.c_int),
        ("block_bytes", ctypes.c_size_t),
        ("blocks_per_chunk", ctypes.c_size_t),
        ("initial_chunk_count", ctypes.c_size_t),
        ("mount_path", ctypes.c_char * _TEXT_BYTES),
    ]


class _Strategy(ctypes.Structure):
    """gmr_reservation_strategy (gmr/reservation.h)."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("space", _SpaceId),
        ("tiers", ctypes.c_int * _TIER_COUNT),
        ("tier_count", ctypes.c_size_t),
    ]


class _ManagerStats(ctypes.Structure):
    """gmr_tier_manager_stats (version 2)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("space_count", ctypes.c_size_t),
        ("reservation_count", ctypes.c_size_t),
        ("reserve_count", ctypes.c_uint64),
        ("refused_count", ctypes.c_uint64),
        ("wait_count", ctypes.c_uint64),
        ("wait_ns", ctypes.c_uint64),
        ("max_wait_ns", ctypes.c_uint64),
        ("timeout_count", ctypes.c_uint64),
        ("shutdown_count", ctypes.c_uint64),
        ("release_count", ctypes.c_uint64),
        ("reserve_latency_ns", ctypes.c_uint64),
        ("max_reserve_latency_ns", ctypes.c_uint64),
        ("waiter_count", ctypes.c_size_t),
        ("shut_down", ctypes.c_bool),
        ("immediate_reserve_count", ctypes.c_uint64),
        ("immediate_reserve_latency_ns", ctypes.c_uint64),
        ("max_immediate_reserve_latency_ns", ctypes.c_uint64),
    ]


class _SpaceStats(ctypes.Structure):
    """gmr_memory_space_stats (version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("id", _SpaceId),
        ("capacity_bytes", ctypes.c_size_t),
        ("reservation_limit_bytes", ctypes.c_size_t),
        ("downgrade_trigger_bytes", ctypes.c_size_t),
        ("downgrade_stop_bytes", ctypes.c_size_t),
        ("reserved_bytes", ctypes.c_size_t),
        ("peak_reserved_bytes", ctypes.c_size_t),
        ("reservation_count", ctypes.c_size_t),
        ("bound_stream_count", ctypes.c_size_t),
        ("allocated_bytes", ctypes.c_size_t),
        ("peak_allocated_bytes", ctypes.c_size_t),
        ("reserved_allocated_bytes", ctypes.c_size_t),
        ("untracked_bytes", ctypes.c_size_t),
        ("used_bytes", ctypes.c_size_t),
        ("available_bytes", ctypes.c_size_t),
        ("downgrading", ctypes.c_bool),
        ("downgrade_start_count", ctypes.c_uint64),
        ("no_reservation_count", ctypes.c_uint64),
        ("reservation_raise_count", ctypes.c_uint64),
        ("reservation_overage_count", ctypes.c_uint64),
        ("reservation_refusal_count", ctypes.c_uint64),
    ]


class _ReservationInfo(ctypes.Structure):
    """gmr_reservation_info (version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("id", ctypes.c_uint64),
        ("space", _SpaceId),
        ("bytes", ctypes.c_size_t),
        ("allocated_bytes", ctypes.c_size_t),
        ("bound", ctypes.c_bool),
        ("stream", ctypes.c_void_p),
        ("raise_count", ctypes.c_uint64),
        ("overage_count", ctypes.c_uint64),
        ("refusal_count", ctypes.c_uint64),
        ("path", ctypes.c_char * _PATH_BYTES),
    ]


_declared = False
_declare_lock = threading.Lock()


def _c():
    """libgmr.so with this module's prototypes declared (once)."""
    global _declared
    lib = _lib.optional_lib("tiers")
    with _declare_lock:
        if not _declared:
            c = ctypes
            vp, sz, i, u64 = c.c_void_p, c.c_size_t, c.c_int, c.c_uint64
            fp = c.POINTER(_lib.FailureStruct)
            protos = {
                "gmr_memory_space_config_default": (_SpaceConfig, [i, i]),
                "gmr_limit_policy_from_name": (i, [c.c_char_p, c.POINTER(_LimitPolicy)]),
                "gmr_oom_policy_from_name": (i, [c.c_char_p, c.POINTER(_OomPolicy)]),
                "gmr_tier_manager_create": (i, [c.POINTER(_SpaceConfig), sz, c.POINTER(vp), fp]),
                "gmr_tier_manager_destroy": (i, [vp]),
                "gmr_tier_manager_shutdown": (i, [vp]),
                "gmr_tier_manager_get_space_count": (sz, [vp]),
                "gmr_tier_manager_get_space_at": (vp, [vp, sz]),
                "gmr_tier_manager_reserve": (i, [vp, c.POINTER(_Strategy), sz, u64, c.POINTER(u64),
                                                 fp]),
                "gmr_tier_manager_try_reserve": (i, [vp, c.POINTER(_Strategy), sz, c.POINTER(u64),
                                                     fp]),
                "gmr_tier_manager_reserve_up_to": (i, [vp, c.POINTER(_Strategy), sz,
                                                       c.POINTER(u64), c.POINTER(sz), fp]),
                "gmr_tier_manager_get_stats": (i, [vp, c.POINTER(_ManagerStats)]),
                "gmr_reservation_release": (i, [vp, u64, fp]),
                "gmr_reservation_grow": (i, [vp, u64, sz, fp]),
                "gmr_reservation_shrink": (i, [vp, u64, sz, fp]),
                "gmr_reservation_bind_stream": (i, [vp, u64, vp, c.POINTER(_LimitPolicy), fp]),
                "gmr_reservation_unbind_stream": (i, [vp, u64]),
                "gmr_reservation_get_info": (i, [vp, u64, c.POINTER(_ReservationInfo)]),
                "gmr_memory_space_as_resource": (vp, [vp]),
                "gmr_memory_space_get_id": (_SpaceId, [vp]),
                "gmr_memory_space_get_capacity_bytes": (sz, [vp]),
                "gmr_memory_space_get_available_bytes": (sz, [vp]),
                "gmr_memory_space_get_stream_pool": (vp, [vp]),
                "gmr_memory_space_poll_downgrade": (i, [vp, c.POINTER(c.c_bool), c.POINTER(sz)]),
                "gmr_memory_space_get_stats": (i, [vp, c.POINTER(_SpaceStats)]),
                "gmr_stream_pool_acquire": (i, [vp, i, u64, c.POINTER(vp)]),
                "gmr_stream_pool_release": (i, [vp, vp]),
            }
            for name, (restype, argtypes) in protos.items():
                f = getattr(lib, name)
                f.restype = restype
                f.argtypes = argtypes
            _declared = True
    return lib


def _tier(name):
    if isinstance(name, int) and 0 <= name < _TIER_COUNT:
        return name
    try:
        return TIERS.index(str(name).upper())
    except ValueError:
        raise ValueError("gmr.tiers: unknown tier %r (one of %s)" % (name, ", ".join(TIERS))) \
            from None


def _fail(status, failure, what):
    text = failure.message.decode(errors="replace") if failure is not None else ""
    _lib.raise_for(status, "gmr.tiers: %s: %s%s" % (what, _lib.status_name(status),
                                                     ": " + text if text else ""))


def _timeout_ns(timeout):
    if timeout is None:
        return _WAIT_FOREVER
    if timeout < 0:
        raise ValueError("gmr.tiers: a timeout of %r s (None: no limit; 0: do not wait)" % timeout)
    return int(timeout * 1e9)


def _limit_policy(name):
    p = _LimitPolicy()
    st = _c().gmr_limit_policy_from_name(name.encode(), ctypes.byref(p))
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


def space_config(tier, index=0, **fields):
    """A memory space's config: gmr_memory_space_config_default(tier, index)
    with `fields` set (the C names: capacity_bytes, reservation_limit_fraction,
    downgrade_trigger_fraction, downgrade_stop_fraction, require_reservation,
    max_stream_slots, stream_count, stream_device, stack_spec (GPU),
    downgrade_numa_node (GPU), numa_node, block_bytes, blocks_per_chunk,
    initial_chunk_count (HOST), mount_path (DISK); on_limit and on_oom by
    policy name). The manager checks the values when it is made.

    on_limit, the reservations' default limit policy, is "fail" by default,
    on purpose (cuCascade's default is "ignore"): a request past its
    reservation is refused on the stream that made it, instead of taking
    bytes the space promised to other reservations. Pass on_limit="ignore"
    for cuCascade's behaviour. capacity_bytes: 0 detects it; at most
    INT64_MAX / 2, and for GPU at most the device's memory (the manager
    refuses more with GMR_ERR_INVALID_ARGUMENT)."""
    unknown = set(fields) - _CONFIG_FIELDS
    if unknown:
        raise TypeError("gmr.tiers.space_config: unknown field(s) %s (known: %s)"
                        % (", ".join(sorted(unknown)), ", ".join(sorted(_CONFIG_FIELDS))))
    c = _c().gmr_memory_space_config_default(_tier(tier), index)
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
            p = _OomPolicy()
            if _c().gmr_oom_policy_from_name(value.encode(), ctypes.byref(p)) != 0:
                raise ValueError("gmr.tiers.space_config: unknown OOM policy %r (fail, retry, "
                                 "trim_retry, wait, or a registered name)" % value)
            c.on_oom = p
        else:
            setattr(c, name, value)
    return c


def downgrade(source, target=None):
    """Where to move data from space `source` (a (tier, index) pair) to: a
    space of tier `target` (None: the next slower tier)."""
    s = _Strategy()
    s.kind = _STRATEGY_DOWNGRADE
    s.space = _SpaceId(_tier(source[0]), source[1])
    if target is not None:
        s.tiers[0] = _tier(target)
        s.tier_count = 1
    return s


def _strategy(where):
    if isinstance(where, _Strategy):
        return where
    s = _Strategy()
    if isinstance(where, tuple):
        s.kind = _STRATEGY_SPACE
        s.space = _SpaceId(_tier(where[0]), where[1])
    elif isinstance(where, (list,)):
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


def _as_dict(struct):
    out = {}
    for name, _ in struct._fields_:
        if name in ("size", "version"):
            continue
        v = getattr(struct, name)
        if isinstance(v, _SpaceId):
            v = (TIERS[v.tier] if 0 <= v.tier < _TIER_COUNT else v.tier, v.index)
        elif isinstance(v, bytes):
            v = v.decode(errors="replace")
        out[name] = v
    return out


class Manager:
    """A tier manager over the spaces of `configs` (space_config() results).

    Raises GmrError (GMR_ERR_INVALID_ARGUMENT with the config and the reason:
    duplicate ids, bad fractions, a missing device, a bad spec, a capacity
    above INT64_MAX / 2 or, for GPU, above the device's memory...)."""

    def __init__(self, configs):
        configs = list(configs)
        array = (_SpaceConfig * len(configs))(*configs)
        handle = ctypes.c_void_p()
        failure = _lib.FailureStruct()
        st = _c().gmr_tier_manager_create(array, len(configs), ctypes.byref(handle),
                                          ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "cannot create a tier manager of %d space(s)" % len(configs))
        self._handle = handle.value
        n = _c().gmr_tier_manager_get_space_count(self._handle)
        self.spaces = [Space(self, _c().gmr_tier_manager_get_space_at(self._handle, k))
                       for k in range(n)]

    @property
    def handle(self):
        """The gmr_tier_manager * as an int."""
        if self._handle is None:
            raise ValueError("gmr.tiers: the manager is closed")
        return self._handle

    def space(self, tier, index=0):
        """The space (tier, index). Raises KeyError if the manager has none."""
        key = (TIERS[_tier(tier)], index)
        for s in self.spaces:
            if s.id == key:
                return s
        raise KeyError("gmr.tiers: no space %s in this manager (it has %s)"
                       % (key, ", ".join(str(s.id) for s in self.spaces)))

    def _reserve(self, mode, where, nbytes, timeout):
        strategy = _strategy(where)
        rid = ctypes.c_uint64(0)
        got = ctypes.c_size_t(0)
        failure = _lib.FailureStruct()
        lib = _c()
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

    def reserve(self, where, nbytes, timeout=None):
        """Reserve `nbytes` where `where` says, waiting up to `timeout` seconds
        for room (None: no limit). Raises GmrError (GMR_ERR_TIMEOUT,
        GMR_ERR_SHUTDOWN), OutOfMemoryError (above every candidate's limit)."""
        return self._reserve("block", where, nbytes, timeout)

    def try_reserve(self, where, nbytes):
        """Reserve now or raise OutOfMemoryError (the message says what is
        available)."""
        return self._reserve("try", where, nbytes, None)

    def reserve_up_to(self, where, nbytes):
        """Reserve as much as is available, up to `nbytes` (Reservation.nbytes
        says how much). When nothing is available the reservation has 0
        bytes (cuCascade's behaviour; it used to raise): grow() it later, or
        bind() it with on_limit="increase". Raises OutOfMemoryError only when
        every candidate is a DISK space with nothing available (DISK
        reservations cannot grow)."""
        return self._reserve("up_to", where, nbytes, None)

    def stats(self):
        """The manager's counters (gmr_tier_manager_stats): reserve_count,
        wait_count, wait_ns, reserve_latency_ns (waits included),
        immediate_reserve_count and _latency_ns (no wait), timeouts..."""
        s = _ManagerStats(ctypes.sizeof(_ManagerStats), _TIER_MANAGER_STATS_VERSION)
        st = _c().gmr_tier_manager_get_stats(self.handle, ctypes.byref(s))
        if st != 0:
            _fail(st, None, "manager stats")
        return _as_dict(s)

    def shutdown(self):
        """Wake every waiter with GMR_ERR_SHUTDOWN and refuse new reservations."""
        _c().gmr_tier_manager_shutdown(self.handle)

    def close(self):
        """Destroy the manager. Raises GmrError (GMR_ERR_BUSY: reservations,
        lent streams, waiters or live memory; nothing changed, the manager and
        its reservations still work). A reservation cannot outlive its
        manager (cuCascade's can): release every one first. Closing twice is
        a no-op."""
        if self._handle is None:
            return
        st = _c().gmr_tier_manager_destroy(self._handle)
        if st != 0:
            _fail(st, None, "closing the manager (release every reservation, return every "
                  "stream and free every allocation first)")
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Space:
    """One memory space of a manager (Manager.spaces, Manager.space())."""

    def __init__(self, manager, handle):
        self._manager = manager
        self._handle = handle
        sid = _c().gmr_memory_space_get_id(handle)
        self.id = (TIERS[sid.tier], sid.index)

    def __repr__(self):
        return "<gmr.tiers.Space %s %d>" % self.id

    @property
    def handle(self):
        return self._handle

    @property
    def resource(self):
        """The space's gmr_resource * as an int."""
        return _c().gmr_memory_space_as_resource(self._handle)

    @property
    def capacity_bytes(self):
        return _c().gmr_memory_space_get_capacity_bytes(self._handle)

    @property
    def available_bytes(self):
        """What a new reservation may take now."""
        return _c().gmr_memory_space_get_available_bytes(self._handle)

    def allocate(self, nbytes, stream=0):
        """Allocate through the space on `stream` (an int; charged to the
        reservation bound to it, or untracked). Raises GmrError
        (GMR_ERR_NO_RESERVATION, GMR_ERR_UNSUPPORTED on DISK) or
        OutOfMemoryError (past the reservation by its policy, past the
        capacity). A request past the reservation goes to its policy before
        the capacity is checked: "increase" grows the reservation as far as
        the space allows even when the request is then refused (the growth
        stays; the message says how much)."""
        out = ctypes.c_void_p()
        failure = _lib.FailureStruct()
        st = _lib.lib().gmr_allocate_ex(self.resource, nbytes, 0, stream or None,
                                        ctypes.byref(out), ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "allocating %d bytes in space %s" % (nbytes, self.id))
        return out.value or 0

    def deallocate(self, ptr, nbytes, stream=0):
        st = _lib.lib().gmr_deallocate(self.resource, ptr, nbytes, 0, stream or None)
        if st != 0:
            _fail(st, None, "freeing %#x (%d bytes) in space %s" % (ptr, nbytes, self.id))

    def poll_downgrade(self):
        """(downgrading, bytes_to_downgrade) with hysteresis: starts above the
        trigger, stops at the stop level."""
        d = ctypes.c_bool(False)
        amount = ctypes.c_size_t(0)
        st = _c().gmr_memory_space_poll_downgrade(self._handle, ctypes.byref(d),
                                                  ctypes.byref(amount))
        if st != 0:
            _fail(st, None, "polling the downgrade state")
        return bool(d.value), amount.value

    def acquire_stream(self, grow=False, timeout=None):
        """Borrow a stream of the space's pool (an int); give it back with
        release_stream(). grow: create one more when all are lent."""
        pool = _c().gmr_memory_space_get_stream_pool(self._handle)
        if not pool:
            raise ValueError("gmr.tiers: space %s has no stream pool (stream_count 0)"
                             % (self.id,))
        s = ctypes.c_void_p()
        st = _c().gmr_stream_pool_acquire(pool, 1 if grow else 0, _timeout_ns(timeout),
                                          ctypes.byref(s))
        if st != 0:
            _fail(st, None, "acquiring a stream of space %s" % (self.id,))
        return s.value

    def release_stream(self, stream):
        st = _c().gmr_stream_pool_release(_c().gmr_memory_space_get_stream_pool(self._handle),
                                          stream)
        if st != 0:
            _fail(st, None, "returning stream %#x to space %s" % (stream or 0, self.id))

    def stats(self):
        """The space's accounting (gmr_memory_space_stats) as a dict."""
        s = _SpaceStats(ctypes.sizeof(_SpaceStats), _MEMORY_SPACE_STATS_VERSION)
        st = _c().gmr_memory_space_get_stats(self._handle, ctypes.byref(s))
        if st != 0:
            _fail(st, None, "space stats")
        return _as_dict(s)


class Reservation:
    """A live reservation (Manager.reserve...). As a context manager it is
    released on exit (unless released already). It belongs to its manager's
    books and cannot outlive it: release it before Manager.close()."""

    def __init__(self, manager, rid):
        self._manager = manager
        self.id = rid
        self.released = False
        info = self.info()
        self.space = manager.space(*info["space"])

    def __repr__(self):
        return "<gmr.tiers.Reservation %d in %s>" % (self.id, self.space.id)

    @property
    def nbytes(self):
        """Its size now."""
        return self.info()["bytes"]

    def info(self):
        """gmr_reservation_info as a dict: bytes, allocated_bytes, bound,
        stream, raise/overage/refusal counts, space, path (DISK)."""
        s = _ReservationInfo(ctypes.sizeof(_ReservationInfo), _RESERVATION_INFO_VERSION)
        st = _c().gmr_reservation_get_info(self._manager.handle, self.id, ctypes.byref(s))
        if st != 0:
            _fail(st, None, "reservation %d (released?)" % self.id)
        return _as_dict(s)

    def bind(self, stream, on_limit=None):
        """Enforce the reservation on `stream` (an int) with limit policy
        `on_limit` (a name; None: the space's)."""
        failure = _lib.FailureStruct()
        policy = None if on_limit is None else ctypes.byref(_limit_policy(on_limit))
        st = _c().gmr_reservation_bind_stream(self._manager.handle, self.id, stream or None,
                                              policy, ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "binding reservation %d" % self.id)

    def unbind(self):
        st = _c().gmr_reservation_unbind_stream(self._manager.handle, self.id)
        if st != 0:
            _fail(st, None, "unbinding reservation %d" % self.id)

    def grow(self, nbytes):
        failure = _lib.FailureStruct()
        st = _c().gmr_reservation_grow(self._manager.handle, self.id, nbytes,
                                       ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "growing reservation %d by %d bytes" % (self.id, nbytes))

    def shrink(self, new_nbytes):
        failure = _lib.FailureStruct()
        st = _c().gmr_reservation_shrink(self._manager.handle, self.id, new_nbytes,
                                         ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "shrinking reservation %d to %d bytes" % (self.id, new_nbytes))

    def release(self):
        """Give it back (waiters wake). Raises GmrError (GMR_ERR_DOUBLE_FREE
        the second time)."""
        failure = _lib.FailureStruct()
        st = _c().gmr_reservation_release(self._manager.handle, self.id, ctypes.byref(failure))
        if st != 0:
            _fail(st, failure, "releasing reservation %d" % self.id)
        self.released = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.released:
            self.release()
        return False
