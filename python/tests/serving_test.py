"""gmr.serving (and its names in gmr.torch) on the simulation
(GMR_CUDA_SIM=devices=2,memory=1GiB, set by run_python_test.sh): regions tag
allocations, nested and per device; sleep backs up, keeps or discards tags and
gives the device memory back; wake restores backed-up bytes; a hundred cycles
hold no more device or pinned memory than one; info() answers per tag; bad
input (unknown tags, a second sleep, a wake without sleep, allocation while
asleep, sleep while the current stream captures, a stack without a vmm pool)
raises a clear exception and changes nothing; a wake without room fails,
then succeeds; pageable backups (the default) hold only the staging ring
pinned, kept backups are reused; reserved ranges commit and decommit at the
same addresses and sleep with their tag. The real PyTorch runs on the GPU machine
(tools/frameworks/serving_check.py). Writes a JUnit XML report to
$XML_OUTPUT_FILE when Bazel asks for one.
"""

import ctypes
import sys
import types
import unittest

import junit_runner

import gmr
import gmr.serving as serving
import gmr.torch
from gmr import _lib

MIB = 1 << 20


class SimUsage(ctypes.Structure):
    """gmr_cuda_sim_usage (gmr/sim/cuda_sim.h), for the checks only."""

    _fields_ = [("used_bytes", ctypes.c_size_t), ("peak_used_bytes", ctypes.c_size_t),
                ("allocation_count", ctypes.c_size_t), ("capacity_bytes", ctypes.c_size_t)]


def device_used(device=0):
    u = SimUsage()
    f = _lib.lib().gmr_cuda_sim_get_device_usage
    f.argtypes = [ctypes.c_int, ctypes.POINTER(SimUsage)]
    assert f(device, ctypes.byref(u)) == 0
    return u.used_bytes


def pinned_used():
    u = SimUsage()
    f = _lib.lib().gmr_cuda_sim_get_host_usage
    f.argtypes = [ctypes.POINTER(SimUsage)]
    assert f(ctypes.byref(u)) == 0
    return u.used_bytes


def fill(ptr, nbytes, seed):
    """Simulated device memory is host memory: write a pattern."""
    data = bytes((seed * 7 + i) % 251 for i in range(4096))
    for off in range(0, nbytes, 4096):
        n = min(4096, nbytes - off)
        ctypes.memmove(ptr + off, data, n)


def same(ptr, nbytes, seed):
    data = bytes((seed * 7 + i) % 251 for i in range(4096))
    for off in range(0, nbytes, 4096):
        n = min(4096, nbytes - off)
        if ctypes.string_at(ptr + off, n) != data[:n]:
            return False
    return True


