"""Every ctypes mirror of a C struct in python/gmr has the C struct's size and
field offsets (as python/tests/struct_layouts prints them for this build).
A field added on one side only, or of another type, fails here instead of
corrupting memory at run time. Writes a JUnit XML report to $XML_OUTPUT_FILE
when Bazel asks for one.
"""

import ctypes
import json
import os
import subprocess
import unittest

import junit_runner

from gmr import _lib, scoped, tiers

# Python mirror -> the C struct it mirrors.
MIRRORS = {
    _lib.FailureStruct: "gmr_failure",
    _lib.SpecErrorStruct: "gmr_spec_error",
    _lib.FootprintStruct: "gmr_footprint",
    _lib.TorchCounters: "gmr_torch_counters",
    _lib.TorchDeviceStats: "gmr_torch_device_stats",
    _lib.TorchGraphPoolInfo: "gmr_torch_graph_pool_info",
    scoped._RegistryConfig: "gmr_scope_registry_config",
    scoped._Scope: "gmr_scope",
    scoped._PoolStats: "gmr_scoped_pool_stats",
    scoped._RegistryStats: "gmr_scope_registry_stats",
    tiers._SpaceId: "gmr_memory_space_id",
    tiers._LimitPolicy: "gmr_limit_policy",
    tiers._OomPolicy: "gmr_oom_policy",
    tiers._SpaceConfig: "gmr_memory_space_config",
    tiers._Strategy: "gmr_reservation_strategy",
    tiers._ManagerStats: "gmr_tier_manager_stats",
    tiers._SpaceStats: "gmr_memory_space_stats",
    tiers._ReservationInfo: "gmr_reservation_info",
}


def c_layouts():
    program = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "gmr"),
                           "python", "struct_layouts")
    return json.loads(subprocess.run([program], check=True, capture_output=True,
                                     text=True).stdout)


class LayoutTest(unittest.TestCase):
    def test_every_mirror_matches_its_c_struct(self):
        layouts = c_layouts()
        for mirror, name in MIRRORS.items():
            with self.subTest(struct=name):
                c = layouts[name]
                self.assertEqual(c["size"], ctypes.sizeof(mirror),
                                 "%s: %s has %d bytes in C, %d in Python"
                                 % (mirror.__name__, name, c["size"], ctypes.sizeof(mirror)))
                names = [f[0] for f in mirror._fields_]
                self.assertEqual(list(c["fields"]), names, "%s: fields differ" % name)
                for field in names:
                    self.assertEqual(c["fields"][field], getattr(mirror, field).offset,
                                     "%s.%s" % (name, field))

    def test_the_c_side_lists_only_mirrored_structs(self):
        self.assertEqual(sorted(c_layouts()), sorted(MIRRORS.values()))


if __name__ == "__main__":
    _lib.lib()
    junit_runner.run(__name__, "gmr_layout_python")
