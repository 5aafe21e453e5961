#!/usr/bin/env python3
"""Builds gmr's wheel (PEP 427) with the standard library only: no setuptools,
wheel or build package and no network, so it works on an offline machine.

    tools/wheel/build.sh [--prebuilt DIR] [--out DIR]        # the project command
    python3 tools/wheel/make_wheel.py [--prebuilt DIR] [--out DIR]
    pip wheel --no-build-isolation --no-index .              # the same, through pyproject.toml

The version comes from include/gmr/version.h (the one place it is kept); the
wheel's name is gmr-X.Y.Z-py3-none-<platform>.whl (ctypes code for any Python
3, libraries for this machine's platform). Inside:

    gmr/*.py, gmr/py.typed                 the package (python/gmr)
    gmr/lib/libgmr.so                      the core library (CUDA runtime linked in)
    gmr/lib/libgmr_tiers.so, libgmr_scoped.so, libgmr_nccl.so
                                           optional libraries: gmr.tiers / gmr.scoped load
                                           theirs, gmr.load_library("nccl") NCCL's (specs
                                           with cumem, symmetric, chunk_listener)
    gmr/lib/libgmr_torch.so                the torch shim without PyTorch's headers (fallback)
    gmr/torch_shim/integrations/torch/     the shim's sources and
    gmr/torch_shim/include/gmr/            the public headers: gmr.torch.use() builds the
                                           shim against the installed PyTorch at first use

Without --prebuilt it first builds the libraries with Bazel (-c opt) and takes
them from bazel-bin; --prebuilt DIR names a folder laid out as bazel-bin
(dist/libgmr.so, dist/libgmr_{tiers,scoped,nccl}.so,
integrations/torch/libgmr_torch.so), as tools/install.sh --prebuilt does. The
archive is reproducible: entries sorted, fixed timestamps (SOURCE_DATE_EPOCH
when set), fixed modes.
"""

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# What Bazel builds for the wheel (tools/install.sh builds the same set).
BAZEL_TARGETS = ["//dist:libgmr", "//dist:libgmr_tiers", "//dist:libgmr_scoped",
                 "//dist:libgmr_nccl", "//integrations/torch:libgmr_torch"]

SUMMARY = "Composable GPU memory resources (C11) for PyTorch, CuPy, Numba and cuda.core"
DESCRIPTION = """\
gmr is a C11 library of GPU memory resources that stack (pools, VMM, limits,
tracking, OOM policies), chosen at start-up by a spec such as
`tracking > limiting(limit=70GiB) > pool > cuda(kind=async)`. This package
carries libgmr.so (the CUDA runtime linked in; it needs only the driver) and
the Python modules: gmr, gmr.torch (PyTorch's CUDA allocator), gmr.cupy,
gmr.numba (a Numba External Memory Management plugin), gmr.cuda_core (a
cuda.core MemoryResource), gmr.tiers and gmr.scoped. See README.md and
docs/frameworks.md in the source tree.
"""


class WheelError(Exception):
    """The wheel cannot be built; the message says what is missing."""


def read_version(root: str) -> Tuple[int, int, int]:
    """(major, minor, patch) from include/gmr/version.h.

    Args:
        root: the source tree.

    Returns:
        The three numbers.

    Raises:
        WheelError: the header is missing or lacks a GMR_VERSION_* line.
    """
    path = os.path.join(root, "include", "gmr", "version.h")
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise WheelError("no version header: %s" % e) from None
    parts = []
    for name in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define GMR_VERSION_%s (\d+)\b" % name, text, re.M)
        if m is None:
            raise WheelError("%s has no '#define GMR_VERSION_%s N' line" % (path, name))
        parts.append(int(m.group(1)))
    return parts[0], parts[1], parts[2]


def platform_tag() -> str:
    """The wheel's platform tag for this machine, e.g. linux_x86_64."""
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def collect(root: str, prebuilt: str) -> List[Tuple[str, str]]:
    """(path in the wheel, file on disk) of every file the wheel carries.

    Args:
        root: the source tree.
        prebuilt: a folder laid out as bazel-bin with the built libraries.

    Returns:
        The pairs, sorted by path in the wheel.

    Raises:
        WheelError: a library or source file is missing (each one named).
    """
    files: Dict[str, str] = {}
    package = os.path.join(root, "python", "gmr")
    for name in sorted(os.listdir(package)):
        if name.endswith(".py") or name == "py.typed":
            files["gmr/" + name] = os.path.join(package, name)
    libraries = {
        "gmr/lib/libgmr.so": "dist/libgmr.so",
        "gmr/lib/libgmr_tiers.so": "dist/libgmr_tiers.so",
        "gmr/lib/libgmr_scoped.so": "dist/libgmr_scoped.so",
        "gmr/lib/libgmr_nccl.so": "dist/libgmr_nccl.so",
        "gmr/lib/libgmr_torch.so": "integrations/torch/libgmr_torch.so",
    }
    for inside, relative in libraries.items():
        files[inside] = os.path.join(prebuilt, relative)
    shim = os.path.join(root, "integrations", "torch")
    for name in sorted(os.listdir(shim)):
        if name.endswith((".h", ".cc")):
            files["gmr/torch_shim/integrations/torch/" + name] = os.path.join(shim, name)
    include = os.path.join(root, "include", "gmr")
    for folder, dirs, names in os.walk(include):
        dirs[:] = sorted(d for d in dirs if d != "sim")  # the simulation is never installed
        for name in names:
            if name.endswith(".h"):
                full = os.path.join(folder, name)
                relative = os.path.relpath(full, include).replace(os.sep, "/")
                files["gmr/torch_shim/include/gmr/" + relative] = full
    missing = [disk for disk in files.values() if not os.path.isfile(disk)]
    if missing:
        raise WheelError("missing: %s (build the libraries with `bazel build -c opt %s`, or "
                         "name their folder with --prebuilt)"
                         % (", ".join(missing), " ".join(BAZEL_TARGETS)))
    if "gmr/__init__.py" not in files:
        raise WheelError("%s holds no __init__.py: not gmr's package" % package)
    return sorted(files.items())


