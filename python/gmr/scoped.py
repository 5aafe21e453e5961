"""Scoped per-thread pools (gmr/scoped_pool.h) from Python.

Every thread gets its own pool per device, made on first use; a scope gives
back everything the thread's pools handed out inside it at once, and the same
requests get the same addresses in the next iteration (AdaptiveArrayPools'
task-local pools with checkpoint/rewind, on gmr's graph arena):

    import gmr.scoped
    registry = gmr.scoped.Registry("pool > cuda(kind=async)")
    pool = registry.pool()                 # this thread, current device
    for step in range(steps):
        with registry.scope():             # enter ... exit gives every block back
            a = pool.allocate(1 << 20, stream)
            ...                            # kernels on `stream`; synchronise it
    pool.empty()                           # memory back to the upstream
    registry.close()

Blocks are not stream-ordered: synchronise the streams that used them before
the scope exits (or before reset/empty). A pool allocates only in its own
thread (any thread may free) and only while its device is current
(GmrError with status GMR_ERR_WRONG_DEVICE otherwise). A thread's pools are
emptied when the thread exits. Errors raise gmr.GmrError (gmr.OutOfMemoryError
for OUT_OF_MEMORY / LIMIT_EXCEEDED) with gmr's message; nothing changes on a
failed call.
"""

import ctypes
import threading

from gmr import _lib

__all__ = ["Registry", "Pool", "Scope"]

_SCOPED_POOL_STATS_VERSION = 1
_SCOPE_REGISTRY_STATS_VERSION = 1


class _RegistryConfig(ctypes.Structure):
    """gmr_scope_registry_config."""

    _fields_ = [
        ("chunk_bytes", ctypes.c_size_t),
        ("max_capacity_bytes", ctypes.c_size_t),
        ("alignment", ctypes.c_size_t),
    ]


class _Scope(ctypes.Structure):
    """gmr_scope (passed by value to gmr_scope_exit)."""

    _fields_ = [("depth", ctypes.c_uint32), ("serial", ctypes.c_uint64)]


class _PoolStats(ctypes.Structure):
    """gmr_scoped_pool_stats (version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("device", ctypes.c_int),
        ("held_bytes", ctypes.c_size_t),
        ("peak_held_bytes", ctypes.c_size_t),
        ("live_bytes", ctypes.c_size_t),
        ("live_count", ctypes.c_size_t),
        ("mark_count", ctypes.c_size_t),
        ("allocation_count", ctypes.c_uint64),
        ("rewind_count", ctypes.c_uint64),
        ("released_count", ctypes.c_uint64),
        ("orphan_mark_count", ctypes.c_uint64),
        ("reset_count", ctypes.c_uint64),
        ("empty_count", ctypes.c_uint64),
        ("wrong_device_count", ctypes.c_uint64),
    ]


class _RegistryStats(ctypes.Structure):
    """gmr_scope_registry_stats (version 1)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("device_count", ctypes.c_size_t),
        ("thread_count", ctypes.c_size_t),
        ("pool_count", ctypes.c_size_t),
        ("pools_created", ctypes.c_uint64),
        ("pools_retired", ctypes.c_uint64),
        ("orphan_scope_count", ctypes.c_uint64),
    ]


_declared = False
_declare_lock = threading.Lock()


def _c():
    """libgmr.so with this module's prototypes declared (once)."""
    global _declared
    lib = _lib.optional_lib("scoped")
    with _declare_lock:
        if not _declared:
            c = ctypes
            vp, sz, i = c.c_void_p, c.c_size_t, c.c_int
            protos = {
                "gmr_scope_registry_create": (i, [c.POINTER(vp), sz, c.POINTER(_RegistryConfig),
                                                  c.POINTER(vp)]),
                "gmr_scope_registry_create_from_spec": (i, [c.c_char_p, c.POINTER(_RegistryConfig),
                                                            c.POINTER(vp),
                                                            c.POINTER(_lib.SpecErrorStruct)]),
                "gmr_scope_registry_destroy": (i, [vp]),
                "gmr_scope_registry_get_pool": (i, [vp, c.POINTER(vp)]),
                "gmr_scope_registry_get_pool_for_device": (i, [vp, i, c.POINTER(vp)]),
                "gmr_scope_enter": (i, [vp, c.POINTER(_Scope)]),
                "gmr_scope_exit": (i, [vp, _Scope, c.POINTER(sz)]),
                "gmr_scope_get_depth": (c.c_uint32, [vp]),
                "gmr_scoped_pool_as_resource": (vp, [vp]),
                "gmr_scoped_pool_get_device": (i, [vp]),
                "gmr_scoped_pool_reset": (i, [vp, c.POINTER(sz)]),
                "gmr_scoped_pool_empty": (i, [vp, c.POINTER(sz)]),
                "gmr_scoped_pool_get_stats": (i, [vp, c.POINTER(_PoolStats)]),
                "gmr_scope_registry_get_stats": (i, [vp, c.POINTER(_RegistryStats)]),
            }
            for name, (restype, argtypes) in protos.items():
                f = getattr(lib, name)
                f.restype = restype
                f.argtypes = argtypes
            _declared = True
    return lib


