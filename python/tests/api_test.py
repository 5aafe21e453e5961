"""The Python package's API is typed and documented: every public function,
class, method and property of python/gmr has type hints that resolve (in the
syntax Python 3.9 can evaluate), and a Google-style docstring with Args (each
parameter named), Returns (unless it returns None) and Raises sections; the
PEP 561 marker py.typed ships with the package. Writes a JUnit XML report to
$XML_OUTPUT_FILE when Bazel asks for one.
"""

import ast
import ctypes
import importlib
import inspect
import os
import re
import typing
import unittest

import junit_runner

import gmr

MODULES = ("gmr", "gmr._capi", "gmr._lib", "gmr._segments", "gmr._torch_allocator_api", "gmr.cupy",
           "gmr.cuda_core", "gmr.memory_viz", "gmr.numba", "gmr.scoped", "gmr.serving", "gmr.tiers",
           "gmr.torch")

# _lib's loader, left as it is while the library layout it searches changes
# (its own docstrings say what it does; hints come with that change).
LOADER = {"gmr._lib." + name for name in ("library_dirs", "lib", "lib_path", "prefer_torch_lib",
                                          "torch_lib_path", "torch_lib", "loaded_torch_lib_path")}
# Functions that cannot raise (no C call, no check): no Raises section.
NEVER_RAISE = {"gmr.torch.mode", "gmr.serving.tags", "gmr._torch_allocator_api.install",
               "gmr._torch_allocator_api.uninstall", "gmr._torch_allocator_api.installed",
               "gmr._segments.place_allocations", "gmr._segments.segments_from_regions",
               "gmr.numba.DeviceMemoryManager.live_allocations"}


def sections(doc):
    """{section name: its text} of a Google-style docstring."""
    out = {}
    current = None
    for line in inspect.cleandoc(doc).splitlines():
        m = re.match(r"^(Args|Returns|Yields|Raises):\s*$", line)
        if m:
            current = m.group(1)
            out[current] = ""
        elif current and (line.startswith(" ") or not line.strip()):
            out[current] += line + "\n"
        else:
            current = None
    return out


def public_api():
    """(qualified name, object, kind) of every public function, class, method
    and property defined in the package's modules."""
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name, value in sorted(vars(module).items()):
            if name.startswith("_") or getattr(value, "__module__", None) != module_name:
                continue
            qualified = "%s.%s" % (module_name, name)
            if inspect.isfunction(value):
                yield qualified, value, "function"
            elif inspect.isclass(value):
                yield qualified, value, "class"
                for attr, member in sorted(vars(value).items()):
                    if attr.startswith("_"):
                        continue
                    if inspect.isfunction(member):
                        yield "%s.%s" % (qualified, attr), member, "method"
                    elif isinstance(member, property):
                        yield "%s.%s" % (qualified, attr), member.fget, "property"


def parameters(function):
    """The documented parameters: all but self/cls, *args as "*args"."""
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.name in ("self", "cls"):
            continue
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        out.append((prefix + p.name, p))
    return out


