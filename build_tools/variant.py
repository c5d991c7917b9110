"""The declared variant space (variants/grid.toml), the targets (variants/targets.toml) and the one
pre-compile validity rule. After compiling, select.py decides from measured resources."""
from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from build_tools import paths

KV_FORMATS = ("v32", "model1")
# topk and the extra set's topk are multiples of 64, so a tile of block_t | 64 never straddles a set boundary.
TOKEN_GRANULE = 64
MIN_MMA_ROWS = 16


@dataclass(frozen=True, order=True)
class Variant:
    """One specialization of the split kernel; every field is baked into its rendered source."""

    kv_format: str
    block_h: int
    block_t: int
    num_warps: int
    num_stages: int

    @property
    def name(self) -> str:
        return f"{self.kv_format}_bh{self.block_h}_bt{self.block_t}_w{self.num_warps}_s{self.num_stages}"

    def to_json(self) -> dict:
        return asdict(self)


VARIANT_NAME = re.compile(r"(?P<kv_format>[a-z0-9]+)_bh(?P<block_h>\d+)_bt(?P<block_t>\d+)_w(?P<num_warps>\d+)"
                          r"_s(?P<num_stages>\d+)")


def variant_from_name(name: str) -> Variant:
    """The inverse of Variant.name (a build edge names its artifact, nothing else)."""
    match = VARIANT_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is not a variant name; expected e.g. v32_bh16_bt64_w8_s2")
    fields = match.groupdict()
    return Variant(fields.pop("kv_format"), **{key: int(value) for key, value in fields.items()})


@dataclass(frozen=True)
class Target:
    name: str
    triton_arch: int
    cubin_arch: str
    max_shared_bytes: int
    binary: str  # "cubin" or "ptx"
    default: bool
    note: str
    binaries: str  # the target whose build holds this target's binaries: itself, or one whose cubins run here


# What a target with `binaries = "<other>"` takes from the other target instead of restating it.
BINARY_FIELDS = ("triton_arch", "cubin_arch", "max_shared_bytes", "binary")


def load_targets(path: Path | None = None) -> dict[str, Target]:
    with open(path or paths.TARGETS_FILE, "rb") as f:
        raw = tomllib.load(f)
    return {name: _target(name, raw, path or paths.TARGETS_FILE) for name in raw}


def _target(name: str, raw: dict, path: Path) -> Target:
    fields = dict(raw[name])
    source = fields.setdefault("binaries", name)
    if source != name:
        if source not in raw or raw[source].get("binaries", source) != source:
            raise ValueError(f"{path}: [{name}] binaries = {source!r} must name a target that builds its own "
                             f"binaries; targets: {', '.join(raw)}")
        restated = [key for key in BINARY_FIELDS if key in fields]
        if restated:
            raise ValueError(f"{path}: [{name}] takes {restated} from [{source}] (binaries = {source!r}); "
                             "remove them")
        fields.update({key: raw[source][key] for key in BINARY_FIELDS})
    return Target(name=name, **fields)


def get_target(name: str) -> Target:
    targets = load_targets()
    if name not in targets:
        raise ValueError(f"unknown target {name!r}; known targets: {', '.join(targets)}")
    return targets[name]


def load_grid(path: Path | None = None) -> list[Variant]:
    """Every combination of the grid's axes, in a stable order."""
    with open(path or paths.GRID_FILE, "rb") as f:
        axes = tomllib.load(f)["axes"]
    fields = ("kv_format", "block_h", "block_t", "num_warps", "num_stages")
    missing = [name for name in fields if name not in axes]
    if missing:
        raise ValueError(f"grid {path or paths.GRID_FILE} lacks axes {missing}; expected all of {list(fields)}")
    return [Variant(*combo) for combo in itertools.product(*(axes[name] for name in fields))]


def is_buildable(variant: Variant, target: Target) -> tuple[bool, str | None]:
    """The only place a combination is ruled out before compiling; returns (ok, reason)."""
    if variant.kv_format not in KV_FORMATS:
        return False, f"kv_format {variant.kv_format!r} is not one of {KV_FORMATS}"
    if variant.block_t < MIN_MMA_ROWS or TOKEN_GRANULE % variant.block_t:
        return False, f"block_t={variant.block_t} must be >= {MIN_MMA_ROWS} and divide {TOKEN_GRANULE}"
    if variant.block_h < MIN_MMA_ROWS or variant.block_h & (variant.block_h - 1):
        return False, f"block_h={variant.block_h} must be a power of two >= {MIN_MMA_ROWS} (mma tile rows)"
    if variant.num_warps not in (1, 2, 4, 8, 16):
        return False, f"num_warps={variant.num_warps} must be a power of two <= 16"
    if variant.num_stages < 1:
        return False, f"num_stages={variant.num_stages} must be >= 1"
    return True, None
