"""Scoped per-thread pools (gmr/scoped/scoped_pool.h) from Python.

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

from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Sequence

from gmr import _capi, _lib

__all__ = ["Registry", "Pool", "Scope"]


def _as_dict(struct: ctypes.Structure) -> Dict[str, Any]:
    return {name: getattr(struct, name) for name, *_ in struct._fields_
            if name not in ("size", "version")}


def _check(status: int, message: str) -> None:
    if status != 0:
        _lib.raise_for(status, "%s: %s" % (message, _lib.status_name(status)))


class Registry:
    """A registry of per-thread pools (gmr_scope_registry).

    Registry(spec) builds one stack per device from `spec` and owns them.
    Registry(resources=[addr, ...]) serves device d from the resource at
    resources[d]; those are borrowed and must outlive the registry (close it
    before gmr.release_all()). Thread-safe: yes (each thread gets its own
    pools and scopes). Usable as a context manager (closes on exit).

    Args:
        spec: a stack spec (gmr/stack.h, e.g. "pool > cuda(kind=async)"); give
            this or `resources`.
        resources: gmr_resource * addresses as ints, one per device (e.g.
            gmr.device_resource(d)); None in the list: no pool for that device.
        chunk_bytes: least growth of a pool (default 8 MiB).
        max_capacity_bytes: most one pool holds (None: no limit; a request past
            it raises OutOfMemoryError whose message names the scoped pool and
            gmr_scope_registry_config.max_capacity_bytes).
        alignment: least alignment, a power of two >= 256.

    Raises:
        ValueError: both or neither of `spec` and `resources` are given.
        SpecError: `spec` is malformed.
        GmrError: the registry cannot be made (bad chunk_bytes or alignment).
        OSError: libgmr.so cannot be loaded.
    """

    def __init__(self, spec: Optional[str] = None, *,
                 resources: Optional[Sequence[Optional[int]]] = None,
                 chunk_bytes: int = 8 << 20, max_capacity_bytes: Optional[int] = None,
                 alignment: int = 256) -> None:
        if (spec is None) == (resources is None):
            raise ValueError("gmr.scoped.Registry: give a spec or resources, not both or neither")
        lib = _lib.optional_lib("scoped")
        config = _capi.ScopeRegistryConfig(chunk_bytes,
                                           ctypes.c_size_t(-1).value if max_capacity_bytes is None
                                           else max_capacity_bytes, alignment)
        handle = ctypes.c_void_p()
        if spec is not None:
            err = _capi.SpecErrorStruct()
            st = lib.gmr_scope_registry_create_from_spec(spec.encode(), ctypes.byref(config),
                                                         ctypes.byref(handle), ctypes.byref(err))
            if st != 0:
                text = err.message.decode(errors="replace")
                _lib.raise_for(st, "gmr.scoped: cannot create a registry over %r (chunk_bytes %d, "
                               "alignment %d): %s" % (spec, chunk_bytes, alignment,
                                                      text or _lib.status_name(st)),
                               spec_error=err.line > 0 or text.startswith("spec:"))
        else:
            assert resources is not None
            ups = (ctypes.c_void_p * len(resources))(*resources)
            st = lib.gmr_scope_registry_create(ups, len(resources), ctypes.byref(config),
                                               ctypes.byref(handle))
            _check(st, "gmr.scoped: cannot create a registry over %d resource(s) (chunk_bytes %d, "
                   "alignment %d; alignment must be a power of two >= 256, chunk_bytes > 0)"
                   % (len(resources), chunk_bytes, alignment))
        self._handle: Optional[int] = handle.value
        self._spec = spec

    @property
    def handle(self) -> int:
        """The gmr_scope_registry * as an int (for C code); ValueError once closed."""
        return self._require_open()

    def _require_open(self) -> int:
        if self._handle is None:
            raise ValueError("gmr.scoped: the registry is closed")
        return self._handle

    def pool(self, device: Optional[int] = None) -> Pool:
        """The calling thread's pool for a device, made on first use.

        Args:
            device: a CUDA device index (None: the current device).

        Returns:
            The pool.

        Raises:
            ValueError: the registry is closed.
            GmrError: GMR_ERR_UNSUPPORTED (no upstream for that device),
                GMR_ERR_INVALID_ARGUMENT (no such device).
        """
        handle = self._require_open()
        p = ctypes.c_void_p()
        if device is None:
            st = _lib.optional_lib("scoped").gmr_scope_registry_get_pool(handle, ctypes.byref(p))
            _check(st, "gmr.scoped: this thread's pool for the current device")
        else:
            st = _lib.optional_lib("scoped").gmr_scope_registry_get_pool_for_device(handle, device,
                                                                    ctypes.byref(p))
            _check(st, "gmr.scoped: this thread's pool for device %d" % device)
        return Pool(self, p.value or 0)

    def scope(self) -> Scope:
        """A new scope of the calling thread, as a context manager.

        Entering checkpoints every pool of the thread (lazily), leaving gives
        back what they handed out inside it (Scope.released_count says how
        many live blocks). Scopes nest; leaving an outer scope closes the
        inner ones left open.

        Returns:
            The scope, not entered yet.

        Raises:
            ValueError: the registry is closed.
        """
        self._require_open()
        return Scope(self)

    def depth(self) -> int:
        """Depth of the calling thread's innermost open scope.

        Returns:
            The depth (0: no open scope).

        Raises:
            ValueError: the registry is closed.
        """
        return int(_lib.optional_lib("scoped").gmr_scope_get_depth(self._require_open()))

    def stats(self) -> Dict[str, Any]:
        """The registry's counters (gmr_scope_registry_stats).

        Returns:
            A dict: device_count, thread_count, pool_count, pools_created,
            pools_retired, orphan_scope_count.

        Raises:
            ValueError: the registry is closed.
            GmrError: the C call refused.
        """
        s = _capi.ScopeRegistryStats(ctypes.sizeof(_capi.ScopeRegistryStats),
                                     _capi.SCOPE_REGISTRY_STATS_VERSION)
        _check(_lib.optional_lib("scoped").gmr_scope_registry_get_stats(self._require_open(), ctypes.byref(s)),
               "gmr.scoped: registry stats")
        return _as_dict(s)

    def close(self) -> None:
        """Destroy the registry: every thread's pools give their memory back.

        Closing twice is a no-op.

        Raises:
            GmrError: GMR_ERR_BUSY, a thread has an open scope or a pool holds
                live blocks (nothing changed).
        """
        if self._handle is None:
            return
        st = _lib.optional_lib("scoped").gmr_scope_registry_destroy(self._handle)
        _check(st, "gmr.scoped: the registry cannot be closed while a thread has an open scope "
               "or a pool holds live blocks (exit the scopes, free or reset)")
        self._handle = None

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Scope:
    """One open scope of one thread (Registry.scope()).

    Use it with `with`, or call enter() and exit() yourself; a scope is
    entered once. After exit, `released_count` holds the live blocks given
    back; `depth` is its depth once entered.

    Args:
        registry: the registry whose pools the scope covers.
    """

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._scope: Optional[_capi.ScopeStruct] = None
        self.released_count: Optional[int] = None
        self.depth: Optional[int] = None

    def enter(self) -> Scope:
        """Open the scope in the calling thread.

        Returns:
            This scope.

        Raises:
            ValueError: entered before, or the registry is closed.
            GmrError: the C call refused.
        """
        if self._scope is not None or self.released_count is not None:
            raise ValueError("gmr.scoped: a scope is entered once")
        s = _capi.ScopeStruct()
        st = _lib.optional_lib("scoped").gmr_scope_enter(self._registry.handle, ctypes.byref(s))
        _check(st, "gmr.scoped: entering a scope")
        self._scope = s
        self.depth = s.depth
        return self

    def exit(self) -> int:
        """Leave the scope, giving back what its thread's pools handed out in it.

        Returns:
            The number of live blocks given back.

        Raises:
            ValueError: the scope was not entered.
            GmrError: GMR_ERR_INVALID_ARGUMENT, not open in this thread (e.g.
                closed already by an outer scope's exit).
        """
        if self._scope is None:
            raise ValueError("gmr.scoped: the scope was not entered")
        released = ctypes.c_size_t(0)
        st = _lib.optional_lib("scoped").gmr_scope_exit(self._registry.handle, self._scope,
                                       ctypes.byref(released))
        _check(st, "gmr.scoped: leaving the scope at depth %d (it must be open in this thread)"
               % self._scope.depth)
        self._scope = None
        self.released_count = released.value
        return released.value

    def __enter__(self) -> Scope:
        return self.enter()

    def __exit__(self, *exc: Any) -> None:
        self.exit()


class Pool:
    """One thread's pool for one device (gmr_scoped_pool), from Registry.pool().

    Args:
        registry: the registry it belongs to.
        handle: the gmr_scoped_pool * as an int.
    """

    def __init__(self, registry: Registry, handle: int) -> None:
        self._registry = registry
        self._handle = handle

    @property
    def handle(self) -> int:
        """The gmr_scoped_pool * as an int."""
        return self._handle

    @property
    def resource(self) -> int:
        """The pool's gmr_resource * as an int (stack adaptors on it in C): the
        handle itself, since every gmr handle starts with its gmr_resource."""
        return self._handle or 0

    @property
    def device(self) -> int:
        """The pool's device."""
        return int(_lib.optional_lib("scoped").gmr_scoped_pool_get_device(self._handle))

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        """A block of the pool, 256-byte aligned.

        A new chunk is taken from the upstream on `stream`.

        Args:
            nbytes: bytes to allocate.
            stream: the cudaStream_t it is used on, as an int (0: the default stream).

        Returns:
            The address (0 for 0 bytes).

        Raises:
            OutOfMemoryError: the upstream has no memory, or max_capacity_bytes.
            GmrError: another thread's pool (GMR_ERR_INVALID_ARGUMENT), or its
                device is not current (GMR_ERR_WRONG_DEVICE).
        """
        out = ctypes.c_void_p()
        failure = _capi.FailureStruct()
        st = _lib.lib().gmr_resource_allocate_ex(self.resource, nbytes, 0, stream or None,
                                        ctypes.byref(out), ctypes.byref(failure))
        if st != 0:
            _lib.raise_for(st, "gmr.scoped: %s allocating %d bytes from the pool of device %d: %s"
                           % (_lib.status_name(st), nbytes, self.device,
                              failure.message.decode(errors="replace")))
        return out.value or 0

    def deallocate(self, ptr: int, nbytes: int, stream: int = 0) -> None:
        """Free a block before its scope ends (any thread may).

        Args:
            ptr: the block's address.
            nbytes: the bytes it was allocated with.
            stream: the stream it was last used on (0: the default stream).

        Raises:
            GmrError: GMR_ERR_DOUBLE_FREE, given back already (e.g. by a scope exit).
        """
        st = _lib.lib().gmr_resource_deallocate(self.resource, ptr, nbytes, 0, stream or None)
        _check(st, "gmr.scoped: freeing %#x (%d bytes)" % (ptr, nbytes))

    def reset(self) -> int:
        """Give every block back to the pool at once, keeping its memory.

        The pool's own thread only.

        Returns:
            The live blocks given back.

        Raises:
            GmrError: GMR_ERR_INVALID_ARGUMENT from another thread.
        """
        released = ctypes.c_size_t(0)
        st = _lib.optional_lib("scoped").gmr_scoped_pool_reset(self._handle, ctypes.byref(released))
        _check(st, "gmr.scoped: reset (only the pool's own thread may)")
        return released.value

    def empty(self) -> int:
        """reset(), then give the pool's memory back to the upstream.

        The pool's own thread only.

        Returns:
            The bytes given back.

        Raises:
            GmrError: GMR_ERR_INVALID_ARGUMENT from another thread.
        """
        released = ctypes.c_size_t(0)
        st = _lib.optional_lib("scoped").gmr_scoped_pool_empty(self._handle, ctypes.byref(released))
        _check(st, "gmr.scoped: empty (only the pool's own thread may)")
        return released.value

    def stats(self) -> Dict[str, Any]:
        """The pool's counters (gmr_scoped_pool_stats).

        Returns:
            A dict: device, held_bytes, peak_held_bytes, live_bytes,
            live_count, mark_count, allocation_count, rewind_count,
            released_count, orphan_mark_count, reset_count, empty_count,
            wrong_device_count.

        Raises:
            GmrError: the C call refused.
        """
        s = _capi.ScopedPoolStats(ctypes.sizeof(_capi.ScopedPoolStats),
                                  _capi.SCOPED_POOL_STATS_VERSION)
        _check(_lib.optional_lib("scoped").gmr_scoped_pool_get_stats(self._handle, ctypes.byref(s)),
               "gmr.scoped: pool stats")
        return _as_dict(s)
