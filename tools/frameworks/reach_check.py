"""The README's framework examples on a real GPU, through the installed wheel
(tools/frameworks/reach_check.sh runs each item in its own process, in a
fresh virtual environment that installed .gpu/wheel/gmr-*.whl):

    python reach_check.py ITEM

ITEM: version, torch, cupy, numba_env, numba_use, cuda_core, cupy_on_cuda_core.
Prints "PASS ITEM: what was seen" or "FAIL ITEM: why" as its last line and
exits 0 / 1; "SKIP ITEM: why" (exit 0) when the framework is not installed.
"""

import os
import sys

MIB = 1 << 20


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def tracked(stats):
    """Bytes the top tracking layer counts as live."""
    return next(l for l in stats["layers"] if l["type"] == "tracking_adaptor")["bytes"]["current"]


def item_version():
    import gmr
    from gmr import _lib
    package = os.path.dirname(os.path.realpath(gmr.__file__))
    check(sys.prefix in package or os.path.realpath(sys.prefix) in package,
          "gmr imported from %s, not the virtual environment %s" % (package, sys.prefix))
    check(os.path.realpath(_lib.lib_path()).startswith(package), "libgmr from " + _lib.lib_path())
    check(not gmr.simulated() and gmr.device_count() >= 1, "no GPU seen")
    return "gmr %s, %s, %d device(s)" % (gmr.version(), _lib.lib_path(), gmr.device_count())


