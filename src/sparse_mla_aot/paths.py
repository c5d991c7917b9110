"""Where the runtime finds its kernels and tables, and the environment variables it reads."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
KERNEL_DIR_ENV = "SPARSE_MLA_AOT_KERNEL_DIR"  # override for a source checkout: a folder laid out like kernels/
FORCE_ENV = "SPARSE_MLA_AOT_FORCE"
TARGET_ENV = "SPARSE_MLA_AOT_TARGET"  # testing: use this target's kernels whatever the GPU (sm89-proxy on an H200)
CHECK_ENV = "SPARSE_MLA_AOT_CHECK"
MANIFEST_NAME = "manifest.json"


def kernel_dir() -> Path:
    """Packaged kernels: <package>/kernels/{manifest.json, <target>/*.cubin|ptx|json, tables/<target>/*.json}."""
    return Path(os.environ.get(KERNEL_DIR_ENV, PACKAGE_DIR / "kernels"))
