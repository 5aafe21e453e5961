"""Loading libgmr.so (and libgmr_torch.so) with ctypes, and their prototypes.

Where the libraries are looked for, first match wins:
  0. GMR_LIBRARY (a file: the library to load as libgmr.so, e.g. the test
     build libgmr_testing.so, which also holds the optional libraries and
     the CUDA simulation);
  1. GMR_LIBRARY_DIR (a folder holding libgmr.so);
  2. the wheel's layout: this package's own lib/ folder (gmr/lib, which
     tools/wheel/make_wheel.py fills; absent in the source tree);
  3. the installed layout: this package at PREFIX/lib/python/gmr, the
     libraries in PREFIX/lib (tools/install.sh);
  4. the source tree: bazel-bin/dist and bazel-bin/integrations/torch next to
     python/ (after `bazel build //dist:libgmr //integrations/torch:libgmr_torch`);
  5. the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig): libgmr.so.0.2
     (the SONAME; SONAME_VERSION).
libgmr_torch.so: GMR_TORCH_LIBRARY (a file) first, then the same folders,
preferring libgmr_torch_c10.so (the build against PyTorch's headers, which
raises torch.cuda.OutOfMemoryError; gmr.torch.build_shim()) over
libgmr_torch.so.

The library is loaded once per process, with RTLD_GLOBAL, so the torch shim
(which needs libgmr.so.0.2) and this module share one per-device registry.
Prototypes and struct mirrors are in gmr._capi (one table for both libraries).
"""

import ctypes
import os
import threading
from typing import Dict, List, NoReturn

from gmr import _capi

# The version in the libraries' SONAMEs (libgmr.so.0.2): CHANGELOG.md's rule,
# 0.<minor> while the major version is 0. It names the library before one is
# loaded, so it is written here; //python:gmr_layout_python_test checks it
# against gmr/version.h.
SONAME_VERSION = "0.2"

_here = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_lib = None
_lib_path = None
_torch_lib = None
_torch_lib_path = None


class GmrError(RuntimeError):
    """A gmr call failed.

    Args:
        status: the gmr_status name, e.g. "GMR_ERR_CUDA"; kept as `status`.
        message: gmr's failure message.
    """

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class SpecError(GmrError, ValueError):
    """A stack spec (argument or GMR_STACK) is malformed; the message says where.

    Args:
        status: the gmr_status name (GMR_ERR_INVALID_ARGUMENT).
        message: gmr's message, e.g. "spec:1:7: unknown component 'pol'".
    """


class OutOfMemoryError(GmrError, MemoryError):
    """The stack had no memory for a request, or a limit refused it.

    Args:
        status: the gmr_status name (GMR_ERR_OUT_OF_MEMORY or GMR_ERR_LIMIT_EXCEEDED).
        message: gmr's failure message.
    """


def _candidate_dirs():
    dirs = []
    env = os.environ.get("GMR_LIBRARY_DIR")
    if env:
        dirs.append(env)
    # The wheel's own libraries (gmr/lib), before any other installation's.
    dirs.append(os.path.join(_here, "lib"))
    # Two folders up: PREFIX/lib when installed, the repository in the tree.
    up = os.path.normpath(os.path.join(_here, "..", ".."))
    dirs.append(up)
    dirs.append(os.path.join(up, "bazel-bin", "dist"))
    dirs.append(os.path.join(up, "bazel-bin", "integrations", "torch"))
    return dirs


def library_dirs():
    """The folders searched for gmr's shared libraries, in order."""
    return _candidate_dirs()


# Names of the prototype table's functions that the loaded libraries lack,
# per library ("gmr", "torch"); layout_test checks that both stay empty.
_missing: Dict[str, List[str]] = {}


def _declare(lib: ctypes.CDLL) -> None:
    """Apply gmr._capi's prototypes for libgmr.so to `lib`."""
    _missing[_capi.GMR] = _capi.declare(lib, _capi.GMR)


def _declare_torch(lib: ctypes.CDLL) -> None:
    """Apply gmr._capi's prototypes for the torch shim to `lib`."""
    _missing[_capi.TORCH] = _capi.declare(lib, _capi.TORCH)


