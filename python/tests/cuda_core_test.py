"""gmr.cuda_core, a cuda.core MemoryResource over a gmr device stack, on the
simulation (GMR_CUDA_SIM=devices=2,memory=1GiB, set by run_python_test.sh)
against stand-in cuda.core and CuPy modules (standins.py): buffers, streams in
every form, both cuda.core layouts (`cuda.core` and the older
`cuda.core.experimental`), errors, and CuPy allocating through the resource.
Writes a JUnit XML report to $XML_OUTPUT_FILE when Bazel asks for one.
"""

import gc

import junit_runner
from standins import (FAKE_CORE_NEW, FAKE_CORE_OLD, FAKE_CUPY, MIB, FrameworkTest, stream,
                      tracked)

import gmr
import gmr.cuda_core


class CudaCoreWithoutMemoryResourcesTest(FrameworkTest):
    files = {"cuda/__init__.py": "", "cuda/core/__init__.py": ""}

    def test_a_cuda_core_without_memory_resources_is_named(self):
        with self.assertRaises(ImportError) as cm:
            gmr.cuda_core.resource_class()
        self.assertIn("cuda.core has no MemoryResource", str(cm.exception))
        self.assertIn("cuda.core.experimental", str(cm.exception))

class CudaCoreTest(FrameworkTest):
    files = FAKE_CORE_NEW

    def core(self):
        return gmr.cuda_core._import_core()

    def test_a_memory_resource_over_the_device_stack(self):
        core = self.core()
        mr = gmr.cuda_core.memory_resource(1, "tracking(per=stream) > pool > cuda(kind=async)")
        self.assertIsInstance(mr, core.MemoryResource)
        self.assertIs(gmr.cuda_core.GmrMemoryResource, type(mr))
        self.assertEqual((1, True, False, False), (mr.device_id, mr.is_device_accessible,
                                                    mr.is_host_accessible, mr.is_managed))
        self.assertEqual("tracking(per=stream) > pool > cuda(kind=async)", gmr.device_spec(1))
        s = stream()
        buf = mr.allocate(4096, stream=core.Stream(s))
        self.assertIs(mr, buf.memory_resource)
        self.assertEqual((4096, 1, True), (buf.size, buf.device_id, buf.is_device_accessible))
        self.assertNotEqual(0, buf.handle)
        owners = gmr.stack_stats(1)["layers"][1]["owners"]
        self.assertEqual(4096, owners["%#x" % s]["bytes"]["current"])
        buf.close()
        self.assertEqual(0, tracked(1))
        self.assertIn("device_id=1", repr(mr))

    def test_a_collected_buffer_goes_back(self):
        mr = gmr.cuda_core.memory_resource(0, "tracking > pool > cuda(kind=async)")
        buf = mr.allocate(MIB)
        self.assertEqual(MIB, tracked(0))
        del buf
        gc.collect()
        self.assertEqual(0, tracked(0))

    def test_streams_in_every_form(self):
        core = self.core()
        mr = gmr.cuda_core.memory_resource(0, "tracking(per=stream) > pool > cuda(kind=async)")
        s = stream()

        class Protocol:
            def __cuda_stream__(self):
                return (0, s)

        for form in (s, Protocol(), core.GraphBuilder(core.Stream(s))):
            with self.subTest(form=type(form).__name__):
                buf = mr.allocate(256, stream=form)
                if isinstance(form, core.GraphBuilder):   # handed to cuda.core as it is
                    self.assertIs(form, buf._stream)
                owners = gmr.stack_stats(0)["layers"][1]["owners"]
                self.assertEqual(256, owners["%#x" % s]["bytes"]["current"])
                buf.close()
        with self.assertRaises(TypeError) as cm:
            mr.allocate(256, stream="stream 1")
        self.assertIn("not a stream", str(cm.exception))
        self.assertEqual(0, tracked(0))

    def test_bad_devices_are_refused(self):
        cls = gmr.cuda_core.resource_class()
        for bad in (-1, "0", True, None):
            with self.subTest(device=bad):
                with self.assertRaises(ValueError) as cm:
                    cls(bad)
                self.assertIn("device_id must be", str(cm.exception))
        self.assertEqual(1, cls(self.core().Device(1)).device_id)
        self.core().Device.current = 1
        try:
            self.assertEqual(1, gmr.cuda_core.memory_resource().device_id)
        finally:
            self.core().Device.current = 0

    def test_out_of_memory_and_a_malformed_spec(self):
        mr = gmr.cuda_core.memory_resource(0, "tracking > limiting(limit=1MiB) > cuda(kind=async)")
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            mr.allocate(2 * MIB)
        self.assertIn("GMR_ERR_LIMIT_EXCEEDED", str(cm.exception))
        self.assertEqual(0, tracked(0))
        gmr.release_all()
        gmr.set_device_spec(None)
        with self.assertRaises(gmr.SpecError):
            gmr.cuda_core.memory_resource(0, "pool > cuda(kidn=async)")
        self.assertIsNone(gmr.device_spec(0))
        gmr.device_resource(0)   # the registry's spec stayed the default
        self.assertEqual(gmr.FRAMEWORK_DEFAULT_SPEC, gmr.device_spec(0))

    def test_a_device_that_does_not_exist(self):
        with self.assertRaises(gmr.GmrError) as cm:
            gmr.cuda_core.memory_resource(5, "pool > cuda(kind=async)")
        self.assertNotIsInstance(cm.exception, gmr.SpecError)
        self.assertIn("device 5", str(cm.exception))

    def test_a_failed_buffer_gives_the_memory_back(self):
        core = self.core()
        mr = gmr.cuda_core.memory_resource(0, "tracking > pool > cuda(kind=async)")
        core.FAIL_FROM_HANDLE.append(RuntimeError("no context is current"))
        with self.assertRaises(RuntimeError):
            mr.allocate(MIB)
        self.assertEqual(0, tracked(0))

    def test_a_bad_free_is_refused(self):
        mr = gmr.cuda_core.memory_resource(0, "tracking > cuda(kind=device)")
        with self.assertRaises(gmr.GmrError) as cm:
            mr.deallocate(0x1000, 64, None)
        self.assertEqual("GMR_ERR_UNKNOWN_POINTER", cm.exception.status)


