"""gmr's PEP 517 build backend (pyproject.toml names it, in tree), so that the
standard commands build the same wheel as tools/wheel/build.sh, offline and
with nothing to install first:

    pip wheel --no-build-isolation --no-index -w dist .
    pip install --no-build-isolation --no-index .
    pip wheel --config-settings prebuilt=bazel-bin ...     # libraries already built

The libraries come from the folder named by the `prebuilt` config setting or
GMR_PREBUILT (laid out as bazel-bin); otherwise `bazel build -c opt` builds
them first. Everything else is make_wheel.py's.
"""

import os
import sys
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_wheel  # noqa: E402  (next to this file, on the backend path)


def _prebuilt(config_settings: Optional[Dict[str, str]]) -> str:
    chosen = (config_settings or {}).get("prebuilt") or os.environ.get("GMR_PREBUILT")
    if chosen:
        return os.path.abspath(chosen)
    return make_wheel.bazel_build(make_wheel.ROOT)


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, str]] = None) -> List[str]:
    """Nothing: the backend needs the standard library only."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, str]] = None) -> str:
    """Write gmr-X.Y.Z.dist-info (METADATA, WHEEL) without building anything."""
    major, minor, patch = make_wheel.read_version(make_wheel.ROOT)
    version = "%d.%d.%d" % (major, minor, patch)
    tag = "py3-none-" + make_wheel.platform_tag()
    for inside, data in make_wheel.dist_info_files(version, tag).items():
        path = os.path.join(metadata_directory, *inside.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return "gmr-%s.dist-info" % version


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, str]] = None,
                metadata_directory: Optional[str] = None) -> str:
    """Build the wheel into `wheel_directory`; return its file name."""
    path = make_wheel.build(make_wheel.ROOT, _prebuilt(config_settings), wheel_directory)
    return os.path.basename(path)
