"""gmr.numba, Numba's External Memory Management plugin, on the simulation
(GMR_CUDA_SIM=devices=2,memory=1GiB, set by run_python_test.sh) against a
stand-in numba module (standins.py): selection by use() and
NUMBA_CUDA_MEMORY_MANAGER, allocation and finalisers, deferred cleanup, reset,
memory info, IPC handles, pointer types of both bindings, and errors. Also
that gmr.numba and gmr.cuda_core import without their frameworks. Writes a
JUnit XML report to $XML_OUTPUT_FILE when Bazel asks for one.
"""

import contextlib
import ctypes
import gc
import importlib.util
import io
import os

import junit_runner
from standins import FAKE_BINDINGS, FAKE_NUMBA, MIB, FrameworkTest, forget_fakes, tracked

import gmr
import gmr.cuda_core
import gmr.numba
from gmr import _lib


class WithoutTheFrameworksTest(FrameworkTest):
    def test_the_modules_import_and_say_what_is_missing_when_used(self):
        if importlib.util.find_spec("numba") is None:
            with self.assertRaises(ImportError) as cm:
                gmr.numba.use()
            self.assertIn("gmr.numba needs Numba's CUDA target", str(cm.exception))
            with self.assertRaises(ImportError):
                getattr(gmr.numba, "_numba_memory_manager")
        if importlib.util.find_spec("cuda") is None:
            with self.assertRaises(ImportError) as cm:
                gmr.cuda_core.memory_resource(0)
            self.assertIn("gmr.cuda_core needs cuda.core", str(cm.exception))
        if importlib.util.find_spec("cupy") is None:
            with self.assertRaises(ImportError) as cm:
                gmr.cuda_core.cupy_allocator(object())
            self.assertIn("gmr.cupy needs CuPy", str(cm.exception))
        with self.assertRaises(AttributeError):
            getattr(gmr.numba, "no_such_name")
        with self.assertRaises(AttributeError):
            getattr(gmr.cuda_core, "no_such_name")