def _as_dict(struct):
    return {name: getattr(struct, name) for name, _ in struct._fields_
            if name not in ("size", "version")}


def _check(status, message):
    if status != 0:
        _lib.raise_for(status, "%s: %s" % (message, _lib.status_name(status)))


class Registry:
    """A registry of per-thread pools (gmr_scope_registry).

    Registry(spec) builds one stack per device from `spec` (gmr/stack.h, e.g.
    "pool > cuda(kind=async)") and owns them. Registry(resources=[addr, ...])
    serves device d from the resource at resources[d] (gmr_resource * as an
    int, e.g. gmr.device_resource(d); None: no pool for that device); those
    are borrowed and must outlive the registry (close it before
    gmr.release_all()). chunk_bytes: least growth of a pool (default 8 MiB);
    max_capacity_bytes: most one pool holds (default: no limit; a request
    past it raises OutOfMemoryError whose message names the scoped pool and
    gmr_scope_registry_config.max_capacity_bytes); alignment: least
    alignment, a power of two >= 256.

    Raises SpecError for a malformed spec, GmrError otherwise.
    Thread-safe: yes (each thread gets its own pools and scopes).
    """

    def __init__(self, spec=None, *, resources=None, chunk_bytes=8 << 20,
                 max_capacity_bytes=None, alignment=256):
        if (spec is None) == (resources is None):
            raise ValueError("gmr.scoped.Registry: give a spec or resources, not both or neither")
        lib = _c()
        config = _RegistryConfig(chunk_bytes,
                                 ctypes.c_size_t(-1).value if max_capacity_bytes is None
                                 else max_capacity_bytes, alignment)
        handle = ctypes.c_void_p()
        if spec is not None:
            err = _lib.SpecErrorStruct()
            st = lib.gmr_scope_registry_create_from_spec(spec.encode(), ctypes.byref(config),
                                                         ctypes.byref(handle), ctypes.byref(err))
            if st != 0:
                text = err.message.decode(errors="replace")
                _lib.raise_for(st, "gmr.scoped: cannot create a registry over %r (chunk_bytes %d, "
                               "alignment %d): %s" % (spec, chunk_bytes, alignment,
                                                      text or _lib.status_name(st)),
                               spec_error=err.line > 0 or text.startswith("spec:"))
        else:
            ups = (ctypes.c_void_p * len(resources))(*resources)
            st = lib.gmr_scope_registry_create(ups, len(resources), ctypes.byref(config),
                                               ctypes.byref(handle))
            _check(st, "gmr.scoped: cannot create a registry over %d resource(s) (chunk_bytes %d, "
                   "alignment %d; alignment must be a power of two >= 256, chunk_bytes > 0)"
                   % (len(resources), chunk_bytes, alignment))
        self._handle = handle.value
        self._spec = spec

    @property
    def handle(self):
        """The gmr_scope_registry * as an int (for C code)."""
        self._require_open()
        return self._handle

    def _require_open(self):
        if self._handle is None:
            raise ValueError("gmr.scoped: the registry is closed")

    def pool(self, device=None):
        """The calling thread's pool for `device` (None: the current device),
        made on first use. Raises GmrError (GMR_ERR_UNSUPPORTED: no upstream
        for that device; GMR_ERR_INVALID_ARGUMENT: no such device)."""
        self._require_open()
        p = ctypes.c_void_p()
        if device is None:
            st = _c().gmr_scope_registry_get_pool(self._handle, ctypes.byref(p))
            _check(st, "gmr.scoped: this thread's pool for the current device")
        else:
            st = _c().gmr_scope_registry_get_pool_for_device(self._handle, device, ctypes.byref(p))
            _check(st, "gmr.scoped: this thread's pool for device %d" % device)
        return Pool(self, p.value)

    def scope(self):
        """A new scope of the calling thread, as a context manager: entering
        checkpoints every pool of the thread (lazily), leaving gives back
        what they handed out inside it (Scope.released_count says how many
        live blocks). Scopes nest; leaving an outer scope closes the inner
        ones left open."""
        self._require_open()
        return Scope(self)

    def depth(self):
        """Depth of the calling thread's innermost open scope (0: none)."""
        self._require_open()
        return int(_c().gmr_scope_get_depth(self._handle))

    def stats(self):
        """The registry's counters: device_count, thread_count, pool_count,
        pools_created, pools_retired, orphan_scope_count."""
        self._require_open()
        s = _RegistryStats(ctypes.sizeof(_RegistryStats), _SCOPE_REGISTRY_STATS_VERSION)
        _check(_c().gmr_scope_registry_get_stats(self._handle, ctypes.byref(s)),
               "gmr.scoped: registry stats")
        return _as_dict(s)

    def close(self):
        """Destroy the registry: every thread's pools give their memory back.
        Raises GmrError (GMR_ERR_BUSY: a thread has an open scope or a pool
        holds live blocks; nothing changed). Closing twice is a no-op."""
        if self._handle is None:
            return
        st = _c().gmr_scope_registry_destroy(self._handle)
        _check(st, "gmr.scoped: the registry cannot be closed while a thread has an open scope "
               "or a pool holds live blocks (exit the scopes, free or reset)")
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Scope:
    """One open scope of one thread (Registry.scope()). Use it with `with`, or
    call enter() and exit() yourself; a scope is entered once."""

    def __init__(self, registry):
        self._registry = registry
        self._scope = None
        self.released_count = None
        self.depth = None

    def enter(self):
        if self._scope is not None or self.released_count is not None:
            raise ValueError("gmr.scoped: a scope is entered once")
        s = _Scope()
        st = _c().gmr_scope_enter(self._registry.handle, ctypes.byref(s))
        _check(st, "gmr.scoped: entering a scope")
        self._scope = s
        self.depth = s.depth
        return self

    def exit(self):
        """Leave the scope: returns the number of live blocks given back.
        Raises GmrError (GMR_ERR_INVALID_ARGUMENT: not open in this thread,
        e.g. closed already by an outer scope's exit)."""
        if self._scope is None:
            raise ValueError("gmr.scoped: the scope was not entered")
        released = ctypes.c_size_t(0)
        st = _c().gmr_scope_exit(self._registry.handle, self._scope, ctypes.byref(released))
        _check(st, "gmr.scoped: leaving the scope at depth %d (it must be open in this thread)"
               % self._scope.depth)
        self._scope = None
        self.released_count = released.value
        return released.value

    def __enter__(self):
        return self.enter()

    def __exit__(self, *exc):
        self.exit()
        return False