class OlderCudaCoreTest(FrameworkTest):
    """cuda.core.experimental: no stream keyword in from_handle, the stream
    passed positionally to deallocate."""

    files = FAKE_CORE_OLD

    def test_allocate_and_close_on_a_stream(self):
        core = gmr.cuda_core._import_core()
        self.assertEqual("cuda.core.experimental", core.__name__)
        mr = gmr.cuda_core.memory_resource(0, "tracking(per=stream) > pool > cuda(kind=async)")
        s = stream()
        buf = mr.allocate(4096, core.Stream(s))
        self.assertEqual(4096, tracked(0))
        buf.close(core.Stream(s))
        self.assertEqual(0, tracked(0))
        buf = mr.allocate(4096)   # the default stream, closed on it
        del buf
        gc.collect()
        self.assertEqual(0, tracked(0))


class CupyOverCudaCoreTest(FrameworkTest):
    files = dict(FAKE_CORE_NEW, **FAKE_CUPY)

    def test_cupy_allocates_from_the_memory_resource_on_its_stream(self):
        import cupy  # noqa: PLC0415 (the stand-in)
        mr = gmr.cuda_core.memory_resource(1, "tracking(per=stream) > pool > cuda(kind=async)")
        s = stream()
        cupy.cuda.CURRENT[0] = cupy.cuda._Stream(s)
        allocate = gmr.cuda_core.cupy_allocator(mr)
        pointer = allocate(8192)
        self.assertNotEqual(0, pointer.ptr)
        self.assertEqual(1, pointer.mem.device_id)
        owners = gmr.stack_stats(1)["layers"][1]["owners"]
        self.assertEqual(8192, owners["%#x" % s]["bytes"]["current"])
        del pointer
        gc.collect()
        self.assertEqual(0, tracked(1))


if __name__ == "__main__":
    junit_runner.run(__name__, "gmr_cuda_core_python")
