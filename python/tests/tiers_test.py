"""gmr.scoped and gmr.tiers on the simulation (GMR_CUDA_SIM=devices=2,memory=1GiB,
set by run_python_test.sh): scopes as context managers (same addresses every
iteration, nesting, orphans), reset and empty, device and thread mismatch,
pools per thread; a tier manager with GPU, HOST and DISK spaces, every
strategy, reservations bound to streams under each limit policy, blocking,
waking, timeouts, shutdown, and bad input. The ctypes structs are checked
against the C defaults so a layout drift fails here. Writes a JUnit XML report
to $XML_OUTPUT_FILE when Bazel asks for one.
"""

import ctypes
import threading
import time
import unittest

import junit_runner

import gmr
import gmr.scoped
import gmr.tiers as tiers
from gmr import _lib

KIB = 1 << 10
MIB = 1 << 20


class ScopedTest(unittest.TestCase):
    def setUp(self):
        self.reg = gmr.scoped.Registry("pool > cuda(kind=async)", chunk_bytes=1 * MIB)

    def tearDown(self):
        self.reg.close()

    def test_scopes_give_everything_back_at_the_same_addresses(self):
        pool = self.reg.pool()
        self.assertEqual(0, pool.device)
        self.assertIsNotNone(pool.resource)
        first = None
        for _ in range(3):
            with self.reg.scope() as scope:
                self.assertEqual(1, self.reg.depth())
                got = [pool.allocate(n) for n in (1000, 4096, 300, 65536)]
                self.assertEqual(4, len(set(got)))
                self.assertTrue(all(p % 256 == 0 for p in got))
            self.assertEqual(4, scope.released_count)
            if first is None:
                first = got
            self.assertEqual(first, got)
        self.assertEqual(0, self.reg.depth())
        s = pool.stats()
        self.assertEqual(0, s["live_count"])
        self.assertEqual(3, s["rewind_count"])
        self.assertEqual(12, s["released_count"])
        self.assertEqual(12, s["allocation_count"])
        self.assertEqual(1 * MIB, s["held_bytes"])
        self.assertEqual(0, pool.allocate(0))

    def test_nested_scopes_and_orphans(self):
        pool = self.reg.pool()
        outer = self.reg.scope().enter()
        a = pool.allocate(KIB)
        with self.reg.scope() as inner:
            self.assertEqual(2, inner.depth)
            pool.allocate(KIB)
        self.assertEqual(1, inner.released_count)
        self.assertEqual(1, pool.stats()["live_count"])
        orphan = self.reg.scope().enter()
        pool.allocate(KIB)
        self.assertEqual(2, outer.exit())  # closes the orphan too
        self.assertEqual(1, self.reg.stats()["orphan_scope_count"])
        with self.assertRaises(gmr.GmrError) as cm:
            orphan.exit()
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        with self.assertRaises(gmr.GmrError) as cm:
            pool.deallocate(a, KIB)
        self.assertEqual("GMR_ERR_DOUBLE_FREE", cm.exception.status)
        with self.assertRaises(ValueError):
            outer.enter()  # a scope is entered once

    def test_a_scope_exits_on_an_exception(self):
        pool = self.reg.pool()
        with self.assertRaises(KeyError):
            with self.reg.scope():
                pool.allocate(KIB)
                raise KeyError("inside")
        self.assertEqual(0, self.reg.depth())
        self.assertEqual(0, pool.stats()["live_count"])

    def test_reset_keeps_the_memory_empty_gives_it_back(self):
        pool = self.reg.pool()
        for _ in range(3):
            pool.allocate(512 * KIB)
        self.assertEqual(3, pool.reset())
        s = pool.stats()
        self.assertEqual(0, s["live_count"])
        self.assertEqual(2 * MIB, s["held_bytes"])
        self.assertEqual(2 * MIB, pool.empty())
        s = pool.stats()
        self.assertEqual(0, s["held_bytes"])
        self.assertEqual(2, s["reset_count"])  # empty resets first
        self.assertEqual(1, s["empty_count"])

    def test_a_pool_refuses_another_device_and_another_thread(self):
        other_device = self.reg.pool(device=1)
        self.assertEqual(1, other_device.device)
        with self.assertRaises(gmr.GmrError) as cm:
            other_device.allocate(KIB)  # device 0 is current
        self.assertEqual("GMR_ERR_WRONG_DEVICE", cm.exception.status)
        self.assertIn("device 0 is current", str(cm.exception))
        self.assertEqual(1, other_device.stats()["wrong_device_count"])
        pool = self.reg.pool()
        mine = pool.allocate(KIB)
        seen = {}

        def intruder():
            try:
                pool.allocate(64)
            except gmr.GmrError as e:
                seen["allocate"] = e.status
            try:
                pool.reset()
            except gmr.GmrError as e:
                seen["reset"] = e.status
            pool.deallocate(mine, KIB)  # any thread may free
            seen["freed"] = True

        t = threading.Thread(target=intruder)
        t.start()
        t.join()
        self.assertEqual({"allocate": "GMR_ERR_INVALID_ARGUMENT",
                          "reset": "GMR_ERR_INVALID_ARGUMENT", "freed": True}, seen)
        self.assertEqual(0, pool.stats()["live_count"])

    def test_threads_each_get_their_own_pool(self):
        threads, iterations = 4, 20
        results = [None] * threads
        errors = []
        done = threading.Barrier(threads)

        def work(k):
            try:
                pool = self.reg.pool()
                first = None
                for _ in range(iterations):
                    with self.reg.scope():
                        got = [pool.allocate(256 * (j + 1) + k) for j in range(5)]
                    if first is None:
                        first = got
                    elif got != first:
                        errors.append("thread %d: addresses moved" % k)
                results[k] = (pool.handle, first)
                done.wait()  # every pool alive at once
            except Exception as e:  # noqa: BLE001  (reported below)
                errors.append(repr(e))

        ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual([], errors)
        self.assertEqual(threads, len({r[0] for r in results}))
        blocks = [p for r in results for p in r[1]]
        self.assertEqual(threads * 5, len(set(blocks)))
        # Pools retire with their threads: in the threads' TLS destructors,
        # which may still be running when join() returns (Python's join
        # waits for the Python-level thread, not the OS thread's exit).
        deadline = time.monotonic() + 30
        while self.reg.stats()["pools_retired"] < threads and time.monotonic() < deadline:
            time.sleep(0.001)
        s = self.reg.stats()
        self.assertEqual(threads, s["pools_created"])
        self.assertEqual(threads, s["pools_retired"])
        self.assertEqual(0, s["pool_count"])

    def test_close_refuses_while_a_scope_is_open(self):
        scope = self.reg.scope().enter()
        with self.assertRaises(gmr.GmrError) as cm:
            self.reg.close()
        self.assertEqual("GMR_ERR_BUSY", cm.exception.status)
        scope.exit()
        self.reg.close()
        self.reg.close()  # twice: a no-op
        with self.assertRaises(ValueError):
            self.reg.pool()
        self.reg = gmr.scoped.Registry("cuda(kind=device)")  # for tearDown

    def test_a_registry_over_borrowed_resources(self):
        try:
            with gmr.scoped.Registry(resources=[gmr.device_resource(0), None]) as reg:
                pool = reg.pool()
                with reg.scope():
                    pool.allocate(4 * KIB)
                with self.assertRaises(gmr.GmrError) as cm:
                    reg.pool(device=1)
                self.assertEqual("GMR_ERR_UNSUPPORTED", cm.exception.status)
                pool.empty()
        finally:
            gmr.release_all()

    def test_bad_arguments(self):
        with self.assertRaises(gmr.SpecError) as cm:
            gmr.scoped.Registry("pool > cuda(kidn=async)")
        self.assertIn("kidn", str(cm.exception))
        with self.assertRaises(gmr.GmrError) as cm:
            gmr.scoped.Registry("cuda(kind=device)", alignment=128)
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        with self.assertRaises(ValueError):
            gmr.scoped.Registry()
        with self.assertRaises(gmr.GmrError) as cm:
            self.reg.pool(device=7)
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        small = gmr.scoped.Registry("cuda(kind=device)", chunk_bytes=64 * KIB,
                                    max_capacity_bytes=64 * KIB)
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            small.pool().allocate(128 * KIB)
        # The scoped pool's refusal, naming its option (not the graph arena's).
        self.assertIn("scoped_pool (device 0)", str(cm.exception))
        self.assertIn("gmr_scope_registry_config.max_capacity_bytes = 65536",
                      str(cm.exception))
        self.assertNotIn("graph_arena", str(cm.exception))
        small.close()