class Pool:
    """One thread's pool for one device (gmr_scoped_pool), from Registry.pool()."""

    def __init__(self, registry, handle):
        self._registry = registry
        self._handle = handle

    @property
    def handle(self):
        """The gmr_scoped_pool * as an int."""
        return self._handle

    @property
    def resource(self):
        """The pool's gmr_resource * as an int (stack adaptors on it in C)."""
        return _c().gmr_scoped_pool_as_resource(self._handle)

    @property
    def device(self):
        return _c().gmr_scoped_pool_get_device(self._handle)

    def allocate(self, nbytes, stream=0):
        """A block of `nbytes` (256-byte aligned) for use on `stream` (an int:
        cudaStream_t; 0 the default stream); 0 for 0 bytes. A new chunk is
        taken from the upstream on `stream`. Raises OutOfMemoryError or
        GmrError with gmr's message."""
        out = ctypes.c_void_p()
        failure = _lib.FailureStruct()
        st = _lib.lib().gmr_allocate_ex(self.resource, nbytes, 0, stream or None,
                                        ctypes.byref(out), ctypes.byref(failure))
        if st != 0:
            _lib.raise_for(st, "gmr.scoped: %s allocating %d bytes from the pool of device %d: %s"
                           % (_lib.status_name(st), nbytes, self.device,
                              failure.message.decode(errors="replace")))
        return out.value or 0

    def deallocate(self, ptr, nbytes, stream=0):
        """Free a block before its scope ends (any thread may). Raises GmrError
        (GMR_ERR_DOUBLE_FREE: given back already, e.g. by a scope exit)."""
        st = _lib.lib().gmr_deallocate(self.resource, ptr, nbytes, 0, stream or None)
        _check(st, "gmr.scoped: freeing %#x (%d bytes)" % (ptr, nbytes))

    def reset(self):
        """Give every block back to the pool at once, keeping its memory;
        returns the live blocks given back. The pool's own thread only."""
        released = ctypes.c_size_t(0)
        st = _c().gmr_scoped_pool_reset(self._handle, ctypes.byref(released))
        _check(st, "gmr.scoped: reset (only the pool's own thread may)")
        return released.value

    def empty(self):
        """reset(), then give the pool's memory back to the upstream; returns
        the bytes given back. The pool's own thread only."""
        released = ctypes.c_size_t(0)
        st = _c().gmr_scoped_pool_empty(self._handle, ctypes.byref(released))
        _check(st, "gmr.scoped: empty (only the pool's own thread may)")
        return released.value

    def stats(self):
        """The pool's counters as a dict (gmr_scoped_pool_stats): device,
        held_bytes, peak_held_bytes, live_bytes, live_count, mark_count,
        allocation_count, rewind_count, released_count, orphan_mark_count,
        reset_count, empty_count, wrong_device_count."""
        s = _PoolStats(ctypes.sizeof(_PoolStats), _SCOPED_POOL_STATS_VERSION)
        _check(_c().gmr_scoped_pool_get_stats(self._handle, ctypes.byref(s)),
               "gmr.scoped: pool stats")
        return _as_dict(s)