def metadata(version: str) -> str:
    """The METADATA file (core metadata 2.1)."""
    return ("Metadata-Version: 2.1\nName: gmr\nVersion: %s\nSummary: %s\n"
            "Requires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n%s"
            % (version, SUMMARY, DESCRIPTION))


def wheel_file(tag: str) -> str:
    """The WHEEL file."""
    return ("Wheel-Version: 1.0\nGenerator: gmr tools/wheel/make_wheel.py\n"
            "Root-Is-Purelib: false\nTag: %s\n" % tag)


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _timestamp() -> Tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return (1980, 1, 1, 0, 0, 0)
    t = time.gmtime(max(int(epoch), 315532800))  # zip cannot hold dates before 1980
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def dist_info_files(version: str, tag: str) -> Dict[str, bytes]:
    """The .dist-info files but RECORD: {path in the wheel: content}."""
    info = "gmr-%s.dist-info" % version
    return {
        info + "/METADATA": metadata(version).encode(),
        info + "/WHEEL": wheel_file(tag).encode(),
        info + "/top_level.txt": b"gmr\n",
    }


def build(root: str, prebuilt: str, out_dir: str, tag: Optional[str] = None) -> str:
    """Write the wheel into `out_dir`.

    Args:
        root: the source tree.
        prebuilt: a folder laid out as bazel-bin with the built libraries.
        out_dir: where the wheel goes (created if missing).
        tag: the compatibility tag; None: py3-none-<this platform>.

    Returns:
        The wheel's path.

    Raises:
        WheelError: a file is missing, or the version header is unreadable.
        OSError: `out_dir` cannot be written.
    """
    major, minor, patch = read_version(root)
    version = "%d.%d.%d" % (major, minor, patch)
    tag = tag or "py3-none-" + platform_tag()
    entries: List[Tuple[str, bytes, int]] = []
    for inside, disk in collect(root, prebuilt):
        with open(disk, "rb") as f:
            data = f.read()
        mode = 0o755 if ".so" in os.path.basename(inside) else 0o644
        entries.append((inside, data, mode))
    for inside, data in sorted(dist_info_files(version, tag).items()):
        entries.append((inside, data, 0o644))
    record_path = "gmr-%s.dist-info/RECORD" % version
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for inside, data, _ in entries:
        writer.writerow([inside, _record_hash(data), len(data)])
    writer.writerow([record_path, "", ""])
    entries.append((record_path, record.getvalue().encode(), 0o644))

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "gmr-%s-%s.whl" % (version, tag))
    partial = path + ".partial"
    stamp = _timestamp()
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
        for inside, data, mode in entries:
            info = zipfile.ZipInfo(inside, date_time=stamp)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(partial, path)
    return path


def bazel_build(root: str) -> str:
    """Build the libraries with Bazel (-c opt) and return bazel-bin.

    Args:
        root: the source tree.

    Returns:
        The bazel-bin folder.

    Raises:
        WheelError: bazel is not installed or the build failed.
    """
    try:
        subprocess.run(["bazel", "build", "-c", "opt"] + BAZEL_TARGETS, cwd=root, check=True)
    except FileNotFoundError:
        raise WheelError("bazel is not installed (tools/setup.sh installs it), and no "
                         "--prebuilt folder was named") from None
    except subprocess.CalledProcessError as e:
        raise WheelError("bazel build failed (exit %d)" % e.returncode) from None
    return os.path.join(root, "bazel-bin")


def main(argv: Optional[List[str]] = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prebuilt", help="a folder laid out as bazel-bin holding the built "
                        "libraries (default: build them with bazel -c opt)")
    parser.add_argument("--out", default=os.path.join(ROOT, "dist"),
                        help="where the wheel goes (default: dist/ of the source tree)")
    parser.add_argument("--root", default=ROOT, help="the source tree (default: this one)")
    args = parser.parse_args(argv)
    try:
        prebuilt = args.prebuilt or bazel_build(args.root)
        print(build(args.root, prebuilt, args.out))
    except WheelError as e:
        print("make_wheel: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