class TiersTest(unittest.TestCase):
    def make(self, **gpu_fields):
        gpu = dict(capacity_bytes=64 * MIB, reservation_limit_fraction=1.0, stream_count=2)
        gpu.update(gpu_fields)
        self.m = tiers.Manager([
            tiers.space_config("GPU", 0, **gpu),
            tiers.space_config("HOST", 0, capacity_bytes=16 * MIB, reservation_limit_fraction=1.0,
                               numa_node=-1, block_bytes=64 * KIB, blocks_per_chunk=4,
                               initial_chunk_count=0, stream_count=1),
        ])
        return self.m

    def tearDown(self):
        m = getattr(self, "m", None)
        if m is not None:
            m.close()

    def test_the_config_struct_matches_the_c_defaults(self):
        g = tiers.space_config("GPU", 1)
        self.assertEqual((0, 1), (g.id.tier, g.id.index))
        self.assertAlmostEqual(0.85, g.reservation_limit_fraction)
        self.assertAlmostEqual(0.85, g.downgrade_trigger_fraction)
        self.assertAlmostEqual(0.65, g.downgrade_stop_fraction)
        self.assertEqual(1024, g.max_stream_slots)
        # "fail" on purpose, where cuCascade's default is "ignore".
        self.assertEqual(b"fail", ctypes.string_at(g.on_limit.name))
        self.assertEqual(b"fail", ctypes.string_at(g.on_oom.name))
        self.assertEqual(16, g.stream_count)
        self.assertEqual(-1, g.stream_device)
        self.assertEqual(-1, g.downgrade_numa_node)
        self.assertEqual(-1, g.numa_node)
        h = tiers.space_config("host", 3)
        self.assertEqual(3, h.numa_node)
        self.assertEqual(1 * MIB, h.block_bytes)
        self.assertEqual(128, h.blocks_per_chunk)
        self.assertEqual(4, h.initial_chunk_count)
        self.assertEqual(b"", h.mount_path)
        self.assertEqual(0, tiers.space_config("DISK", 0).stream_count)
        inc = tiers.space_config("GPU", 0, on_limit="increase", on_oom="trim_retry")
        self.assertEqual(b"increase", ctypes.string_at(inc.on_limit.name))
        self.assertAlmostEqual(1.25, inc.on_limit.padding_factor)
        self.assertEqual(b"trim_retry", ctypes.string_at(inc.on_oom.name))

    def test_a_reservation_bound_to_a_stream(self):
        m = self.make()
        gpu = m.space("GPU", 0)
        self.assertEqual(("GPU", 0), gpu.id)
        self.assertEqual(64 * MIB, gpu.capacity_bytes)
        stream = gpu.acquire_stream()
        with m.reserve("GPU", 1 * MIB) as r:
            self.assertEqual(gpu.id, r.space.id)
            self.assertEqual(1 * MIB, r.nbytes)
            r.bind(stream)
            p = gpu.allocate(512 * KIB, stream)
            info = r.info()
            self.assertTrue(info["bound"])
            self.assertEqual(stream, info["stream"])
            self.assertEqual(512 * KIB, info["allocated_bytes"])
            with self.assertRaises(gmr.OutOfMemoryError) as cm:
                gpu.allocate(1 * MIB, stream)  # past the reservation: `fail`
            self.assertEqual("GMR_ERR_LIMIT_EXCEEDED", cm.exception.status)
            self.assertEqual(1, r.info()["refusal_count"])
            s = gpu.stats()
            self.assertEqual(1 * MIB, s["reserved_bytes"])
            self.assertEqual(512 * KIB, s["reserved_allocated_bytes"])
            self.assertEqual(63 * MIB, gpu.available_bytes)
            gpu.deallocate(p, 512 * KIB, stream)
        self.assertTrue(r.released)
        with self.assertRaises(gmr.GmrError) as cm:
            r.release()
        self.assertEqual("GMR_ERR_DOUBLE_FREE", cm.exception.status)
        gpu.release_stream(stream)
        s = m.stats()
        self.assertEqual(1, s["reserve_count"])
        self.assertEqual(1, s["immediate_reserve_count"])
        self.assertEqual(0, s["reservation_count"])

    def test_limit_policies_per_binding(self):
        m = self.make()
        gpu = m.space("GPU", 0)
        s1, s2 = gpu.acquire_stream(), gpu.acquire_stream()
        grows = m.try_reserve(("GPU", 0), 64 * KIB)
        grows.bind(s1, on_limit="increase")
        lets = m.try_reserve(("GPU", 0), 64 * KIB)
        lets.bind(s2, on_limit="ignore")
        a = gpu.allocate(128 * KIB, s1)
        self.assertGreaterEqual(grows.nbytes, 128 * KIB)
        self.assertEqual(1, grows.info()["raise_count"])
        b = gpu.allocate(128 * KIB, s2)
        self.assertEqual(64 * KIB, lets.nbytes)
        self.assertEqual(1, lets.info()["overage_count"])
        with m.try_reserve("GPU", KIB) as other:
            with self.assertRaises(ValueError):
                other.bind(s1, on_limit="lenient")
            with self.assertRaises(gmr.GmrError) as cm:
                other.bind(s1)  # s1 has a reservation already
            self.assertEqual("GMR_ERR_BUSY", cm.exception.status)
            self.assertFalse(other.info()["bound"])
        gpu.deallocate(a, 128 * KIB, s1)
        gpu.deallocate(b, 128 * KIB, s2)
        for r in (grows, lets):
            r.unbind()
            self.assertFalse(r.info()["bound"])
            r.release()
        gpu.release_stream(s1)
        gpu.release_stream(s2)

    def test_the_reservations_policy_is_asked_before_the_capacity(self):
        m = self.make(capacity_bytes=1 * MIB)
        gpu = m.space("GPU", 0)
        s1, s2 = gpu.acquire_stream(), gpu.acquire_stream()
        r = m.try_reserve(("GPU", 0), 128 * KIB)
        r.bind(s1, on_limit="increase")
        other = gpu.allocate(768 * KIB, s2)  # untracked: 128 KiB left to reserve
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            gpu.allocate(512 * KIB, s1)  # past the reservation and the capacity
        self.assertIn("the capacity of 1048576 bytes refused 524288 bytes", str(cm.exception))
        self.assertIn("policy increase grew it by 131072 to 262144 bytes", str(cm.exception))
        info = r.info()
        self.assertEqual(256 * KIB, info["bytes"])  # the partial growth is kept
        self.assertEqual(1, info["raise_count"])
        self.assertEqual(256 * KIB, gpu.stats()["reserved_bytes"])
        gpu.deallocate(other, 768 * KIB, s2)
        r.release()
        gpu.release_stream(s1)
        gpu.release_stream(s2)

    def test_strategies(self):
        m = self.make()
        big = m.try_reserve("GPU", 60 * MIB)
        r = m.try_reserve(["GPU", "HOST"], 8 * MIB)  # the GPU is full: HOST
        self.assertEqual(("HOST", 0), r.space.id)
        d = m.try_reserve(tiers.downgrade(("GPU", 0)), 1 * MIB)
        self.assertEqual(("HOST", 0), d.space.id)
        d2 = m.try_reserve(tiers.downgrade(("GPU", 0), "HOST"), 1 * MIB)
        self.assertEqual(("HOST", 0), d2.space.id)
        up_to = m.reserve_up_to("GPU", 10 * MIB)
        self.assertEqual(4 * MIB, up_to.nbytes)
        # Nothing left: a reservation of 0 bytes that can grow (cuCascade's).
        zero = m.reserve_up_to("GPU", 1 * MIB)
        self.assertEqual(0, zero.nbytes)
        self.assertEqual(("GPU", 0), zero.space.id)
        with self.assertRaises(gmr.OutOfMemoryError):
            zero.grow(KIB)
        up_to.release()
        zero.grow(1 * MIB)
        self.assertEqual(1 * MIB, zero.nbytes)
        zero.release()
        up_to = m.try_reserve("GPU", 4 * MIB)
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            m.try_reserve("GPU", 1 * MIB)
        self.assertIn("available", str(cm.exception))
        with self.assertRaises(gmr.OutOfMemoryError) as cm:
            m.reserve("GPU", 65 * MIB)
        self.assertIn("could never fit", str(cm.exception))
        with self.assertRaises(gmr.GmrError) as cm:
            m.reserve(("GPU", 0), 1 * MIB, timeout=0.01)
        self.assertEqual("GMR_ERR_TIMEOUT", cm.exception.status)
        with self.assertRaises(gmr.GmrError) as cm:
            m.try_reserve(("GPU", 5), KIB)
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        with self.assertRaises(ValueError):
            m.try_reserve("SSD", KIB)
        for x in (big, r, d, d2, up_to):
            x.release()
        self.assertEqual(1, m.stats()["timeout_count"])

    def test_a_blocked_reserve_wakes_on_release_and_on_shutdown(self):
        m = self.make()
        big = m.try_reserve("GPU", 60 * MIB)
        got = {}

        def waiter(key):
            try:
                got[key] = m.reserve("GPU", 8 * MIB)
            except gmr.GmrError as e:
                got[key] = e.status

        t = threading.Thread(target=waiter, args=("first",))
        t.start()
        while m.stats()["waiter_count"] < 1:
            time.sleep(0.001)
        big.release()
        t.join()
        self.assertIsInstance(got["first"], tiers.Reservation)
        s = m.stats()
        self.assertEqual(1, s["wait_count"])
        self.assertEqual(2, s["reserve_count"])
        self.assertEqual(1, s["immediate_reserve_count"])
        self.assertGreaterEqual(s["reserve_latency_ns"], s["immediate_reserve_latency_ns"])
        full = m.try_reserve("GPU", 56 * MIB)
        t = threading.Thread(target=waiter, args=("second",))
        t.start()
        while m.stats()["waiter_count"] < 1:
            time.sleep(0.001)
        m.shutdown()
        t.join()
        self.assertEqual("GMR_ERR_SHUTDOWN", got["second"])
        self.assertTrue(m.stats()["shut_down"])
        got["first"].release()
        full.release()

    def test_required_reservations_downgrade_state_and_disk(self):
        self.m = tiers.Manager([
            tiers.space_config("GPU", 0, capacity_bytes=4 * MIB, require_reservation=True,
                               downgrade_trigger_fraction=0.5, downgrade_stop_fraction=0.25,
                               reservation_limit_fraction=1.0, stream_count=1),
            tiers.space_config("DISK", 0, capacity_bytes=1 << 30, mount_path="/tmp"),
        ])
        gpu = self.m.space("GPU", 0)
        s = gpu.acquire_stream()
        with self.assertRaises(gmr.GmrError) as cm:
            gpu.allocate(KIB, s)
        self.assertEqual("GMR_ERR_NO_RESERVATION", cm.exception.status)
        self.assertEqual(1, gpu.stats()["no_reservation_count"])
        with self.m.reserve("GPU", 3 * MIB) as r:
            self.assertEqual((True, 2 * MIB), gpu.poll_downgrade())
        self.assertEqual((False, 0), gpu.poll_downgrade())
        with self.m.try_reserve("DISK", 1 * MIB) as d:
            self.assertTrue(d.info()["path"].startswith("/tmp/gmr-"))
            with self.assertRaises(gmr.GmrError) as cm:
                d.grow(KIB)
            self.assertEqual("GMR_ERR_UNSUPPORTED", cm.exception.status)
            with self.assertRaises(gmr.GmrError) as cm:
                self.m.space("DISK", 0).allocate(KIB)
            self.assertEqual("GMR_ERR_UNSUPPORTED", cm.exception.status)
        gpu.release_stream(s)

    def test_grow_shrink_and_close_refused_while_busy(self):
        m = self.make()
        r = m.try_reserve("GPU", 1 * MIB)
        r.grow(1 * MIB)
        self.assertEqual(2 * MIB, r.nbytes)
        r.shrink(512 * KIB)
        self.assertEqual(512 * KIB, r.nbytes)
        with self.assertRaises(gmr.GmrError) as cm:
            r.shrink(1 * MIB)  # not a shrink
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        with self.assertRaises(gmr.OutOfMemoryError):
            r.grow(64 * MIB)
        with self.assertRaises(gmr.GmrError) as cm:
            m.close()  # a reservation cannot outlive its manager
        self.assertEqual("GMR_ERR_BUSY", cm.exception.status)
        self.assertEqual(512 * KIB, r.nbytes)  # both still work
        self.assertEqual(1, m.stats()["reservation_count"])
        r.release()
        m.close()
        m.close()
        with self.assertRaises(ValueError):
            m.stats()
        self.m = None

    def test_bad_configs(self):
        with self.assertRaises(gmr.GmrError) as cm:
            tiers.Manager([tiers.space_config("GPU", 0), tiers.space_config("GPU", 0)])
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        self.assertIn("both name space", str(cm.exception))
        with self.assertRaises(gmr.GmrError) as cm:
            tiers.Manager([tiers.space_config("GPU", 0, downgrade_stop_fraction=0.9)])
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        with self.assertRaises(gmr.GmrError) as cm:
            tiers.Manager([tiers.space_config("GPU", 0, stack_spec="pool > cuda(kind=bogus)")])
        self.assertIn("bogus", str(cm.exception))
        with self.assertRaises(TypeError):
            tiers.space_config("GPU", 0, capacity=1)
        with self.assertRaises(ValueError):
            tiers.space_config("GPU", 0, on_limit="lenient")
        with self.assertRaises(ValueError):
            tiers.space_config("GPU", 0, stack_spec="x" * 300)
        with self.assertRaises(ValueError):
            tiers.space_config("TAPE", 0)
        # Capacities that cannot be real; a GPU capacity above the device's
        # memory (the simulation's devices have 1 GiB).
        for tier, capacity in (("GPU", (1 << 64) - 1), ("HOST", (1 << 62)),
                               ("DISK", (1 << 64) - 1)):
            with self.assertRaises(gmr.GmrError) as cm:
                tiers.Manager([tiers.space_config(tier, 0, capacity_bytes=capacity,
                                                  mount_path="/tmp")])
            self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
            self.assertIn("capacity_bytes %d" % capacity, str(cm.exception))
            self.assertIn("INT64_MAX / 2", str(cm.exception))
        with self.assertRaises(gmr.GmrError) as cm:
            tiers.Manager([tiers.space_config("GPU", 0, capacity_bytes=2 << 30)])
        self.assertEqual("GMR_ERR_INVALID_ARGUMENT", cm.exception.status)
        self.assertIn("above device 0's memory of %d bytes" % (1 << 30), str(cm.exception))
        m = self.make()
        with self.assertRaises(KeyError):
            m.space("HOST", 1)
        with self.assertRaises(ValueError):
            m.reserve("GPU", KIB, timeout=-1)


if __name__ == "__main__":
    _lib.lib()
    junit_runner.run(__name__, "gmr_tiers_python")