def item_torch():
    # The README's PyTorch example.
    import gmr.torch
    gmr.torch.use("tracking > limiting(limit=70GiB) > pool > cuda(kind=async)")  # before any CUDA use
    import torch
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(3):
        loss = model(torch.randn(256, 1024, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    stats = gmr.torch.stats()
    check(stats["peak_bytes"] and stats["peak_bytes"] > 0, "no peak: %r" % stats["peak_bytes"])
    from gmr import _lib
    c10 = bool(_lib.torch_lib().gmr_torch_raises_torch_errors())
    check(c10, "the shim was not built against PyTorch's headers at first use (%s)"
          % _lib.loaded_torch_lib_path())
    try:
        torch.empty(200 << 30, dtype=torch.uint8, device="cuda")
        raise AssertionError("200 GiB was allocated")
    except torch.cuda.OutOfMemoryError as e:
        check("gmr" in str(e), "OOM message without gmr's: %s" % e)
    return "trained 3 steps, peak %d bytes, per_stream %s, shim %s, OOM is torch.cuda.OutOfMemoryError" % (
        stats["peak_bytes"], sorted(stats["per_stream"]), _lib.loaded_torch_lib_path())


def item_cupy():
    import gmr.cupy
    import cupy
    gmr.cupy.use("tracking > pool > cuda(kind=async)")
    x = cupy.arange(1 << 20, dtype=cupy.float32)
    total = float((x * 2).sum())
    check(total == float(2 * sum(range(1 << 20))), "sum %r" % total)
    live = tracked(gmr.cupy.stats())
    check(live >= 4 * MIB, "tracking counts %d bytes" % live)
    return "cupy %s, sum right, %d bytes live in gmr" % (cupy.__version__, live)


def numba_kernels(cuda, np, gmr):
    """A kernel writes gmr memory, another reads it into more gmr memory."""

    @cuda.jit
    def write(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = i * 2

    @cuda.jit
    def read(a, b):
        i = cuda.grid(1)
        if i < a.size:
            b[i] = a[i] + 1

    n = 1 << 20
    a = cuda.device_array(n, dtype=np.int32)
    b = cuda.device_array(n, dtype=np.int32)
    write[(n + 255) // 256, 256](a)
    read[(n + 255) // 256, 256](a, b)
    got = b.copy_to_host()
    check((got == np.arange(n, dtype=np.int32) * 2 + 1).all(), "wrong values read back")
    manager = cuda.current_context().memory_manager
    check(isinstance(manager, gmr.numba.DeviceMemoryManager),
          "Numba's memory manager is %r" % type(manager))
    return a, b, manager


def item_numba_env():
    # NUMBA_CUDA_MEMORY_MANAGER=gmr.numba and GMR_STACK are set by reach_check.sh.
    import numpy as np
    from numba import cuda
    import gmr
    import gmr.numba
    a, b, manager = numba_kernels(cuda, np, gmr)
    live = tracked(gmr.stack_stats(0))
    check(live >= 8 * MIB, "tracking counts %d bytes, expected the arrays' 8 MiB" % live)
    with cuda.defer_cleanup():
        del a
        check(tracked(gmr.stack_stats(0)) == live, "freed inside defer_cleanup")
    check(tracked(gmr.stack_stats(0)) == live - 4 * MIB, "not freed after defer_cleanup")
    del b
    check(tracked(gmr.stack_stats(0)) == live - 8 * MIB, "not freed when dropped")
    free, total = cuda.current_context().get_memory_info()
    check(0 < free <= total, "memory info %r" % ((free, total),))
    return "kernels wrote and read gmr memory on %s; defer_cleanup held the free; info %d/%d" % (
        gmr.device_spec(0), free, total)


def item_numba_use():
    import numpy as np
    from numba import cuda
    import gmr
    import gmr.numba
    gmr.numba.use("tracking > pool > cuda(kind=device)")
    a, b, manager = numba_kernels(cuda, np, gmr)
    handle = a.get_ipc_handle()   # cudaMalloc memory under the pool: IPC works
    # Another process opens the handle and reads what the kernels wrote.
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as workers:
        seen = workers.apply(_ipc_read, (handle,))
    expected = a.copy_to_host()
    check(np.array_equal(seen, expected), "the other process read other values through IPC")
    return "set_memory_manager via gmr.numba.use; kernels ok; another process read %d bytes " \
        "through the IPC handle" % expected.nbytes


def _ipc_read(handle):
    """Open a numba IPC handle in this (child) process and copy its array out."""
    with handle as array:
        return array.copy_to_host()


def import_core():
    try:
        import cuda.core as core
        if hasattr(core, "MemoryResource"):
            return core
    except ImportError:
        pass
    import cuda.core.experimental as core
    return core


def item_cuda_core():
    import cupy
    import gmr
    import gmr.cuda_core
    core = import_core()
    dev = core.Device(0)
    dev.set_current()
    stream = dev.create_stream()
    mr = gmr.cuda_core.memory_resource(0, "tracking > pool > cuda(kind=async)")
    check(isinstance(mr, core.MemoryResource), "not a cuda.core MemoryResource")
    check((mr.device_id, mr.is_device_accessible, mr.is_host_accessible) == (0, True, False),
          "properties %r" % ((mr.device_id, mr.is_device_accessible, mr.is_host_accessible),))
    src = mr.allocate(4 * MIB, stream=stream)
    dst = mr.allocate(4 * MIB, stream=stream)
    check(tracked(gmr.stack_stats(0)) == 8 * MIB, "tracking counts %d" % tracked(gmr.stack_stats(0)))
    check(src.memory_resource is mr and src.is_device_accessible, "buffer properties")
    # Write through CuPy, copy with cuda.core, read through CuPy.
    n = MIB
    view = lambda buf: cupy.ndarray((n,), cupy.float32, cupy.cuda.MemoryPointer(
        cupy.cuda.UnownedMemory(int(buf.handle), buf.size, buf, 0), 0))
    with cupy.cuda.ExternalStream(int(stream.handle)):
        view(src)[:] = cupy.arange(n, dtype=cupy.float32)
    src.copy_to(dst, stream=stream)
    stream.sync()
    check(bool((view(dst) == cupy.arange(n, dtype=cupy.float32)).all()), "copy mismatch")
    src.close(stream)
    dst.close()
    cupy.cuda.Device(0).synchronize()
    check(tracked(gmr.stack_stats(0)) == 0, "not given back at close")
    extra = ""
    try:
        dev.memory_resource = mr   # code that allocates through the device's resource
        buf = dev.allocate(MIB, stream=stream)
        check(buf.memory_resource is mr and tracked(gmr.stack_stats(0)) == MIB, "dev.allocate")
        buf.close()
        extra = "; Device.allocate through it"
    except (AttributeError, TypeError) as e:
        extra = "; (Device.memory_resource cannot be set here: %s)" % e
    return "cuda.core %s: allocate/copy/close on a stream through gmr%s" % (
        getattr(core, "__version__", "?"), extra)


def item_cupy_on_cuda_core():
    import cupy
    import gmr
    import gmr.cuda_core
    core = import_core()
    core.Device(0).set_current()
    mr = gmr.cuda_core.memory_resource(0, "tracking > pool > cuda(kind=async)")
    cupy.cuda.set_allocator(gmr.cuda_core.cupy_allocator(mr))
    x = cupy.arange(1 << 20, dtype=cupy.float64)
    check(float(x.sum()) == float(sum(range(1 << 20))), "sum")
    live = tracked(gmr.stack_stats(0))
    check(live >= 8 * MIB, "tracking counts %d" % live)
    del x
    cupy.cuda.Device(0).synchronize()
    return "CuPy allocated %d bytes through the cuda.core MemoryResource" % live


ITEMS = {name[5:]: f for name, f in globals().items() if name.startswith("item_")}
NEEDS = {"torch": "torch", "cupy": "cupy", "numba_env": "numba", "numba_use": "numba",
         "cuda_core": "cupy", "cupy_on_cuda_core": "cupy"}


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in ITEMS:
        print("usage: reach_check.py {%s}" % ",".join(ITEMS))
        return 2
    module = NEEDS.get(name)
    if module:
        import importlib.util
        if importlib.util.find_spec(module) is None:
            print("SKIP %s: %s is not installed" % (name, module))
            return 0
    try:
        detail = ITEMS[name]()
    except Exception as e:  # noqa: BLE001 (reported, with its type)
        import traceback
        traceback.print_exc()
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        return 1
    print("PASS %s: %s" % (name, detail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