class ServingTest(unittest.TestCase):
    def setUp(self):
        gmr.set_device_spec("vmm")

    def tearDown(self):
        for device in (0, 1):
            try:
                if gmr.device_spec(device) is not None and serving.is_asleep(device):
                    serving.wake(device=device)
            except gmr.GmrError:
                pass  # a stack without a vmm pool
        gmr.release_all()
        gmr.set_device_spec(None)

    def allocate(self, nbytes, tag=None, device=0, seed=None):
        if tag is None:
            ptr = gmr.allocate(device, nbytes)
        else:
            with serving.region(tag, device=device):
                ptr = gmr.allocate(device, nbytes)
        if seed is not None:
            fill(ptr, nbytes, seed)
        return ptr

    def test_regions_tag_sleep_backs_up_keeps_and_discards_and_wake_restores(self):
        weights = self.allocate(3 * MIB + 1000, "weights", seed=1)
        cache = self.allocate(4 * MIB, "kv_cache", seed=2)
        with serving.region("scratch"):
            with serving.region("weights"):
                inner = self.allocate(5000, seed=3)  # the inner region's tag
            scratch = self.allocate(2 * MIB, seed=4)  # back to the outer one
        untagged = self.allocate(1000, seed=5)
        figures = serving.info(0)
        self.assertEqual(2, figures["tags"]["weights"]["live_count"])
        self.assertEqual(1, figures["tags"]["scratch"]["live_count"])
        self.assertEqual(1, figures["tags"]["untagged"]["live_count"])
        self.assertEqual(0, figures["tags"]["graphs"]["live_count"])
        self.assertFalse(figures["asleep"])
        self.assertEqual(serving.tag_id("weights"), serving.tags()["weights"])
        self.assertEqual(0, serving.tag_id("untagged"))
        self.assertEqual(63, serving.tag_id("graphs"))

        serving.sleep(backup=["weights", "untagged"], keep=["scratch"], device=0)
        figures = serving.info(0)
        self.assertTrue(figures["asleep"])
        self.assertTrue(serving.is_asleep(0))
        self.assertFalse(figures["host_pinned"], "pageable backups by default")
        self.assertEqual(figures["host_bytes"], figures["host_pageable_bytes"])
        self.assertEqual(256 * MIB, figures["staging_bytes"])
        self.assertEqual(pinned_used(), figures["host_pinned_bytes"])
        self.assertEqual(pinned_used(), figures["staging_bytes"], "only the ring is pinned")
        self.assertEqual(0, figures["tags"]["kv_cache"]["saved_bytes"])
        self.assertEqual(1, figures["tags"]["scratch"]["live_count"])
        self.assertTrue(same(scratch, 2 * MIB, 4), "a kept tag keeps its bytes")
        self.assertEqual(figures["held_bytes"], device_used(0))
        with self.assertRaises(gmr.GmrError) as cm:
            gmr.allocate(0, 100)
        self.assertEqual("GMR_ERR_BUSY", cm.exception.status)
        self.assertIn("asleep", str(cm.exception))

        serving.wake(device=0)
        self.assertFalse(serving.is_asleep(0))
        for ptr, n, seed in ((weights, 3 * MIB + 1000, 1), (inner, 5000, 3),
                             (scratch, 2 * MIB, 4), (untagged, 1000, 5)):
            self.assertTrue(same(ptr, n, seed), (n, seed))
        fill(cache, 4 * MIB, 6)  # discarded: fresh memory, writable
        self.assertEqual(256 * MIB, pinned_used(), "awake: the staging ring, kept")
        self.assertEqual(0, serving.info(0)["host_pageable_bytes"])
        for ptr, n in ((weights, 3 * MIB + 1000), (cache, 4 * MIB), (inner, 5000),
                       (scratch, 2 * MIB), (untagged, 1000)):
            gmr.deallocate(0, ptr, n)

    def test_a_hundred_cycles_hold_no_more_memory_than_one(self):
        ptrs = [self.allocate(n, "weights", seed=i) for i, n in enumerate((MIB, 300 * 1024))]
        cache = self.allocate(2 * MIB, "kv_cache")
        first = {}  # host kind -> (device, pinned, host bytes) asleep at its first cycle
        for cycle in range(100):
            host = "pinned" if cycle % 2 else "pageable"  # the ring exists from cycle 0
            serving.sleep(backup=["weights"], host=host)
            now = (device_used(0), pinned_used(), serving.info(0)["host_bytes"])
            self.assertEqual(0, now[0], cycle)
            self.assertEqual(first.setdefault(host, now), now, cycle)
            serving.wake()
            self.assertEqual(serving.info(0)["staging_bytes"], pinned_used(), cycle)
            self.assertEqual(0, serving.info(0)["host_bytes"], cycle)
        self.assertEqual(256 * MIB, first["pageable"][1], "pageable copies pin the ring only")
        self.assertEqual(first["pinned"][2] + 256 * MIB, first["pinned"][1])
        self.assertTrue(same(ptrs[0], MIB, 0))
        self.assertTrue(same(ptrs[1], 300 * 1024, 1))
        gmr.deallocate(0, ptrs[0], MIB)
        gmr.deallocate(0, ptrs[1], 300 * 1024)
        gmr.deallocate(0, cache, 2 * MIB)

    def test_wake_by_tag_and_free_while_asleep(self):
        weights = self.allocate(MIB, "weights", seed=7)
        cache = self.allocate(MIB, "kv_cache")
        serving.sleep(backup=["weights"])
        serving.wake(tags=["weights"])
        self.assertTrue(same(weights, MIB, 7))
        self.assertTrue(serving.is_asleep(), "the KV cache still sleeps")
        gmr.deallocate(0, cache, MIB)  # freeing an asleep allocation is allowed
        with self.assertRaises(gmr.GmrError) as cm:
            gmr.deallocate(0, cache, MIB)
        self.assertEqual("GMR_ERR_DOUBLE_FREE", cm.exception.status)
        serving.wake(tags=["kv_cache"])
        self.assertFalse(serving.is_asleep())
        gmr.deallocate(0, weights, MIB)

    def test_bad_input_raises_and_changes_nothing(self):
        weights = self.allocate(MIB, "weights", seed=8)
        with self.assertRaises(gmr.GmrError) as cm:
            serving.wake()
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        self.assertIn("not asleep", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            serving.sleep(backup=["wieghts"])
        self.assertIn("known tags", str(cm.exception))
        self.assertIn("weights", str(cm.exception))
        with self.assertRaises(ValueError):
            serving.sleep(backup="weights")  # a str, not a list
        with self.assertRaises(ValueError):
            serving.sleep(backup=["weights"], keep=["weights"])
        with self.assertRaises(ValueError):
            serving.sleep(host="disk")
        with self.assertRaises(ValueError):
            serving.tag_id("")
        self.assertFalse(serving.is_asleep())
        serving.sleep(backup=["weights"])
        before = serving.info(0)
        with self.assertRaises(gmr.GmrError) as cm:
            serving.sleep(backup=["weights"])
        self.assertEqual("GMR_ERR_BUSY", cm.exception.status)
        self.assertIn("asleep already", str(cm.exception))
        self.assertEqual(before, serving.info(0))
        serving.wake()
        self.assertTrue(same(weights, MIB, 8))
        with self.assertRaises(gmr.GmrError) as cm:
            serving.tag_tensor(weights + 256, "weights")
        self.assertEqual("GMR_ERR_UNKNOWN_POINTER", cm.exception.status)
        serving.tag_tensor(weights, "kv_cache")
        self.assertEqual(1, serving.info(0)["tags"]["kv_cache"]["live_count"])
        gmr.deallocate(0, weights, MIB)

    def test_sleep_refuses_while_the_current_stream_captures(self):
        weights = self.allocate(MIB, "weights", seed=9)
        fake = types.ModuleType("torch")
        fake.cuda = types.SimpleNamespace(is_initialized=lambda: True,
                                          is_current_stream_capturing=lambda: True,
                                          current_device=lambda: 0)
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake
        try:
            with self.assertRaises(RuntimeError) as cm:
                serving.sleep(backup=["weights"])
            self.assertIn("capturing", str(cm.exception))
            self.assertFalse(serving.is_asleep())
            fake.cuda.is_current_stream_capturing = lambda: False
            serving.sleep(backup=["weights"])
            fake.cuda.is_current_stream_capturing = lambda: True
            with self.assertRaises(RuntimeError) as cm:
                serving.wake()
            self.assertIn("gmr.serving.wake", str(cm.exception))
            self.assertTrue(serving.is_asleep())
            fake.cuda.is_current_stream_capturing = lambda: False
            serving.wake()
            self.assertTrue(same(weights, MIB, 9))
        finally:
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved
        self.assertFalse(serving.is_asleep())
        gmr.deallocate(0, weights, MIB)

    def test_a_stack_without_a_vmm_pool_says_what_to_use(self):
        gmr.set_device_spec("pool > cuda(kind=async)")
        with self.assertRaises(gmr.GmrError) as cm:
            with serving.region("weights", device=1):
                pass
        self.assertEqual("GMR_ERR_UNSUPPORTED", cm.exception.status)
        self.assertIn("'vmm'", str(cm.exception))
        self.assertIn("pool > cuda(kind=async)", str(cm.exception))

    def test_devices_sleep_apart(self):
        a = self.allocate(MIB, "weights", device=0, seed=10)
        b = self.allocate(MIB, "weights", device=1, seed=11)
        serving.sleep(backup=["weights"], device=1)
        self.assertTrue(serving.is_asleep(1))
        self.assertFalse(serving.is_asleep(0))
        self.assertEqual(0, device_used(1))
        fill(a, MIB, 12)  # device 0 runs on
        serving.wake(device=1)
        self.assertTrue(same(b, MIB, 11))
        gmr.deallocate(0, a, MIB)
        gmr.deallocate(1, b, MIB)

    def test_a_wake_without_room_fails_then_succeeds(self):
        weights = self.allocate(128 * MIB, "weights", seed=13)
        serving.sleep(backup=["weights"])
        # Another user takes most of device 0 meanwhile: a plain cudaMalloc
        # through a second stack made by hand.
        stack = ctypes.c_void_p()
        err = gmr._capi.SpecErrorStruct()
        create = _lib.lib().gmr_stack_create
        create.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                           ctypes.POINTER(gmr._capi.SpecErrorStruct)]
        self.assertEqual(0, create(b"cuda(kind=device)", ctypes.byref(stack), ctypes.byref(err)))
        as_resource = _lib.lib().gmr_stack_as_resource
        as_resource.restype = ctypes.c_void_p
        as_resource.argtypes = [ctypes.c_void_p]
        top = as_resource(stack)
        hog = ctypes.c_void_p()
        failure = gmr._capi.FailureStruct()
        self.assertEqual(0, _lib.lib().gmr_resource_allocate_ex(
            top, 950 * MIB, 0, None, ctypes.byref(hog), ctypes.byref(failure)))
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            serving.wake()
        self.assertIn("wake again", str(cm.exception))
        self.assertTrue(serving.is_asleep())
        self.assertEqual(128 * MIB, serving.info(0)["host_bytes"])
        self.assertEqual(0, _lib.lib().gmr_resource_deallocate(top, hog, 950 * MIB, 0, None))
        destroy = _lib.lib().gmr_stack_destroy
        destroy.argtypes = [ctypes.c_void_p]
        self.assertEqual(0, destroy(stack))
        serving.wake()
        self.assertTrue(same(weights, 128 * MIB, 13))
        gmr.deallocate(0, weights, 128 * MIB)

    def test_kept_backups_are_reused_and_held_while_awake(self):
        weights = self.allocate(3 * MIB, "weights", seed=14)
        serving.sleep(backup=["weights"], host="pinned", keep_backup=True)
        serving.wake()
        figures = serving.info(0)
        self.assertEqual(3 * MIB, figures["kept_backup_bytes"])
        self.assertEqual(3 * MIB, pinned_used(), "kept pinned while awake, as asked")
        fill(weights, 3 * MIB, 15)
        serving.sleep(backup=["weights"], host="pinned", keep_backup=False)
        self.assertEqual(3 * MIB, pinned_used(), "the kept backup was reused")
        serving.wake()
        self.assertTrue(same(weights, 3 * MIB, 15))
        self.assertEqual(0, pinned_used())
        with self.assertRaises(ValueError):
            serving.sleep(backup=["weights"], staging_bytes=-1)
        serving.sleep(backup=["weights"], staging_bytes=2 * MIB, copy_threads=3)
        self.assertEqual(2 * MIB, serving.info(0)["staging_bytes"])
        serving.wake()
        self.assertTrue(same(weights, 3 * MIB, 15))
        gmr.deallocate(0, weights, 3 * MIB)

    def test_a_range_commits_and_decommits_at_the_same_addresses(self):
        kv = serving.reserve(64 * MIB, tag="kv_cache")
        self.assertEqual(64 * MIB, kv.nbytes)
        self.assertEqual(2 * MIB, kv.page_bytes)
        self.assertEqual(0, kv.committed())
        used = device_used(0)
        kv.commit(0, 4 * MIB)  # a little before the capture
        fill(kv.ptr, 4 * MIB, 16)
        kv.commit(0, 32 * MIB)  # the final size: the first pages keep their bytes
        self.assertTrue(same(kv.ptr, 4 * MIB, 16))
        self.assertEqual(32 * MIB, kv.committed())
        self.assertEqual(2 * MIB, kv.committed(3 * MIB, 3 * MIB) - MIB)
        self.assertEqual(used + 32 * MIB, device_used(0))
        kv.decommit(8 * MIB, 8 * MIB)
        self.assertEqual(24 * MIB, kv.committed())
        self.assertEqual(0, kv.committed(8 * MIB, 8 * MIB))
        info = serving.info(0)
        self.assertEqual(1, info["ranges"]["count"])
        self.assertEqual(24 * MIB, info["ranges"]["committed_bytes"])
        self.assertEqual(24 * MIB, info["tags"]["kv_cache"]["live_bytes"])
        with self.assertRaises(gmr.GmrError) as cm:
            kv.commit(60 * MIB, 8 * MIB)
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        self.assertIn("past the range", str(cm.exception))
        with self.assertRaises(gmr.GmrError) as cm:
            kv.decommit(8 * MIB, 2 * MIB)
        self.assertIn("not committed", str(cm.exception))
        with self.assertRaises(gmr.OutOfMemoryError):
            big = serving.reserve(2048 * MIB)
            try:
                big.commit()  # more than the simulated 1 GiB device
            finally:
                self.assertEqual(0, big.committed(), "nothing committed")
                big.free()
        # The range sleeps and wakes with its tag.
        serving.sleep(backup=["kv_cache"])
        self.assertTrue(kv.info()["asleep"])
        self.assertEqual(used, device_used(0))
        with self.assertRaises(gmr.GmrError) as cm:
            kv.commit(8 * MIB, 2 * MIB)
        self.assertEqual("GMR_ERR_BUSY", cm.exception.status)
        serving.wake()
        self.assertTrue(same(kv.ptr, 4 * MIB, 16))
        self.assertEqual(0, kv.live_views())
        kv.free()
        kv.free()  # a second free does nothing
        self.assertEqual(used, device_used(0))
        with self.assertRaises(RuntimeError):
            kv.commit()
        with self.assertRaises(ValueError):
            serving.reserve(0)

    def test_gmr_torch_has_the_same_functions(self):
        for name in ("region", "sleep", "wake", "is_asleep", "tag_tensor", "reserve"):
            self.assertIs(getattr(serving, name), getattr(gmr.torch, name))
        self.assertIs(serving.info, gmr.torch.sleep_info)


if __name__ == "__main__":
    junit_runner.run(__name__, "gmr_serving_python")
