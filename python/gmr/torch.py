"""PyTorch's CUDA memory on gmr (standard library and ctypes; PyTorch itself is
imported only when a function needs it).

Direct mode, gmr is PyTorch's whole allocator (call it before anything in
the process initialises CUDA: before the first CUDA tensor):

    import gmr.torch
    gmr.torch.use("tracking > limiting(limit=70GiB) > pool > cuda(kind=async)")
    ...
    gmr.torch.stats()   # {"current_bytes": ..., "peak_bytes": ..., "per_stream": {...}, ...}

MemPool mode, PyTorch's caching allocator on top of gmr for the code inside
the block (PyTorch keeps its statistics, snapshots and OOM handling):

    pool = gmr.torch.mempool("pool > cuda(kind=async)")
    with torch.cuda.use_mem_pool(pool):
        ...

The first use() builds the torch shim against this PyTorch's headers through
torch.utils.cpp_extension into a cache folder, so that out of memory raises
torch.cuda.OutOfMemoryError; where it cannot, use() warns why and goes on
with the shim built without them (RuntimeError). docs/frameworks.md says
which mode to pick, what works in each, and how out of memory, bad frees and
spec errors surface.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple

import gmr
from gmr import _capi, _lib
from gmr import _torch_allocator_api
from gmr import memory_viz

__all__ = ["use", "mempool", "stats", "counters", "last_error", "build_shim", "mode",
           "graph_pool_info", "record_memory_history", "snapshot", "dump_snapshot"]

# torch.cuda.memory's _record_memory_history, _snapshot and _dump_snapshot
# for gmr (which PyTorch refuses under a pluggable allocator): gmr.memory_viz.
record_memory_history = memory_viz.record_memory_history
snapshot = memory_viz.snapshot
dump_snapshot = memory_viz.dump_snapshot

# Hook setters of PyTorch's _CUDAAllocator object and gmr's functions for them.
_HOOKS = (
    ("set_init_fn", "gmr_torch_init"),
    ("set_reset_fn", "gmr_torch_reset"),
    ("set_memory_fraction_fn", "gmr_torch_set_memory_fraction"),
    ("set_record_stream_fn", "gmr_torch_record_stream"),
    ("set_begin_allocate_to_pool", "gmr_torch_begin_allocate_to_pool"),
    ("set_end_allocate_to_pool_fn", "gmr_torch_end_allocate_to_pool"),
    ("set_release_pool", "gmr_torch_release_pool"),
)

# The shim built against PyTorch's headers: the file _lib looks for, and the
# name torch.utils.cpp_extension builds it under (it writes NAME.so).
_C10_SHIM = "libgmr_torch_c10.so"
_C10_SHIM_NAME = "libgmr_torch_c10"
_SHIM_SOURCES = ("chunk_streams.cc", "errors.cc", "graph_pools.cc", "history.cc", "storages.cc",
                 "torch_allocator.cc")

# Objects PyTorch must not outlive (its allocator keeps raw function pointers
# into the shim; the Python wrappers keep the shim loaded).
_keep: List[Any] = []
_mode: Optional[str] = None
_missing_hooks: Tuple[str, ...] = ()


def _import_torch() -> Any:
    try:
        import torch  # noqa: PLC0415 (imported on use: gmr.torch loads without PyTorch)
    except ImportError as e:
        raise ImportError("gmr.torch needs PyTorch: import torch failed (%s)" % e) from e
    return torch


def _address(name: str) -> Optional[int]:
    return ctypes.cast(getattr(_lib.torch_lib(), name), ctypes.c_void_p).value


def mode() -> Optional[str]:
    """Which mode gmr.torch is in.

    Returns:
        "direct" after use(), "mempool" after mempool() (without use()), else None.
    """
    return _mode


def _shim_cache_dir(torch: Any) -> str:
    """Where gmr.torch keeps the shim it built for this PyTorch and this gmr."""
    base = os.environ.get("GMR_TORCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "gmr")
    tag = "torch-%s-gmr-%s-abi%d" % (torch.__version__, gmr.version(),
                                     int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return os.path.join(base, tag.replace(os.sep, "_"))


def _build_failure(error: BaseException) -> str:
    """The lines of a failed build worth a warning: the first, and the first
    compiler error (cpp_extension's message holds the whole build log)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    text = lines[0][:200]
    detail = next((line for line in lines[1:] if re.search(r"\berror:", line)), None)
    if detail:
        text += " ... " + detail[:300]
    return text


# A build takes seconds; a lock older than this was left by a killed build.
_STALE_LOCK_SECONDS = 600


def _remove_stale_lock(lock: str) -> None:
    """Remove cpp_extension's build lock when a killed build left it: its
    waiters poll for it to go, with no time limit."""
    try:
        if time.time() - os.path.getmtime(lock) > _STALE_LOCK_SECONDS:
            os.remove(lock)
    except OSError:
        pass  # no lock, or another process removed it first


def _ensure_c10_shim(torch: Any) -> Optional[str]:
    """Arrange for use() to load the shim built against this PyTorch's
    headers (OutOfMemoryError types, CUDA graph trees' storage calls),
    building it once into the cache folder when none is there.

    Returns None when that shim (or one the loader finds) will be loaded,
    else why not, for use()'s warning. Raises OSError when there is no shim
    at all: none was found and none could be built.
    """
    loaded = _lib.loaded_torch_lib_path()
    if loaded is not None:
        # ctypes cannot unload a library: the one loaded stays.
        return ("the shim %s was loaded before use() (by another gmr.torch call such as "
                "counters() or mempool()); call gmr.torch.use() first" % loaded)
    named = os.environ.get("GMR_TORCH_LIBRARY")
    if named:
        return ("GMR_TORCH_LIBRARY names %s; unset it, or name a %s that gmr.torch.build_shim() "
                "made" % (named, _C10_SHIM))
    try:
        found: Optional[str] = _lib.torch_lib_path()
        not_found = ""
    except OSError as e:
        found, not_found = None, str(e)
    if found is not None and os.path.basename(found) == _C10_SHIM:
        return None
    cache = _shim_cache_dir(torch)
    built = os.path.join(cache, _C10_SHIM)
    lock = os.path.join(cache, "lock")
    _remove_stale_lock(lock)
    # cpp_extension holds `lock` while a process builds: wait for it (below)
    # rather than load a library another process is still linking.
    if os.path.exists(built) and not os.path.exists(lock):
        _lib.prefer_torch_lib(built)
        return None
    if os.environ.get("GMR_TORCH_BUILD", "1") == "0":
        reason = "GMR_TORCH_BUILD=0 turns off building it (unset it to build once into %s)" % cache
        if found is None:
            raise OSError("%s; and %s" % (not_found, reason))
        return reason
    try:
        built = build_shim(out_dir=cache)
    except Exception as e:  # noqa: BLE001 (any failure of the build means: fall back, and say why)
        reason = ("building it against this PyTorch's headers into %s failed: %s (it needs a "
                  "C++17 compiler and ninja; gmr.torch.build_shim(verbose=True) shows the "
                  "build)" % (cache, _build_failure(e)))
        if found is None:
            raise OSError("%s; and %s" % (not_found, reason)) from e
        return reason
    _lib.prefer_torch_lib(built)
    return None


def use(spec: Optional[str] = None) -> None:
    """Make gmr PyTorch's CUDA allocator for this process (direct mode).

    Each device's stack is created at its first allocation, with that device
    current. A malformed GMR_STACK fails at that allocation, with the spec
    error in the exception.

    Out of memory raises torch.cuda.OutOfMemoryError with gmr's message. For
    that, the first call builds the torch shim against this PyTorch's headers
    through torch.utils.cpp_extension into a cache folder
    (~/.cache/gmr/torch-<version>-gmr-<version>-abi<n>/, GMR_TORCH_CACHE_DIR;
    a few seconds, once; it needs a C++17 compiler and ninja). Where it
    cannot (GMR_TORCH_BUILD=0, no compiler or ninja, no PyTorch headers, a
    shim named by GMR_TORCH_LIBRARY or loaded before), it warns
    (RuntimeWarning) with the reason and uses the shim built without
    PyTorch's headers: out of memory then raises RuntimeError with the same
    message, and CUDA graph trees cannot restore checkpoints.

    CUDA graphs: torch.cuda.graph, graph_pool_handle and CUDA graph trees
    (torch.compile(mode="reduce-overhead")) get PyTorch's private pools from
    gmr over any stack (docs/frameworks.md); PyTorch's memory statistics and
    graph-tree checkpoint calls are answered from gmr's figures.

    Args:
        spec: a stack spec; None: the spec set with gmr.set_device_spec, else
            GMR_STACK, else gmr.FRAMEWORK_DEFAULT_SPEC ("vmm"). Checked now.

    Raises:
        gmr.SpecError: `spec` is malformed, or names a graph_arena (gmr.torch
            puts its own under every capture).
        RuntimeError: called twice, or PyTorch refused the swap (with
            PyTorch's own message): it swaps its allocator only before CUDA
            is initialised in the process, and only once.
        ImportError: PyTorch is not installed.
        OSError: no torch shim was found and none could be built.
    """
    global _mode, _missing_hooks
    torch = _import_torch()
    chosen = spec
    if chosen is not None and "graph_arena" in chosen:
        raise gmr.SpecError("GMR_ERR_INVALID_ARGUMENT",
                            "gmr.torch.use(%r): CUDA graphs get private pools of gmr.torch's own "
                            "over any stack: remove graph_arena(...) from the spec" % chosen)
    gmr._use_framework_spec(spec)
    if _mode == "direct":
        raise RuntimeError("gmr.torch.use() was called already: PyTorch's allocator can be "
                           "swapped once per process")
    why_not_c10 = _ensure_c10_shim(torch)
    shim = _lib.torch_lib()
    allocator = torch.cuda.memory.CUDAPluggableAllocator(
        _lib.loaded_torch_lib_path(), "gmr_torch_alloc", "gmr_torch_free")
    missing = []
    raw = allocator.allocator()
    for setter, symbol in _HOOKS:
        if hasattr(raw, setter):
            getattr(raw, setter)(_address(symbol))
        else:
            missing.append(setter)
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as e:
        raise RuntimeError(
            "gmr.torch.use(): PyTorch refused to swap its allocator: %s. PyTorch swaps its "
            "allocator only before CUDA is initialised in this process (no CUDA tensor, "
            "torch.cuda.init() or CUDA query before) and only once; call gmr.torch.use() "
            "first, or use gmr.torch.mempool() instead" % e) from e
    _keep.append(allocator)
    _mode = "direct"
    _missing_hooks = tuple(missing)
    _torch_allocator_api.install(torch)
    if missing:
        warnings.warn("gmr.torch: this PyTorch has no %s; those hooks are not connected "
                      "(docs/frameworks.md)" % ", ".join(missing), RuntimeWarning, stacklevel=2)
    if not shim.gmr_torch_raises_torch_errors():
        warnings.warn("gmr.torch: out of memory raises RuntimeError, not "
                      "torch.cuda.OutOfMemoryError (same message), and CUDA graph trees cannot "
                      "restore checkpoints: %s was built without PyTorch's headers. Why no shim "
                      "built with them is used: %s."
                      % (_lib.loaded_torch_lib_path(),
                         why_not_c10 or "it was loaded as found (build_shim() makes one)"),
                      RuntimeWarning, stacklevel=2)


def graph_pool_info(device: Optional[int] = None) -> Dict[str, int]:
    """The graph pools of a device (integrations/torch/gmr_torch.h).

    Args:
        device: a CUDA device index (None: the current device).

    Returns:
        A dict: pool_count, active_pool_count, live_block_count,
        pending_memory_count, deferred_free_count, arena_held_bytes.

    Raises:
        gmr.GmrError: the device is out of range.
        OSError: the torch shim cannot be loaded.
    """
    if device is None:
        device = _current_device()
    info = _capi.TorchGraphPoolInfo()
    info.size = ctypes.sizeof(info)
    info.version = _capi.TORCH_GRAPH_POOL_INFO_VERSION
    st = _lib.torch_lib().gmr_torch_get_graph_pool_info(device, ctypes.byref(info))
    if st != 0:
        _lib.raise_for(st, "gmr.torch: graph pools of device %d" % device)
    return {name: getattr(info, name) for name, *_ in info._fields_[2:]}


def mempool(spec: Optional[str] = None, device: Optional[int] = None) -> Any:
    """A torch.cuda.MemPool whose segments come from gmr (MemPool mode).

    Use it with `with torch.cuda.use_mem_pool(pool):` (only that thread's
    allocations go to it: PyTorch's rule) or torch.cuda.graph(pool=...).
    PyTorch turns a segment gmr cannot give into torch.cuda.OutOfMemoryError;
    gmr.torch.last_error() then says why.

    Args:
        spec: a stack spec; None as in use().
        device: the pool's device (None: the current device); its gmr stack is
            created now.

    Returns:
        The torch.cuda.MemPool.

    Raises:
        gmr.SpecError: `spec` is malformed.
        gmr.GmrError: the device's stack cannot be created.
        ImportError: PyTorch is not installed.
        OSError: the torch shim cannot be loaded.
    """
    global _mode
    torch = _import_torch()
    gmr._use_framework_spec(spec)
    _lib.torch_lib()
    if device is None:
        device = torch.cuda.current_device()
    gmr.device_resource(device)
    allocator = torch.cuda.memory.CUDAPluggableAllocator(
        _lib.loaded_torch_lib_path(), "gmr_torch_mempool_alloc", "gmr_torch_mempool_free")
    _keep.append(allocator)
    with torch.cuda.device(device):
        pool = torch.cuda.MemPool(allocator.allocator())
    if _mode is None:
        _mode = "mempool"
    return pool


def counters() -> Dict[str, int]:
    """The shim's counters, all devices together.

    Returns:
        A dict: live_count, live_bytes, allocation_count,
        failed_allocation_count, refused_free_count, failed_free_count,
        record_stream_count, record_stream_fallback_count,
        capture_allocation_count.

    Raises:
        gmr.GmrError: the shim refused.
        OSError: the torch shim cannot be loaded.
    """
    c = _capi.TorchCounters()
    c.size = ctypes.sizeof(c)
    c.version = _capi.TORCH_COUNTERS_VERSION
    st = _lib.torch_lib().gmr_torch_get_counters(ctypes.byref(c))
    if st != 0:
        _lib.raise_for(st, "gmr.torch: reading the counters failed")
    return {name: getattr(c, name) for name, *_ in c._fields_[2:]}


def last_error() -> str:
    """The calling thread's last failure message of the shim.

    Returns:
        The message ("" if none).

    Raises:
        OSError: the torch shim cannot be loaded.
    """
    shim = _lib.torch_lib()
    n = shim.gmr_torch_get_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    shim.gmr_torch_get_last_error(buf, n + 1)
    return buf.value.decode(errors="replace")


def _current_device() -> int:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


def stats(device: Optional[int] = None) -> Dict[str, Any]:
    """The counters of a device's stack.

    current_bytes, peak_bytes, total_bytes, allocations and per_stream
    ({"0x...": {"current", "peak", "total"}}) come from the topmost tracking
    layer (None / {} without one: put `tracking` on top of the spec);
    held_bytes / peak_held_bytes are what the stack holds from CUDA; layers
    has every layer's counters (gmr.stack_stats); shim the shim's counters
    (None before the shim is loaded).

    Args:
        device: a CUDA device index (None: the current device).

    Returns:
        The dict described above, with device, spec, mode and memory too.

    Raises:
        gmr.GmrError: the device's stack cannot be created or read.
        OSError: libgmr.so cannot be loaded.
    """
    if device is None:
        device = _current_device()
    data = gmr.stack_stats(device)
    tracking = next((l for l in data["layers"] if l["type"] == "tracking_adaptor"), None)
    out: Dict[str, Any] = {
        "device": device,
        "spec": data["spec"],
        "mode": _mode,
        "held_bytes": data["held_bytes"],
        "peak_held_bytes": data["peak_held_bytes"],
        "current_bytes": None,
        "peak_bytes": None,
        "total_bytes": None,
        "allocations": None,
        "per_stream": {},
        "memory": data["memory"],
        "layers": data["layers"],
        "shim": counters() if _lib.loaded_torch_lib_path() else None,
    }
    if tracking is not None:
        out["current_bytes"] = tracking["bytes"]["current"]
        out["peak_bytes"] = tracking["bytes"]["peak"]
        out["total_bytes"] = tracking["bytes"]["total"]
        out["allocations"] = tracking["allocations"]
        out["per_stream"] = {k: dict(v["bytes"]) for k, v in tracking["owners"].items()}
    return out


def _source_root() -> Tuple[str, str]:
    """The folder holding integrations/torch/*.cc and the gmr headers' include folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "torch_shim")   # PREFIX/lib/python/gmr/torch_shim
    if os.path.exists(os.path.join(installed, "integrations", "torch", "torch_allocator.cc")):
        bundled = os.path.join(installed, "include")   # the wheel carries the headers there
        if os.path.exists(os.path.join(bundled, "gmr", "resource.h")):
            return installed, bundled
        return installed, os.path.normpath(os.path.join(here, "..", "..", "..", "include"))
    repo = os.path.normpath(os.path.join(here, "..", ".."))
    if os.path.exists(os.path.join(repo, "integrations", "torch", "torch_allocator.cc")):
        return repo, os.path.join(repo, "include")
    raise OSError("gmr.torch.build_shim: the shim's sources (integrations/torch) were not found")


def _cuda_include_dirs(cpp_extension: Any) -> List[str]:
    """Folders with cuda_runtime.h, which PyTorch's c10/cuda headers include:
    the toolkit PyTorch finds (CUDA_HOME, CUDA_PATH, nvcc, /usr/local/cuda),
    else the headers of the nvidia-cuda-runtime wheel. (cpp_extension adds
    CUDA's folders only for CUDA sources, and then needs a whole toolkit.)"""
    dirs = []
    for home in (getattr(cpp_extension, "CUDA_HOME", None), os.environ.get("CUDA_HOME"),
                 os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            dirs.append(os.path.join(home, "include"))
            break
    if not dirs:
        for base in sys.path:
            candidate = os.path.join(base, "nvidia", "cuda_runtime", "include")
            if os.path.exists(os.path.join(candidate, "cuda_runtime.h")):
                dirs.append(candidate)
                break
    return dirs


@contextlib.contextmanager
def _compiler(cxx: Optional[str]) -> Iterator[None]:
    """CXX set to `cxx` for the duration (cpp_extension reads the compiler
    from the environment only)."""
    if cxx is None:
        yield
        return
    before = os.environ.get("CXX")
    os.environ["CXX"] = cxx
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = before


def _write_if_changed(path: str, text: str) -> None:
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)


def build_shim(out_dir: Optional[str] = None, cxx: Optional[str] = None,
               verbose: bool = False) -> str:
    """Build libgmr_torch_c10.so against this PyTorch's headers.

    With it, out of memory in direct mode raises torch.cuda.OutOfMemoryError
    (c10's exception types) instead of RuntimeError, and CUDA graph trees can
    restore checkpoints. use() calls it once by itself (into its cache
    folder); call it yourself to build into another folder, e.g. once per
    installation. The build goes through torch.utils.cpp_extension.load
    (a plain shared library, is_python_module=False), which takes PyTorch's
    include folders, C++ standard, ABI flags and libraries from the
    installed PyTorch, rebuilds only what changed (ninja), and lets one
    process build while others wait (a `lock` file in `out_dir`). The
    library exports only gmr_torch_* and links libgmr.so and c10_cuda with
    their folders as rpath. Loading it into this process is part of
    cpp_extension's load; gmr.torch prefers it from then on when it is in
    a searched folder or use() built it.

    Args:
        out_dir: the folder for the library and the build's files (build.ninja,
            objects); None: the folder of libgmr.so.
        cxx: the C++17 compiler (None: $CXX, else c++).
        verbose: show the build's commands and output.

    Returns:
        The path of libgmr_torch_c10.so.

    Raises:
        ImportError: PyTorch (or torch.utils.cpp_extension) is missing.
        OSError: the shim's sources are not installed, or a folder cannot be
            written.
        RuntimeError: the build failed (cpp_extension's message, with the
            compiler's output), or ninja is missing.
    """
    torch = _import_torch()
    from torch.utils import cpp_extension  # noqa: PLC0415 (needs PyTorch)

    root, include = _source_root()
    gmr_lib = os.path.realpath(_lib.lib_path())
    libdir = os.path.dirname(gmr_lib)
    out_dir = os.path.abspath(out_dir or libdir)
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, _C10_SHIM)
    version_script = os.path.join(out_dir, _C10_SHIM_NAME + ".map")
    _write_if_changed(version_script, "{ global: gmr_torch_*; local: *; };\n")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    ldflags = ["-Wl,--version-script=" + version_script, "-Wl,-soname," + _C10_SHIM,
               "-L" + libdir, "-l:" + os.path.basename(gmr_lib), "-Wl,-rpath," + libdir]
    # cpp_extension links c10 itself, and c10_cuda only for CUDA sources:
    # name it, and keep PyTorch's folder as rpath so the shim loads anywhere.
    for d in cpp_extension.library_paths():
        ldflags += ["-L" + d, "-Wl,-rpath," + d]
    ldflags.append("-lc10_cuda")
    _remove_stale_lock(os.path.join(out_dir, "lock"))
    with _compiler(cxx):
        result = cpp_extension.load(
            name=_C10_SHIM_NAME,
            sources=[os.path.join(root, "integrations", "torch", f) for f in _SHIM_SOURCES],
            # Older PyTorch releases leave the ABI flag to the caller; newer
            # ones add the same value.
            extra_cflags=["-O2", "-DGMR_TORCH_WITH_C10", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi],
            extra_ldflags=ldflags,
            extra_include_paths=[root, include] + _cuda_include_dirs(cpp_extension),
            build_directory=out_dir,
            verbose=verbose,
            with_cuda=False,
            is_python_module=False)
    # cpp_extension returns the path (older releases: None); it adds _v1, _v2
    # to the name when one process builds again with other arguments.
    built = os.path.abspath(result) if isinstance(result, str) else target
    if built != target:
        os.replace(built, target)
    return target


# Sleep and wake by tag for serving engines: gmr.serving's functions, here
# for `gmr.torch.region("weights")` and the like (docs/serving.md).
from gmr.serving import info as sleep_info  # noqa: E402
from gmr.serving import is_asleep, region, reserve, sleep, tag_tensor, wake  # noqa: E402

__all__ += ["region", "sleep", "wake", "is_asleep", "tag_tensor", "sleep_info", "reserve"]
