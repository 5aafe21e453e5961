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

docs/frameworks.md says which to pick, what works in each mode, and how out of
memory, bad frees and spec errors surface.
"""

import ctypes
import os
import subprocess
import sys
import tempfile
import warnings

import gmr
from gmr import _lib
from gmr import _torch_allocator_api

__all__ = ["use", "mempool", "stats", "counters", "last_error", "build_shim", "mode",
           "graph_pool_info"]

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

# Objects PyTorch must not outlive (its allocator keeps raw function pointers
# into the shim; the Python wrappers keep the shim loaded).
_keep = []
_mode = None
_missing_hooks = ()


def _import_torch():
    try:
        import torch  # noqa: PLC0415 (imported on use: gmr.torch loads without PyTorch)
    except ImportError as e:
        raise ImportError("gmr.torch needs PyTorch: import torch failed (%s)" % e) from e
    return torch


def _address(name):
    return ctypes.cast(getattr(_lib.torch_lib(), name), ctypes.c_void_p).value


def mode():
    """"direct" after use(), "mempool" after mempool() (without use()), else None."""
    return _mode


def _shim_cache_dir(torch):
    """Where gmr.torch keeps the shim it built for this PyTorch and this gmr."""
    base = os.environ.get("GMR_TORCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "gmr")
    tag = "torch-%s-gmr-%s-abi%d" % (torch.__version__, gmr.version(),
                                     int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return os.path.join(base, tag.replace(os.sep, "_"))


def _ensure_c10_shim(torch):
    """Load the shim built against this PyTorch's headers (OutOfMemoryError
    types, CUDA graph trees' storage calls), building it once into a cache
    folder when none is there. Set GMR_TORCH_BUILD=0 to never build;
    GMR_TORCH_LIBRARY names a shim to use as it is."""
    if _lib.loaded_torch_lib_path() is not None or os.environ.get("GMR_TORCH_LIBRARY"):
        return
    found = _lib.torch_lib_path()
    if os.path.basename(found) == "libgmr_torch_c10.so":
        return
    cache = _shim_cache_dir(torch)
    built = os.path.join(cache, "libgmr_torch_c10.so")
    if not os.path.exists(built):
        if os.environ.get("GMR_TORCH_BUILD", "1") == "0":
            return
        try:
            build_shim(out_dir=cache)
        except (OSError, RuntimeError, ImportError) as e:
            warnings.warn("gmr.torch: could not build the torch shim against PyTorch's headers "
                          "(%s); using %s: out of memory raises RuntimeError and CUDA graph "
                          "trees (torch.compile mode='reduce-overhead') cannot restore their "
                          "checkpoints" % (str(e).splitlines()[0], found),
                          RuntimeWarning, stacklevel=3)
            return
    _lib.prefer_torch_lib(built)


def use(spec=None):
    """Make gmr PyTorch's CUDA allocator for this process (direct mode).

    `spec` (None: the spec set with gmr.set_device_spec, else GMR_STACK, else
    gmr.FRAMEWORK_DEFAULT_SPEC, "vmm") is checked now (gmr.SpecError); each
    device's stack is created at its first allocation, with that device
    current. A malformed GMR_STACK fails at that allocation, with the spec
    error in the exception.

    CUDA graphs: torch.cuda.graph, graph_pool_handle and CUDA graph trees
    (torch.compile(mode="reduce-overhead")) get PyTorch's private pools from
    gmr over any stack (docs/frameworks.md). The first call builds the torch
    shim against this PyTorch's headers into a cache folder (a few seconds,
    once; GMR_TORCH_BUILD=0 turns it off), and PyTorch's memory statistics
    and graph-tree checkpoint calls are answered from gmr's figures.

    Args:
        spec: a stack spec (str) or None.

    Raises:
        gmr.SpecError: `spec` is malformed, or names a graph_arena (gmr.torch
            puts its own under every capture).
        RuntimeError: PyTorch refused the swap (with PyTorch's own message): it
            swaps its allocator only before CUDA is initialised in the process,
            and only once.
    """
    global _mode, _missing_hooks
    torch = _import_torch()
    chosen = gmr._framework_spec(spec)
    if chosen is not None and "graph_arena" in chosen:
        raise gmr.SpecError("GMR_ERR_INVALID_ARGUMENT",
                            "gmr.torch.use(%r): CUDA graphs get private pools of gmr.torch's own "
                            "over any stack: remove graph_arena(...) from the spec" % chosen)
    gmr._use_framework_spec(spec)
    if _mode == "direct":
        raise RuntimeError("gmr.torch.use() was called already: PyTorch's allocator can be "
                           "swapped once per process")
    _ensure_c10_shim(torch)
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
        warnings.warn("gmr.torch: %s was built without PyTorch's headers: out of memory "
                      "raises RuntimeError, not torch.cuda.OutOfMemoryError, and CUDA graph "
                      "trees cannot restore checkpoints. gmr.torch.build_shim() builds one "
                      "that can." % _lib.loaded_torch_lib_path(), RuntimeWarning, stacklevel=2)


def graph_pool_info(device=None):
    """The graph pools of `device` (None: the current device) as a dict:
    pool_count, active_pool_count, live_block_count, pending_memory_count,
    deferred_free_count, arena_held_bytes (integrations/torch/gmr_torch.h).

    Raises:
        gmr.GmrError: the device is out of range.
    """
    if device is None:
        device = _current_device()
    info = _lib.TorchGraphPoolInfo()
    info.size = ctypes.sizeof(info)
    info.version = 1
    st = _lib.torch_lib().gmr_torch_get_graph_pool_info(device, ctypes.byref(info))
    if st != 0:
        _lib.raise_for(st, "gmr.torch: graph pools of device %d" % device)
    return {name: getattr(info, name) for name, _ in info._fields_[2:]}


def mempool(spec=None, device=None):
    """A torch.cuda.MemPool whose segments come from gmr (MemPool mode).

    Use it with `with torch.cuda.use_mem_pool(pool):` (only that thread's
    allocations go to it: PyTorch's rule) or torch.cuda.graph(pool=...).
    `device` (None: the current device) is the pool's device; its gmr stack is
    created now, so a malformed spec raises here (gmr.SpecError); `spec` None
    as in use(). PyTorch
    turns a segment gmr cannot give into torch.cuda.OutOfMemoryError;
    gmr.torch.last_error() then says why.
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


def counters():
    """The shim's counters (all devices): live_count, live_bytes, allocation_count,
    failed_allocation_count, refused_free_count, failed_free_count,
    record_stream_count, record_stream_fallback_count, capture_allocation_count."""
    c = _lib.TorchCounters()
    c.size = ctypes.sizeof(c)
    c.version = 1
    st = _lib.torch_lib().gmr_torch_get_counters(ctypes.byref(c))
    if st != 0:
        _lib.raise_for(st, "gmr.torch: reading the counters failed")
    return {name: getattr(c, name) for name, _ in c._fields_[2:]}


def last_error():
    """The calling thread's last failure message of the shim ("" if none)."""
    shim = _lib.torch_lib()
    n = shim.gmr_torch_get_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    shim.gmr_torch_get_last_error(buf, n + 1)
    return buf.value.decode(errors="replace")


def _current_device():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return 0


def stats(device=None):
    """The counters of `device`'s stack (None: the current device) as a dict.

    current_bytes, peak_bytes, total_bytes, allocations and per_stream
    ({"0x...": {"current", "peak", "total"}}) come from the topmost tracking
    layer (None / {} without one: put `tracking` on top of the spec);
    held_bytes / peak_held_bytes are what the stack holds from CUDA; layers
    has every layer's counters (gmr.stack_stats); shim the shim's counters.
    """
    if device is None:
        device = _current_device()
    data = gmr.stack_stats(device)
    tracking = next((l for l in data["layers"] if l["type"] == "tracking_adaptor"), None)
    out = {
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


def _source_root():
    """The folder holding integrations/torch/*.cc and the gmr headers' include folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "torch_shim")   # PREFIX/lib/python/gmr/torch_shim
    if os.path.exists(os.path.join(installed, "integrations", "torch", "torch_allocator.cc")):
        return installed, os.path.normpath(os.path.join(here, "..", "..", "..", "include"))
    repo = os.path.normpath(os.path.join(here, "..", ".."))
    if os.path.exists(os.path.join(repo, "integrations", "torch", "torch_allocator.cc")):
        return repo, os.path.join(repo, "include")
    raise OSError("gmr.torch.build_shim: the shim's sources (integrations/torch) were not found")


def _cuda_include_dirs(cpp_extension):
    """Folders with cuda_runtime.h, which PyTorch's c10/cuda headers include:
    the toolkit PyTorch finds (CUDA_HOME, CUDA_PATH, nvcc, /usr/local/cuda),
    else the headers of the nvidia-cuda-runtime wheel."""
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


def build_shim(out_dir=None, cxx=None, verbose=False):
    """Build libgmr_torch_c10.so against this PyTorch's headers, so that out of
    memory in direct mode raises torch.cuda.OutOfMemoryError (c10's exception
    types) instead of RuntimeError. Needs a C++17 compiler (`cxx`, $CXX, or
    g++) and PyTorch's headers (pip wheels ship them). Writes into `out_dir`
    (None: the folder of libgmr.so) and returns the path; gmr.torch prefers
    it to libgmr_torch.so from then on (when it is in a searched folder).
    Takes a few seconds. Call it before use() in the same process, or once per
    installation.
    """
    torch = _import_torch()
    from torch.utils import cpp_extension  # noqa: PLC0415

    root, include = _source_root()
    libdir = os.path.dirname(os.path.realpath(_lib.lib_path()))
    out_dir = out_dir or libdir
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "libgmr_torch_c10.so")
    sources = [os.path.join(root, "integrations", "torch", f)
               for f in ("chunk_streams.cc", "errors.cc", "graph_pools.cc", "storages.cc",
                         "torch_allocator.cc")]
    torch_libdirs = cpp_extension.library_paths()
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    with tempfile.NamedTemporaryFile("w", suffix=".map", delete=False) as f:
        f.write("{ global: gmr_torch_*; local: *; };\n")
        version_script = f.name
    cmd = [cxx or os.environ.get("CXX", "g++"), "-O2", "-fPIC", "-shared",
           "-DGMR_TORCH_WITH_C10", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi,
           "-I", root, "-I", include]
    for d in cpp_extension.include_paths() + _cuda_include_dirs(cpp_extension):
        cmd += ["-isystem", d]
    cmd += sources + ["-o", out, "-Wl,--version-script=" + version_script,
                      "-Wl,-soname,libgmr_torch_c10.so",
                      "-L", libdir, "-l:" + os.path.basename(os.path.realpath(_lib.lib_path())),
                      "-Wl,-rpath," + libdir]
    for d in torch_libdirs:
        cmd += ["-L", d, "-Wl,-rpath," + d]
    cmd += ["-lc10", "-lc10_cuda"]
    # PyTorch's headers need C++17 or, in newer releases, C++20: try both.
    errors = []
    try:
        for std in ("-std=c++17", "-std=c++20"):
            if verbose:
                print(" ".join(cmd[:1] + [std] + cmd[1:]), file=sys.stderr)
            run = subprocess.run(cmd[:1] + [std] + cmd[1:], capture_output=True, text=True)
            if run.returncode == 0:
                return out
            errors.append("%s:\n%s%s" % (std, run.stdout, run.stderr[-4000:]))
    finally:
        os.unlink(version_script)
    raise RuntimeError("gmr.torch.build_shim failed (%s):\n%s" % (" ".join(cmd), "\n".join(errors)))
