"""Every directory and environment variable the build reads, in one place (tests point them at tmp dirs)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS_DIR = ROOT / "variants"
GRID_FILE = VARIANTS_DIR / "grid.toml"
TARGETS_FILE = VARIANTS_DIR / "targets.toml"

BUILD_DIR_ENV = "SPARSE_MLA_AOT_BUILD_DIR"
TEMPLATES_DIR_ENV = "SPARSE_MLA_AOT_TEMPLATES_DIR"


def templates_dir() -> Path:
    """The Jinja templates: $SPARSE_MLA_AOT_TEMPLATES_DIR or <repo>/templates."""
    return Path(os.environ.get(TEMPLATES_DIR_ENV, ROOT / "templates"))


def build_dir() -> Path:
    """Root of build outputs: $SPARSE_MLA_AOT_BUILD_DIR or <repo>/build."""
    return Path(os.environ.get(BUILD_DIR_ENV, ROOT / "build"))


def target_dir(target: str) -> Path:
    return build_dir() / target
