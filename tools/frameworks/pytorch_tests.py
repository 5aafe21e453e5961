#!/usr/bin/env python3
"""Run one of PyTorch's own test files (fetched, unmodified; never committed:
keep them in a git-ignored folder, see tools/frameworks/graph_run.sh) as
__main__, optionally with gmr installed as PyTorch's CUDA allocator first.

    python3 tools/frameworks/pytorch_tests.py [runner options] [--] TEST_FILE [test args...]

Runner options (must come before TEST_FILE):
  --gmr[=SPEC]        gmr.torch.use(SPEC) (direct mode; no SPEC: gmr's default
                      / GMR_STACK) BEFORE anything can initialise CUDA.
                      Without --gmr the test runs on PyTorch's own allocator.
  --as-async          make common_utils.TEST_CUDAMALLOCASYNC True (tests then
                      take their "cudaMallocAsync" branches: no pool-sharing
                      corruption expected, native-stat tests skipped).  Only
                      common_utils' flag is changed, not torch itself.
  --no-stubs          do not stub a missing `psutil` / `expecttest` (default:
                      stub psutil if absent; a minimal expecttest if the real
                      package is absent).

Everything after TEST_FILE goes to the test (common_utils parses it: -k PATTERN,
-v, TestClass.test_name, --discover-tests, ...; not --use-pytest, which needs
PyTorch's test/conftest.py, nor --subprocess, whose children skip this runner).

Examples:
    python pytorch_tests.py test_cuda.py -v -k graph
    python pytorch_tests.py --gmr test_cuda.py -v TestCuda.test_graph_three_successive
    python pytorch_tests.py --gmr="<gmr spec>" inductor/test_cudagraph_trees.py -v -k checkpoint
"""

import builtins
import importlib.util
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def _parse(argv):
    gmr_spec = None
    use_gmr = False
    as_async = False
    stubs = True
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a == "--gmr":
            use_gmr = True
        elif a.startswith("--gmr="):
            use_gmr = True
            gmr_spec = a[len("--gmr="):] or None
        elif a == "--as-async":
            as_async = True
        elif a == "--no-stubs":
            stubs = False
        else:
            break
        i += 1
    if i >= len(argv):
        sys.exit(__doc__)
    return use_gmr, gmr_spec, as_async, stubs, argv[i], argv[i + 1:]


def _fallback(modname, name, mod):
    """Value for a name missing from an installed torch.testing._internal module."""
    import torch  # noqa: PLC0415

    if modname.endswith("common_utils") and name == "TEST_CUDAMALLOCASYNC":
        # Newer common_utils defines it; older test files defined it locally
        # with exactly this expression.
        return torch.cuda.is_available() and (
            torch.cuda.get_allocator_backend() == "cudaMallocAsync")
    if modname.endswith("inductor_utils") and name == "HAS_CUDA":
        # Renamed HAS_CUDA_AND_TRITON in newer PyTorch.
        return getattr(mod, "HAS_CUDA_AND_TRITON")
    raise KeyError(name)


def _compat(test_file):
    import ast  # noqa: PLC0415

    with open(test_file, "rb") as f:
        tree = ast.parse(f.read(), test_file)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith("torch.testing._internal.")):
            continue
        try:
            mod = importlib.import_module(node.module)
        except Exception as e:  # noqa: BLE001
            print("[pytorch_tests] cannot import %s: %s" % (node.module, e), file=sys.stderr)
            continue
        for alias in node.names:
            if alias.name == "*" or hasattr(mod, alias.name):
                continue
            try:
                setattr(mod, alias.name, _fallback(node.module, alias.name, mod))
                print("[pytorch_tests] %s.%s missing: fallback = %r"
                      % (node.module, alias.name, getattr(mod, alias.name)), file=sys.stderr)
            except KeyError:
                print("[pytorch_tests] %s.%s missing in this PyTorch (no fallback)"
                      % (node.module, alias.name), file=sys.stderr)


def _expecttest_standin():
    """What torch.testing._internal.common_utils needs of expecttest: TestCase
    with assertExpectedInline (compares whitespace-normalised text) and ACCEPT."""
    import unittest  # noqa: PLC0415

    mod = types.ModuleType("expecttest")
    mod.ACCEPT = False

    class TestCase(unittest.TestCase):
        def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802
            del skip
            self.assertEqual(" ".join(str(actual).split()), " ".join(str(expect).split()))

    mod.TestCase = TestCase
    return mod


def main():
    use_gmr, gmr_spec, as_async, stubs, test_file, test_args = _parse(sys.argv[1:])
    test_file = os.path.abspath(test_file)

    # 1. Module stand-ins (only where the real module is missing).
    if importlib.util.find_spec("expecttest") is not None:
        # The real package: import it now, so that the stand-in expecttest.py
        # next to test_cuda.py (on sys.path below) cannot shadow it.
        import expecttest  # noqa: F401,PLC0415
    elif stubs:
        sys.modules["expecttest"] = _expecttest_standin()
        print("[pytorch_tests] expecttest missing: using a stand-in", file=sys.stderr)
    if stubs:
        if importlib.util.find_spec("psutil") is None:
            ps = types.ModuleType("psutil")
            ps.disk_partitions = lambda all=False: []  # only TestGDS (skipped) uses it
            sys.modules["psutil"] = ps
            print("[pytorch_tests] psutil missing: stubbed", file=sys.stderr)

    # 2. argv as the test file sees it (common_utils parses sys.argv at import),
    #    and a fresh __main__ module for the test file: common_utils binds
    #    `import __main__` at its import and loads the tests from it, so the
    #    module must be in place before anything imports common_utils.
    sys.argv = [test_file] + test_args
    sys.path.insert(0, os.path.dirname(test_file))
    main_mod = types.ModuleType("__main__")
    main_mod.__file__ = test_file
    main_mod.__builtins__ = builtins
    sys.modules["__main__"] = main_mod

    # 3. gmr first: PyTorch swaps its allocator only before CUDA initialises.
    if use_gmr:
        import gmr.torch  # noqa: PLC0415

        gmr.torch.use(gmr_spec)
        import torch  # noqa: PLC0415

        print("[pytorch_tests] gmr.torch.use(%r): backend=%s"
              % (gmr_spec, torch.cuda.get_allocator_backend()), file=sys.stderr)

    # 4. Compatibility with the installed PyTorch (no file is edited): names
    #    the fetched test files import from torch.testing._internal that this
    #    PyTorch lacks get a fallback (known ones) or are reported.
    _compat(test_file)

    if as_async:
        import torch.testing._internal.common_utils as cu  # noqa: PLC0415

        cu.TEST_CUDAMALLOCASYNC = True
        print("[pytorch_tests] common_utils.TEST_CUDAMALLOCASYNC = True", file=sys.stderr)

    with open(test_file, "rb") as f:
        code = compile(f.read(), test_file, "exec")
    exec(code, main_mod.__dict__)


if __name__ == "__main__":
    main()
