"""Every ctypes mirror of a C struct in python/gmr has the C struct's size and
field offsets (as python/tests/struct_layouts prints them for this build).
A field added on one side only, or of another type, fails here instead of
corrupting memory at run time. Also: the mirrors and the prototypes live in
one table (gmr._capi), and every function it names is exported by the library
it names. Writes a JUnit XML report to $XML_OUTPUT_FILE when Bazel asks for one.
"""

import ctypes
import json
import os
import subprocess
import sys
import unittest

import junit_runner

import gmr
import gmr.cuda_core
import gmr.cupy
import gmr.numba
import gmr.scoped
import gmr.tiers
import gmr.torch
from gmr import _capi, _lib

# Python mirror -> the C struct it mirrors: the one table in gmr._capi.
MIRRORS = _capi.MIRRORS
PACKAGE_MODULES = ("gmr", "gmr._capi", "gmr._lib", "gmr._segments", "gmr._torch_allocator_api",
                   "gmr.cupy", "gmr.cuda_core", "gmr.memory_viz", "gmr.numba", "gmr.scoped",
                   "gmr.tiers", "gmr.torch")


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

    def test_every_ctypes_struct_of_the_package_is_a_checked_mirror(self):
        # A mirror defined outside gmr._capi (a second copy of a struct)
        # would escape the layout check.
        for name in PACKAGE_MODULES:
            module = sys.modules[name]
            for attr, value in vars(module).items():
                if (isinstance(value, type) and issubclass(value, ctypes.Structure)
                        and value.__module__ == name):
                    with self.subTest(struct="%s.%s" % (name, attr)):
                        self.assertEqual("gmr._capi", name, "ctypes mirrors live in gmr._capi")
                        self.assertIn(value, MIRRORS)

    def test_the_soname_version_follows_the_librarys_version(self):
        # CHANGELOG.md's rule: 0.<minor> while the major is 0, else <major>.
        major, minor, _ = (int(x) for x in gmr.version().split("."))
        self.assertEqual("0.%d" % minor if major == 0 else str(major), _lib.SONAME_VERSION)

    def test_every_prototype_names_an_exported_function(self):
        # The table is declared as each library loads; a name the library
        # does not export (a C rename without its alias) shows here.
        _lib.torch_lib()
        _lib.optional_lib(_capi.TIERS)
        _lib.optional_lib(_capi.SCOPED)
        _lib.optional_lib(_capi.NCCL)
        for library in _capi.LIBRARIES:
            with self.subTest(library=library):
                self.assertEqual([], _lib.missing_functions(library))

    def test_the_package_sets_prototypes_only_through_the_table(self):
        # One prototype table: no module but gmr._capi assigns argtypes.
        here = os.path.dirname(gmr.__file__)
        for file in sorted(os.listdir(here)):
            if file.endswith(".py") and file != "_capi.py":
                with open(os.path.join(here, file)) as f:
                    text = f.read()
                with self.subTest(file=file):
                    self.assertNotIn(".argtypes", text)
                    self.assertNotIn(".restype", text)

    def test_declared_functions_carry_the_tables_prototypes(self):
        libs = {_capi.GMR: _lib.lib(), _capi.TORCH: _lib.torch_lib(),
                _capi.TIERS: _lib.optional_lib(_capi.TIERS),
                _capi.SCOPED: _lib.optional_lib(_capi.SCOPED),
                _capi.NCCL: _lib.optional_lib(_capi.NCCL)}
        for name, (library, restype, argtypes) in _capi.PROTOTYPES.items():
            with self.subTest(function=name):
                f = getattr(libs[library], name)
                self.assertEqual(restype, f.restype)
                self.assertEqual(list(argtypes), list(f.argtypes))


if __name__ == "__main__":
    _lib.lib()
    junit_runner.run(__name__, "gmr_layout_python")
