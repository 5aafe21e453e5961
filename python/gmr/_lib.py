"""Loading libgmr.so (and libgmr_torch.so) with ctypes, and their prototypes.

Where the libraries are looked for, first match wins:
  0. GMR_LIBRARY (a file: the library to load as libgmr.so, e.g. the test
     build libgmr_testing.so, which also holds the optional libraries and
     the CUDA simulation);
  1. GMR_LIBRARY_DIR (a folder holding libgmr.so);
  2. the installed layout: this package at PREFIX/lib/python/gmr, the
     libraries in PREFIX/lib (tools/install.sh);
  3. the source tree: bazel-bin/dist and bazel-bin/integrations/torch next to
     python/ (after `bazel build //dist:libgmr //integrations/torch:libgmr_torch`);
  4. the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig): libgmr.so.0.
libgmr_torch.so: GMR_TORCH_LIBRARY (a file) first, then the same folders,
preferring libgmr_torch_c10.so (the build against PyTorch's headers, which
raises torch.cuda.OutOfMemoryError; gmr.torch.build_shim()) over
libgmr_torch.so.

The library is loaded once per process, with RTLD_GLOBAL, so the torch shim
(which needs libgmr.so.0) and this module share one per-device registry.
"""

import ctypes
import os
import threading

_here = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_lib = None
_lib_path = None
_torch_lib = None
_torch_lib_path = None


class GmrError(RuntimeError):
    """A gmr call failed. `status` is the gmr_status name ("GMR_ERR_CUDA")."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class SpecError(GmrError, ValueError):
    """A stack spec (argument or GMR_STACK) is malformed; the message says where."""


class OutOfMemoryError(GmrError, MemoryError):
    """The stack had no memory for a request, or a limit refused it."""


def _candidate_dirs():
    dirs = []
    env = os.environ.get("GMR_LIBRARY_DIR")
    if env:
        dirs.append(env)
    # Two folders up: PREFIX/lib when installed, the repository in the tree.
    up = os.path.normpath(os.path.join(_here, "..", ".."))
    dirs.append(up)
    dirs.append(os.path.join(up, "bazel-bin", "dist"))
    dirs.append(os.path.join(up, "bazel-bin", "integrations", "torch"))
    return dirs


def library_dirs():
    """The folders searched for gmr's shared libraries, in order."""
    return _candidate_dirs()


class SpecErrorStruct(ctypes.Structure):
    _fields_ = [("line", ctypes.c_int), ("column", ctypes.c_int), ("message", ctypes.c_char * 512)]


class FailureStruct(ctypes.Structure):
    """gmr_failure (gmr/resource.h)."""

    _fields_ = [
        ("status", ctypes.c_int),
        ("cuda_error", ctypes.c_int),
        ("bytes", ctypes.c_size_t),
        ("alignment", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
        ("where", ctypes.c_void_p),
        ("attempt", ctypes.c_uint32),
        ("message", ctypes.c_char * 192),
        ("free_info_known", ctypes.c_bool),
        ("free_bytes", ctypes.c_size_t),
        ("largest_free_block_bytes", ctypes.c_size_t),
    ]


class TorchCounters(ctypes.Structure):
    """gmr_torch_counters (integrations/torch/gmr_torch.h)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("live_count", ctypes.c_uint64),
        ("live_bytes", ctypes.c_uint64),
        ("allocation_count", ctypes.c_uint64),
        ("failed_allocation_count", ctypes.c_uint64),
        ("refused_free_count", ctypes.c_uint64),
        ("failed_free_count", ctypes.c_uint64),
        ("record_stream_count", ctypes.c_uint64),
        ("record_stream_fallback_count", ctypes.c_uint64),
        ("capture_allocation_count", ctypes.c_uint64),
    ]


class TorchDeviceStats(ctypes.Structure):
    """gmr_torch_device_stats (integrations/torch/gmr_torch.h)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("live_count", ctypes.c_uint64),
        ("peak_live_count", ctypes.c_uint64),
        ("live_bytes", ctypes.c_uint64),
        ("peak_live_bytes", ctypes.c_uint64),
        ("allocation_count", ctypes.c_uint64),
        ("free_count", ctypes.c_uint64),
        ("allocated_bytes", ctypes.c_uint64),
        ("freed_bytes", ctypes.c_uint64),
        ("failed_allocation_count", ctypes.c_uint64),
        ("retry_count", ctypes.c_uint64),
    ]