def lib():
    """libgmr.so, loaded once (RTLD_GLOBAL). Raises OSError naming the places searched."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        chosen = os.environ.get("GMR_LIBRARY")
        dirs = _candidate_dirs()
        if chosen:
            if not os.path.exists(chosen):
                raise OSError("gmr: GMR_LIBRARY names %s, which does not exist" % chosen)
            dirs = [os.path.dirname(os.path.abspath(chosen))]
        for d in dirs:
            path = chosen or os.path.join(d, "libgmr.so")
            tried.append(path)
            if os.path.exists(path):
                _lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                _lib_path = path
                break
        else:
            try:
                soname = "libgmr.so." + SONAME_VERSION
                _lib = ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
                _lib_path = soname
            except OSError:
                raise OSError(
                    "gmr: libgmr.so not found; looked in: " + ", ".join(tried) +
                    " and the loader's path (libgmr.so.%s). Set GMR_LIBRARY_DIR, install with "
                    "tools/install.sh, or build with bazel build //dist:libgmr"
                    % SONAME_VERSION) from None
        _declare(_lib)
        return _lib


def lib_path():
    """Path of the libgmr.so that was loaded (loads it)."""
    lib()
    return _lib_path


_optional: Dict[str, ctypes.CDLL] = {}


def optional_lib(name: str) -> ctypes.CDLL:
    """One of gmr's optional libraries, loaded once, its prototypes declared.

    Looked for in the folder libgmr.so came from, then the other folders of
    the search order above, then the loader's path. A libgmr that holds the
    library's functions already (the test build libgmr_testing.so) is used
    as is.

    Args:
        name: "tiers" (libgmr_tiers.so), "scoped" (libgmr_scoped.so) or
            "nccl" (libgmr_nccl.so, which registers its stack spec components
            in the default context as it loads).

    Returns:
        The loaded library (its functions' prototypes from gmr._capi set).

    Raises:
        ValueError: `name` is not an optional library of gmr.
        OSError: libgmr.so or the library cannot be loaded; the message names
            the places searched.
    """
    probes = {_capi.TIERS: "gmr_tier_manager_create", _capi.SCOPED: "gmr_scope_registry_create",
              _capi.NCCL: "gmr_nccl_register_components"}
    if name not in probes:
        raise ValueError("gmr: no optional library %r (one of %s)" % (name, ", ".join(probes)))
    core = lib()
    with _lock:
        if name in _optional:
            return _optional[name]
        handle = None
        if hasattr(core, probes[name]):
            handle = core
        else:
            file = "libgmr_%s.so" % name
            dirs = [os.path.dirname(_lib_path)] if _lib_path and os.path.isabs(_lib_path) else []
            tried = []
            for d in dirs + _candidate_dirs():
                path = os.path.join(d, file)
                tried.append(path)
                if os.path.exists(path):
                    handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    break
            if handle is None:
                try:
                    handle = ctypes.CDLL(file + "." + SONAME_VERSION, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    raise OSError("gmr: %s (the optional library gmr.%s needs) not found; looked "
                                  "in: %s and the loader's path"
                                  % (file, name, ", ".join(tried))) from None
        _missing[name] = _capi.declare(handle, name)
        _optional[name] = handle
        return handle


_preferred_torch_lib = None


def prefer_torch_lib(path):
    """Load the torch shim from `path` (a libgmr_torch_c10.so gmr.torch built
    for this PyTorch) unless GMR_TORCH_LIBRARY names one; before it is loaded."""
    global _preferred_torch_lib
    _preferred_torch_lib = path


def torch_lib_path():
    """Path of the torch shim gmr.torch uses: GMR_TORCH_LIBRARY, then one
    gmr.torch built for this PyTorch, then libgmr_torch_c10.so, then
    libgmr_torch.so in the library folders."""
    env = os.environ.get("GMR_TORCH_LIBRARY")
    if env:
        return env
    if _preferred_torch_lib is not None:
        return _preferred_torch_lib
    tried = []
    for name in ("libgmr_torch_c10.so", "libgmr_torch.so"):
        for d in _candidate_dirs():
            path = os.path.join(d, name)
            tried.append(path)
            if os.path.exists(path):
                return path
    raise OSError("gmr: libgmr_torch.so not found; looked in: " + ", ".join(tried) +
                  ". Set GMR_TORCH_LIBRARY, or build //integrations/torch:libgmr_torch")


def torch_lib():
    """The torch shim (after libgmr.so, which it needs), loaded once."""
    global _torch_lib, _torch_lib_path
    lib()
    with _lock:
        if _torch_lib is None:
            path = torch_lib_path()
            _torch_lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _torch_lib_path = path
            _declare_torch(_torch_lib)
        return _torch_lib


def loaded_torch_lib_path():
    """Path of the loaded torch shim, or None before gmr.torch loaded it."""
    return _torch_lib_path


def missing_functions(library: str) -> List[str]:
    """Functions of gmr._capi's table that a loaded library does not export.

    Args:
        library: "gmr" (libgmr.so), "torch" (the torch shim), "tiers",
            "scoped" or "nccl" (the optional libraries).

    Returns:
        Their names; empty when the library has every one, or is not loaded yet.

    Raises:
        ValueError: `library` is none of gmr._capi.LIBRARIES.
    """
    if library not in _capi.LIBRARIES:
        raise ValueError("gmr: no library %r (one of %s)" % (library, ", ".join(_capi.LIBRARIES)))
    return list(_missing.get(library, []))


def status_name(status: int) -> str:
    """The name of a gmr_status value.

    Args:
        status: a gmr_status value returned by a C call.

    Returns:
        Its name, e.g. "GMR_ERR_OUT_OF_MEMORY".

    Raises:
        OSError: libgmr.so cannot be loaded.
    """
    name: str = lib().gmr_status_name(status).decode()
    return name


def raise_for(status: int, message: str, spec_error: bool = False) -> NoReturn:
    """Raise the Python exception for a failed gmr status.

    Args:
        status: the failed gmr_status value (not GMR_OK).
        message: the exception's text.
        spec_error: whether GMR_ERR_INVALID_ARGUMENT means a malformed spec.

    Raises:
        OutOfMemoryError: GMR_ERR_OUT_OF_MEMORY or GMR_ERR_LIMIT_EXCEEDED.
        SpecError: GMR_ERR_INVALID_ARGUMENT when `spec_error` is true.
        GmrError: any other status.
    """
    name = status_name(status)
    if name in ("GMR_ERR_OUT_OF_MEMORY", "GMR_ERR_LIMIT_EXCEEDED"):
        raise OutOfMemoryError(name, message)
    if spec_error and name == "GMR_ERR_INVALID_ARGUMENT":
        raise SpecError(name, message)
    raise GmrError(name, message)