class NumbaTest(FrameworkTest):
    files = dict(FAKE_NUMBA, **FAKE_BINDINGS)

    def context(self, device=0):
        from numba.cuda.cudadrv import driver  # noqa: PLC0415 (the stand-in)
        return driver.Context(device)

    def test_use_makes_gmr_numbas_memory_manager(self):
        import numba.cuda  # noqa: PLC0415
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        ctx = self.context(1)
        manager = ctx.memory_manager
        self.assertIsInstance(manager, numba.cuda.HostOnlyCUDAMemoryManager)
        self.assertIsInstance(manager, gmr.numba.DeviceMemoryManager)
        self.assertEqual(1, manager.interface_version)
        self.assertEqual("tracking > pool > cuda(kind=async)", gmr.device_spec(1))
        pointer = manager.memalloc(MIB)
        self.assertNotEqual(0, pointer.device_pointer_value)
        self.assertEqual(MIB, pointer.size)
        self.assertEqual(MIB, tracked(1))
        self.assertEqual(1, manager.live_allocations())
        self.assertEqual(("host", 64), manager.memhostalloc(64))   # Numba's own
        del pointer
        gc.collect()
        self.assertEqual(0, tracked(1))
        self.assertEqual(0, manager.live_allocations())

    def test_numba_cuda_memory_manager_names_the_module(self):
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gmr.numba"
        ctx = self.context(0)
        self.assertIs(gmr.numba.memory_manager(), type(ctx.memory_manager))
        # No spec chosen: initialize() created the stack with the library's default.
        self.assertEqual(gmr.FRAMEWORK_DEFAULT_SPEC, gmr.device_spec(0))
        pointer = ctx.memory_manager.memalloc(4096)
        self.assertNotEqual(0, pointer.device_pointer_value)

    def test_gmr_stack_is_kept_when_set(self):
        os.environ["GMR_STACK"] = "tracking > cuda(kind=device)"
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gmr.numba"
        ctx = self.context(0)
        self.assertEqual("tracking > cuda(kind=device)", gmr.device_spec(0))
        pointer = ctx.memory_manager.memalloc(256)
        self.assertEqual(256, tracked(0))
        del pointer

    def test_pointer_types_of_both_bindings(self):
        gmr.numba.use("pool > cuda(kind=async)")
        pointer = self.context().memory_manager.memalloc(512)
        self.assertIsInstance(pointer.device_pointer, ctypes.c_uint64)
        forget_fakes()
        os.environ["FAKE_NUMBA_NV_BINDING"] = "1"
        gmr.numba.use()
        pointer = self.context().memory_manager.memalloc(512)
        self.assertEqual("CUdeviceptr", type(pointer.device_pointer).__name__)
        self.assertNotEqual(0, int(pointer.device_pointer))
        forget_fakes()
        os.environ["FAKE_NUMBA_NV_BINDING"] = "2"
        gmr.numba.use()
        pointer = self.context().memory_manager.memalloc(512)
        self.assertEqual("cuda.bindings.driver", type(pointer.device_pointer).__module__)
        self.assertNotEqual(0, int(pointer.device_pointer))

    def test_memory_outliving_its_manager_still_goes_back(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        ctx = self.context()
        pointer = ctx.memory_manager.memalloc(MIB)
        del ctx
        gc.collect()
        self.assertEqual(MIB, tracked(0))
        del pointer
        gc.collect()
        self.assertEqual(0, tracked(0))

    def test_zero_bytes_allocate_nothing(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        pointer = manager.memalloc(0)
        self.assertEqual(0, pointer.device_pointer_value)
        self.assertFalse(pointer.is_managed)
        self.assertEqual(0, manager.live_allocations())

    def test_defer_cleanup_holds_frees_until_the_outermost_block_ends(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        a, b = manager.memalloc(MIB), manager.memalloc(2 * MIB)
        with manager.defer_cleanup():
            self.assertEqual(1, manager.host_deferring)   # Numba's host deferral too
            with manager.defer_cleanup():
                del a
                gc.collect()
            self.assertEqual(3 * MIB, tracked(0))
            del b
            gc.collect()
            self.assertEqual(3 * MIB, tracked(0))
            self.assertEqual(2, manager.live_allocations())
        self.assertEqual(0, manager.host_deferring)
        self.assertEqual(0, tracked(0))
        self.assertEqual(0, manager.live_allocations())

    def test_defer_cleanup_gives_back_when_the_block_raises(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        a = manager.memalloc(MIB)
        with self.assertRaises(KeyError):
            with manager.defer_cleanup():
                del a
                gc.collect()
                raise KeyError("in the block")
        self.assertEqual(0, tracked(0))

    def test_reset_gives_everything_back_and_later_drops_free_nothing(self):
        gmr.numba.use("tracking > pool > cuda(kind=async)")
        manager = self.context().memory_manager
        a, b = manager.memalloc(MIB), manager.memalloc(MIB)
        manager.reset()
        self.assertEqual(1, manager.host_resets)
        self.assertEqual(0, tracked(0))
        c = manager.memalloc(MIB)   # may reuse a's address
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            del a, b
            gc.collect()
        self.assertEqual("", err.getvalue())
        self.assertEqual(MIB, tracked(0))
        del c

    def test_out_of_memory_raises_gmrs_error_and_keeps_nothing(self):
        gmr.numba.use("tracking > limiting(limit=1MiB) > cuda(kind=async)")
        manager = self.context().memory_manager
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            manager.memalloc(2 * MIB)
        self.assertIsInstance(cm.exception, MemoryError)
        self.assertIn("GMR_ERR_LIMIT_EXCEEDED", str(cm.exception))
        self.assertEqual(0, manager.live_allocations())

    def test_a_malformed_spec_changes_nothing(self):
        from numba.cuda.cudadrv import driver  # noqa: PLC0415
        with self.assertRaises(gmr.SpecError) as cm:
            gmr.numba.use("pool > cuda(kidn=async)")
        self.assertIn("kidn", str(cm.exception))
        self.assertIsNone(driver._memory_manager)
        self.assertIsNone(gmr.device_spec(0))
        gmr.device_resource(0)   # the registry's spec stayed the default
        self.assertEqual(gmr.FRAMEWORK_DEFAULT_SPEC, gmr.device_spec(0))

    def test_a_malformed_gmr_stack_fails_at_initialize(self):
        os.environ["GMR_STACK"] = "pool > cuda(kidn=async)"
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "gmr.numba"
        with self.assertRaises(gmr.SpecError) as cm:
            self.context(0)
        self.assertIn("GMR_STACK", str(cm.exception))

    def test_memory_info_counts_what_the_stack_holds_free(self):
        gmr.numba.use("pool > cuda(kind=async)")
        manager = self.context().memory_manager
        pointer = manager.memalloc(64 * MIB)
        del pointer
        gc.collect()
        info = manager.get_memory_info()
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.assertEqual(0, _lib.lib().gmr_device_get_memory_info(ctypes.byref(free),
                                                                  ctypes.byref(total)))
        cached = gmr.stack_stats(0)["memory"]["free_bytes"]
        self.assertGreaterEqual(cached, 64 * MIB)
        self.assertEqual(1 << 30, info.total)
        self.assertEqual(free.value + cached, info.free)

    def test_ipc_handles_and_the_stacks_that_have_none(self):
        from numba.cuda.cudadrv import driver  # noqa: PLC0415
        gmr.numba.use("pool > cuda(kind=device)")
        manager = self.context().memory_manager
        pointer = manager.memalloc(4096)
        self.assertEqual(4096, manager.get_ipc_handle(pointer).size)
        driver.IPC_FAILS.append("CUDA_ERROR_INVALID_VALUE")
        with self.assertRaises(gmr.GmrError) as cm:
            manager.get_ipc_handle(pointer)
        self.assertEqual("GMR_ERR_UNSUPPORTED", cm.exception.status)
        self.assertIn("cuda(kind=device)", str(cm.exception))
        self.assertIn("CUDA_ERROR_INVALID_VALUE", str(cm.exception))
        self.assertIn("pool > cuda(kind=device)", str(cm.exception))

    def test_the_instance_without_a_context_only_answers_its_version(self):
        cls = gmr.numba.memory_manager()
        dummy = cls(context=None)
        self.assertEqual(1, dummy.interface_version)
        with self.assertRaises(RuntimeError) as cm:
            dummy.memalloc(256)
        self.assertIn("no context", str(cm.exception))


if __name__ == "__main__":
    junit_runner.run(__name__, "gmr_numba_python")