class TorchGraphPoolInfo(ctypes.Structure):
    """gmr_torch_graph_pool_info (integrations/torch/gmr_torch.h)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint32),
        ("pool_count", ctypes.c_size_t),
        ("active_pool_count", ctypes.c_size_t),
        ("live_block_count", ctypes.c_size_t),
        ("pending_memory_count", ctypes.c_size_t),
        ("deferred_free_count", ctypes.c_size_t),
        ("arena_held_bytes", ctypes.c_size_t),
    ]


class FootprintStruct(ctypes.Structure):
    """gmr_footprint (gmr/resource.h)."""

    _fields_ = [("held_bytes", ctypes.c_size_t), ("peak_held_bytes", ctypes.c_size_t)]


def _declare(lib):
    c = ctypes
    vp, sz, i = c.c_void_p, c.c_size_t, c.c_int
    protos = {
        "gmr_version": (i, []),
        "gmr_status_name": (c.c_char_p, [i]),
        "gmr_status_string": (c.c_char_p, [i]),
        "gmr_cuda_is_simulated": (c.c_bool, []),
        "gmr_device_get_count": (i, [c.POINTER(i)]),
        "gmr_stack_check": (i, [c.c_char_p, c.POINTER(SpecErrorStruct)]),
        "gmr_set_device_resource_spec": (i, [c.c_char_p, c.POINTER(SpecErrorStruct)]),
        "gmr_get_device_resource": (i, [i, c.POINTER(vp), c.POINTER(SpecErrorStruct)]),
        "gmr_get_device_resource_spec": (c.c_char_p, [i]),
        "gmr_device_resources_release": (i, []),
        "gmr_allocate_ex": (i, [vp, sz, sz, vp, c.POINTER(vp), c.POINTER(FailureStruct)]),
        "gmr_deallocate": (i, [vp, vp, sz, sz, vp]),
        "gmr_record_stream": (i, [vp, vp, vp]),
        "gmr_resource_trim": (i, [vp, c.POINTER(sz)]),
        "gmr_resource_type_name": (c.c_char_p, [vp]),
        "gmr_resource_write_stats_json": (i, [vp, c.c_char_p, sz, c.POINTER(sz)]),
        "gmr_stream_wait_stream": (i, [vp, vp]),
        "gmr_resource_get_footprint": (i, [vp, c.POINTER(FootprintStruct)]),
    }
    for name, (restype, argtypes) in protos.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes


def _declare_torch(lib):
    c = ctypes
    vp, sz, i = c.c_void_p, c.c_size_t, c.c_int
    protos = {
        "gmr_torch_alloc": (vp, [sz, i, vp]),
        "gmr_torch_free": (None, [vp, sz, i, vp]),
        "gmr_torch_mempool_alloc": (vp, [sz, i, vp]),
        "gmr_torch_mempool_free": (None, [vp, sz, i, vp]),
        "gmr_torch_init": (None, [i]),
        "gmr_torch_reset": (None, []),
        "gmr_torch_set_memory_fraction": (None, [c.c_double, i]),
        "gmr_torch_record_stream": (None, [vp, vp]),
        "gmr_torch_get_counters": (i, [c.POINTER(TorchCounters)]),
        "gmr_torch_get_last_error": (sz, [c.c_char_p, sz]),
        "gmr_torch_raises_torch_errors": (c.c_bool, []),
        "gmr_torch_get_device_stats": (i, [i, c.POINTER(TorchDeviceStats)]),
        "gmr_torch_reset_peak_stats": (i, [i]),
        "gmr_torch_reset_accumulated_stats": (i, [i]),
        "gmr_torch_get_graph_pool_info": (i, [i, c.POINTER(TorchGraphPoolInfo)]),
        "gmr_torch_get_pool_blocks": (i, [i, c.c_uint64, c.c_uint64, c.POINTER(sz),
                                          c.POINTER(sz), c.POINTER(sz), sz, c.POINTER(sz)]),
        "gmr_torch_get_pool_ids": (i, [i, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64), sz,
                                       c.POINTER(sz)]),
        "gmr_torch_expect_address": (i, [i, c.c_uint64, c.c_uint64, vp]),
        "gmr_torch_get_pool_segments": (i, [i, c.c_uint64, c.c_uint64, c.POINTER(sz),
                                            c.POINTER(sz), sz, c.POINTER(sz)]),
        "gmr_torch_storage_adopt": (i, [c.c_int64]),
        "gmr_torch_storage_disown": (i, [c.c_int64]),
    }
    for name, (restype, argtypes) in protos.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes


def lib():
    """libgmr.so, loaded once (RTLD_GLOBAL). Raises OSError naming the places searched."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        chosen = os.environ.get("GMR_LIBRARY")
        dirs = _candidate_dirs()
        if chosen:
            if not os.path.exists(chosen):
                raise OSError("gmr: GMR_LIBRARY names %s, which does not exist" % chosen)
            dirs = [os.path.dirname(os.path.abspath(chosen))]
        for d in dirs:
            path = chosen or os.path.join(d, "libgmr.so")
            tried.append(path)
            if os.path.exists(path):
                _lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                _lib_path = path
                break
        else:
            try:
                _lib = ctypes.CDLL("libgmr.so.0", mode=ctypes.RTLD_GLOBAL)
                _lib_path = "libgmr.so.0"
            except OSError:
                raise OSError(
                    "gmr: libgmr.so not found; looked in: " + ", ".join(tried) +
                    " and the loader's path (libgmr.so.0). Set GMR_LIBRARY_DIR, install with "
                    "tools/install.sh, or build with bazel build //dist:libgmr") from None
        _declare(_lib)
        return _lib