class ApiTest(unittest.TestCase):
    def test_the_package_is_marked_typed(self):
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(gmr.__file__), "py.typed")))

    def test_the_api_is_found(self):
        names = {name for name, _, _ in public_api()}
        for expected in ("gmr.allocate", "gmr.torch.use", "gmr.torch.build_shim",
                         "gmr.cupy.allocator", "gmr.scoped.Registry.pool",
                         "gmr.tiers.Manager.reserve", "gmr.tiers.Space.capacity_bytes",
                         "gmr.numba.use", "gmr.numba.DeviceMemoryManager.memalloc",
                         "gmr.cuda_core.memory_resource", "gmr.cuda_core.ResourceMethods.allocate",
                         "gmr._capi.declare", "gmr._lib.GmrError"):
            self.assertIn(expected, names)

    def test_every_function_and_method_is_annotated(self):
        for name, obj, kind in public_api():
            if kind == "class" or name in LOADER:
                continue
            with self.subTest(function=name):
                signature = inspect.signature(obj)
                for pname, p in parameters(obj):
                    self.assertIsNot(p.annotation, p.empty, "%s: no hint on %s" % (name, pname))
                self.assertIsNot(signature.return_annotation, signature.empty,
                                 "%s: no return hint" % name)
                typing.get_type_hints(obj)  # every hint resolves

    def test_every_function_and_method_has_the_docstring_sections(self):
        for name, obj, kind in public_api():
            if kind in ("class", "property") or name in LOADER:
                continue
            with self.subTest(function=name):
                doc = inspect.getdoc(obj)
                self.assertTrue(doc, "%s has no docstring" % name)
                found = sections(doc)
                params = parameters(obj)
                if params:
                    self.assertIn("Args", found, name)
                    for pname, _ in params:
                        self.assertRegex(found["Args"], r"(?m)^\s+%s:" % re.escape(pname),
                                         "%s: Args does not name %s" % (name, pname))
                hints = typing.get_type_hints(obj)
                if hints.get("return") not in (type(None), typing.NoReturn):
                    self.assertTrue("Returns" in found or "Yields" in found,
                                    "%s returns a value: no Returns section" % name)
                if name not in NEVER_RAISE:
                    self.assertIn("Raises", found, name)
                    self.assertRegex(found["Raises"], r"(?m)^\s+[\w.]+:",
                                     "%s: Raises names no exception" % name)

    def test_every_class_and_property_has_a_docstring(self):
        for name, obj, kind in public_api():
            if kind not in ("class", "property"):
                continue
            with self.subTest(name=name):
                self.assertTrue(inspect.getdoc(obj), "%s has no docstring" % name)
                if kind == "class" and "__init__" in vars(obj):
                    params = parameters(obj.__init__)
                    found = sections(inspect.getdoc(obj))
                    if params:
                        self.assertIn("Args", found, "%s: the constructor's Args" % name)
                        for pname, _ in params:
                            self.assertRegex(found["Args"], r"(?m)^\s+%s:" % re.escape(pname),
                                             "%s: Args does not name %s" % (name, pname))

    def test_ctypes_mirrors_are_documented_with_their_c_name(self):
        from gmr import _capi  # noqa: PLC0415
        for mirror, c_name in _capi.MIRRORS.items():
            with self.subTest(struct=c_name):
                self.assertTrue(issubclass(mirror, ctypes.Structure))
                self.assertIn(c_name, inspect.getdoc(mirror))

    def test_hints_use_syntax_python_3_9_evaluates(self):
        # `X | Y` and list[...] / dict[...] in a hint fail typing.get_type_hints
        # on Python 3.9 even under `from __future__ import annotations`.
        builtin_generics = {"list", "dict", "tuple", "set", "frozenset", "type"}
        here = os.path.dirname(gmr.__file__)
        for file in sorted(f for f in os.listdir(here) if f.endswith(".py")):
            with open(os.path.join(here, file)) as f:
                tree = ast.parse(f.read(), file)
            hints = []
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    args = node.args
                    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg,
                                                                               args.kwarg]:
                        if a is not None and a.annotation is not None:
                            hints.append(a.annotation)
                    if node.returns is not None:
                        hints.append(node.returns)
                elif isinstance(node, ast.AnnAssign):
                    hints.append(node.annotation)
            offenders = []
            for hint in hints:
                for part in ast.walk(hint):
                    if isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr):
                        offenders.append("%s:%d: X | Y (use Optional/Union)"
                                         % (file, part.lineno))
                    elif (isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name)
                          and part.value.id in builtin_generics):
                        offenders.append("%s:%d: %s[...] (use typing's)"
                                         % (file, part.lineno, part.value.id))
            self.assertEqual([], offenders)

if __name__ == "__main__":
    junit_runner.run(__name__, "gmr_api_python")
