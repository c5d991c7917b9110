"""The declared variant space (variants/grid.toml), the targets (variants/targets.toml) and the one
pre-compile validity rule. After compiling, select.py decides from measured resources."""
from __future__ import annotations

import itertools
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from build_tools import paths

KV_FORMATS = ("v32", "model1")
# topk and the extra set's topk are multiples of 64, so a tile of block_t | 64 never straddles a set boundary.
TOKEN_GRANULE = 64
MIN_MMA_ROWS = 16
D_V = 512
# The [block_h, 512] fp32 accumulator is spread over the program's threads; above this many registers per thread
# it spills inside the main loop (sm90: bh64 with 4 warps held 256 and moved ~2 KB per thread per tile through
# local memory). Q, P, the tile and its addresses need the rest of the 255.
MAX_ACCUMULATOR_REGISTERS = 128
# Tiles in flight: 1 gathers a tile where it is computed, 2 also keeps the next tile's gathers in flight.
TILES_IN_FLIGHT = (1, 2)


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


@dataclass(frozen=True)
class Target:
    name: str
    triton_arch: int
    cubin_arch: str
    max_shared_bytes: int
    binary: str  # "cubin" or "ptx"
    default: bool
    note: str
    # Triton compile options of this target (e.g. maxnreg: ptxas 13.x stops at 128 registers on sm_120a without
    # the PTX's .maxnreg, and spills instead); part of every artifact's cache key.
    compile_options: dict = field(default_factory=dict)


def load_targets(path: Path | None = None) -> dict[str, Target]:
    with open(path or paths.TARGETS_FILE, "rb") as f:
        raw = tomllib.load(f)
    return {name: Target(name=name, **fields) for name, fields in raw.items()}


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
    if variant.num_stages not in TILES_IN_FLIGHT:
        return False, f"num_stages={variant.num_stages} (tiles in flight) must be one of {TILES_IN_FLIGHT}"
    registers = accumulator_registers(variant)
    if registers > MAX_ACCUMULATOR_REGISTERS:
        return False, (f"the [{variant.block_h}, {D_V}] fp32 accumulator needs {registers} registers per thread at "
                       f"{variant.num_warps} warps > {MAX_ACCUMULATOR_REGISTERS}: it would spill in the main loop")
    return True, None


def accumulator_registers(variant: Variant) -> int:
    """fp32 accumulator registers per thread: block_h * 512 values over 32 * num_warps threads."""
    return variant.block_h * D_V // (32 * variant.num_warps)