def lib_path():
    """Path of the libgmr.so that was loaded (loads it)."""
    lib()
    return _lib_path


_optional = {}


def optional_lib(name):
    """An optional library of gmr ("tiers": libgmr_tiers.so, "scoped":
    libgmr_scoped.so), loaded once after libgmr.so, from the folder libgmr.so
    came from, then the other folders and the loader's path. A libgmr that
    holds it already (the test build) is returned as is. Raises OSError
    naming the places searched."""
    core = lib()
    probe = {"tiers": "gmr_tier_manager_create", "scoped": "gmr_scope_registry_create"}[name]
    with _lock:
        if name in _optional:
            return _optional[name]
        if hasattr(core, probe):
            _optional[name] = core
            return core
        file = "libgmr_%s.so" % name
        dirs = [os.path.dirname(_lib_path)] if os.path.isabs(_lib_path) else []
        tried = []
        for d in dirs + _candidate_dirs():
            path = os.path.join(d, file)
            tried.append(path)
            if os.path.exists(path):
                _optional[name] = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return _optional[name]
        try:
            _optional[name] = ctypes.CDLL(file + ".0", mode=ctypes.RTLD_GLOBAL)
        except OSError:
            raise OSError("gmr: %s (the optional library gmr.%s needs) not found; looked in: %s "
                          "and the loader's path" % (file, name, ", ".join(tried))) from None
        return _optional[name]


_preferred_torch_lib = None


def prefer_torch_lib(path):
    """Load the torch shim from `path` (a libgmr_torch_c10.so gmr.torch built
    for this PyTorch) unless GMR_TORCH_LIBRARY names one; before it is loaded."""
    global _preferred_torch_lib
    _preferred_torch_lib = path


def torch_lib_path():
    """Path of the torch shim gmr.torch uses: GMR_TORCH_LIBRARY, then one
    gmr.torch built for this PyTorch, then libgmr_torch_c10.so, then
    libgmr_torch.so in the library folders."""
    env = os.environ.get("GMR_TORCH_LIBRARY")
    if env:
        return env
    if _preferred_torch_lib is not None:
        return _preferred_torch_lib
    tried = []
    for name in ("libgmr_torch_c10.so", "libgmr_torch.so"):
        for d in _candidate_dirs():
            path = os.path.join(d, name)
            tried.append(path)
            if os.path.exists(path):
                return path
    raise OSError("gmr: libgmr_torch.so not found; looked in: " + ", ".join(tried) +
                  ". Set GMR_TORCH_LIBRARY, or build //integrations/torch:libgmr_torch")


def torch_lib():
    """The torch shim (after libgmr.so, which it needs), loaded once."""
    global _torch_lib, _torch_lib_path
    lib()
    with _lock:
        if _torch_lib is None:
            path = torch_lib_path()
            _torch_lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _torch_lib_path = path
            _declare_torch(_torch_lib)
        return _torch_lib


def loaded_torch_lib_path():
    """Path of the loaded torch shim, or None before gmr.torch loaded it."""
    return _torch_lib_path


def status_name(status):
    return lib().gmr_status_name(status).decode()


def raise_for(status, message, spec_error=False):
    """Raise the Python exception for a failed gmr status."""
    name = status_name(status)
    if name in ("GMR_ERR_OUT_OF_MEMORY", "GMR_ERR_LIMIT_EXCEEDED"):
        raise OutOfMemoryError(name, message)
    if spec_error and name == "GMR_ERR_INVALID_ARGUMENT":
        raise SpecError(name, message)
    raise GmrError(name, message)
