"""The declared variant space (variants/grid.toml), the targets (variants/targets.toml) and the one
pre-compile validity rule. After compiling, selection.py decides from measured resources."""
from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from build_tools import paths
from sparse_mla_aot.contract import (D_V, FAMILIES, KV_FORMATS, TILES_IN_FLIGHT, TOKEN_GRANULE, VARIANT_FIELDS,
                                     Variant)

MIN_MMA_ROWS = 16
# The [block_h, D_V] fp32 accumulator is spread over the program's threads; above this many registers per thread
# it spills inside the main loop (sm90: block_h 64 with 4 warps held 256 and moved ~2 KB per thread per tile
# through local memory). Q, P, the tile and its addresses need the rest of the 255 (docs/design.md#performance).
MAX_ACCUMULATOR_REGISTERS = 128
GRID_DEPENDENCY_MIN_ARCH = 90  # griddepcontrol (programmatic dependent launch) is sm_90 and later PTX
WGMMA_ARCH = 90  # Triton lowers a 64-row dot to warpgroup MMAs on Hopper only (sm120: mma.sync)
SETMAXNREG_MIN_ARCH = 90  # setmaxnreg (registers moved between warp-specialized partitions): sm_90 and later
# The option Triton 3.9's own cubin stage adds to every ptxas run ("to work around ptxas 13.x bug"): a target that
# does not state ptxas_options gets it, so its binaries are Triton's.
TRITON_PTXAS_OPTIONS = ("--regAllocOptLevel=2",)
# The ws family (docs/design.md#the-ws-family-producer-warps-and-a-ring): its consumer warps, its ring's slots (a
# power of two: Gluon shapes), and the accumulator registers a consumer thread may hold (the tile's operands and the
# softmax need the rest of ~200).
WS_CONSUMER_WARPS = (4, 8)
WS_RING_SLOTS = (2, 4)
WS_MAX_ACCUMULATOR_REGISTERS = 64
# The wg family (docs/design.md#the-wg-family-warpgroup-mmas-on-sm90): a consumer is one warpgroup, a ring slot a
# bf16 tile of 64 tokens (two slots and q fill sm90's shared memory); wgmma's 64 rows are the heads at block_h 64,
# the tokens at block_h 16 and 32 (docs/design.md#tokens-as-the-rows-block_h-16-and-32).
WG_SHAPE = {"block_t": 64, "num_warps": 4, "num_stages": 2}
WG_BLOCK_H = (16, 32, 64)


@dataclass(frozen=True)
class Target:
    name: str
    triton_arch: int
    cubin_arch: str
    max_shared_bytes: int
    binary: str  # "cubin" or "ptx"
    default: bool
    sm_count: int  # multiprocessors of the smallest part of this target: what a split count aims to fill
    capability: tuple[int, int] | None  # the compute capability that selects it; None: only by SPARSE_MLA_AOT_TARGET
    note: str
    binaries: str  # the target whose build holds this target's binaries: itself, or one whose cubins run here
    # Triton options for every kernel of the target (e.g. maxnreg: ptxas 13.x caps sm_120a at 128 registers
    # unless the PTX carries .maxnreg); part of every artifact's cache key.
    compile_options: dict = field(default_factory=dict)
    # ptxas options after the fixed ones (build_tools.compile.PTXAS_FLAGS); part of every artifact's cache key.
    ptxas_options: tuple[str, ...] = TRITON_PTXAS_OPTIONS
    # Programs of a 4-warp ws variant that share a multiprocessor (programs_per_sm): 2 where two fit its shared memory.
    ws_programs_per_sm: int = 1

    @property
    def grid_dependency(self) -> bool:
        """griddepcontrol (programmatic dependent launch) needs sm_90 or later; the sm89 proxy's PTX cannot hold it."""
        return self.triton_arch >= GRID_DEPENDENCY_MIN_ARCH

    @property
    def register_reallocation(self) -> bool:
        """setmaxnreg exists here: a ws kernel gives its producer warps fewer registers (on sm_89 LLVM aborts on it)."""
        return self.triton_arch >= SETMAXNREG_MIN_ARCH

    @property
    def wgmma(self) -> bool:
        """Triton's dots are warpgroup MMAs here (docs/design.md#qk-split-across-warpgroups)."""
        return self.triton_arch == WGMMA_ARCH

    def manifest_entry(self) -> dict:
        """What the wheel's manifest says of the target, for the runtime to pick it by capability and find its
        binaries."""
        return {"capability": list(self.capability) if self.capability else None, "sm_count": self.sm_count,
                "binaries": self.binaries}


# What a target with `binaries = "<other>"` takes from the other target instead of restating it.
BINARY_FIELDS = ("triton_arch", "cubin_arch", "max_shared_bytes", "binary", "compile_options", "ptxas_options",
                 "ws_programs_per_sm")


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
        fields.update({key: raw[source][key] for key in BINARY_FIELDS if key in raw[source]})
    capability = fields.pop("capability", None)
    options = fields.pop("ptxas_options", TRITON_PTXAS_OPTIONS)
    if not isinstance(options, (list, tuple)) or not all(isinstance(o, str) and o.startswith("-") for o in options):
        raise ValueError(f"{path}: [{name}] ptxas_options must be a list of ptxas options such as "
                         f'["--regAllocOptLevel=2"]; got {options!r}')
    return Target(name=name, capability=tuple(capability) if capability else None, ptxas_options=tuple(options),
                  **fields)


def get_target(name: str) -> Target:
    targets = load_targets()
    if name not in targets:
        raise ValueError(f"unknown target {name!r}; known targets: {', '.join(targets)}")
    return targets[name]


def load_grid(path: Path | None = None) -> list[Variant]:
    """Every combination of the grid's axes, family by family, in a stable order: `[axes]` holds the axes every
    family shares (kv_format), `[family.<name>]` each family's own (block_h, block_t, num_warps, num_stages)."""
    path = path or paths.GRID_FILE
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    shared, families = raw.get("axes", {}), raw.get("family", {})
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        raise ValueError(f"grid {path} must have [family.<name>] sections with names among {list(FAMILIES)}; got "
                         f"{sorted(families)}")
    variants = []
    for family in (f for f in FAMILIES if f in families):
        axes = {**shared, **families[family], "family": [family]}
        missing = [name for name in VARIANT_FIELDS if name not in axes]
        if missing:
            raise ValueError(f"grid {path} [family.{family}] lacks axes {missing}; expected all of "
                             f"{[n for n in VARIANT_FIELDS if n != 'family']}")
        variants += [Variant(*combo) for combo in itertools.product(*(axes[name] for name in VARIANT_FIELDS))]
    return variants


def is_buildable(variant: Variant, target: Target) -> tuple[bool, str | None]:
    """The only place a combination is ruled out before compiling; returns (ok, reason)."""
    if variant.kv_format not in KV_FORMATS:
        return False, f"kv_format {variant.kv_format!r} is not one of {KV_FORMATS}"
    if variant.family not in FAMILIES:
        return False, f"family {variant.family!r} is not one of {FAMILIES}"
    if variant.block_t < MIN_MMA_ROWS or TOKEN_GRANULE % variant.block_t:
        return False, f"block_t={variant.block_t} must be >= {MIN_MMA_ROWS} and divide {TOKEN_GRANULE}"
    if variant.block_h < MIN_MMA_ROWS or variant.block_h & (variant.block_h - 1):
        return False, f"block_h={variant.block_h} must be a power of two >= {MIN_MMA_ROWS} (mma tile rows)"
    if variant.num_warps not in (1, 2, 4, 8, 16):
        return False, f"num_warps={variant.num_warps} must be a power of two <= 16"
    if variant.family == "wg":
        return _wg_buildable(variant, target)
    if variant.consumer_groups:
        return _ws_buildable(variant)
    if variant.num_stages not in TILES_IN_FLIGHT:
        return False, f"num_stages={variant.num_stages} (tiles in flight) must be one of {TILES_IN_FLIGHT}"
    registers = accumulator_registers(variant)
    if registers > MAX_ACCUMULATOR_REGISTERS:
        return False, (f"the [{variant.block_h}, {D_V}] fp32 accumulator needs {registers} registers per thread at "
                       f"{variant.num_warps} warps > {MAX_ACCUMULATOR_REGISTERS}: it would spill in the main loop")
    return True, None


def _ws_buildable(variant: Variant) -> tuple[bool, str | None]:
    """The ws and pingpong families' rules (docs/design.md#the-ws-family-producer-warps-and-a-ring): consumer warps
    split the latent's 8 chunks of 64 dims (the rope's tokens go in groups of at least one 8-wide MMA tile, shared
    by several warps where a tile has fewer such groups than warps: ws_layouts.placement)."""
    if variant.num_warps not in WS_CONSUMER_WARPS:
        return False, f"num_warps={variant.num_warps} (consumer warps) must be one of {WS_CONSUMER_WARPS}"
    if variant.num_stages not in WS_RING_SLOTS:
        return False, f"num_stages={variant.num_stages} (ring slots) must be one of {WS_RING_SLOTS}"
    registers = accumulator_registers(variant)
    if registers > WS_MAX_ACCUMULATOR_REGISTERS:
        return False, (f"the [{variant.block_h}, {D_V}] fp32 accumulator needs {registers} registers per consumer "
                       f"thread at {variant.num_warps} warps > {WS_MAX_ACCUMULATOR_REGISTERS}: the tile's operands "
                       "need the rest")
    return True, None


def _wg_buildable(variant: Variant, target: Target) -> tuple[bool, str | None]:
    """The wg family's rules: warpgroup MMAs (sm90 only), one tile shape, two head blocks."""
    if not target.wgmma:
        return False, f"the wg family needs warpgroup MMAs (sm_90); {target.name} has none"
    if variant.block_h not in WG_BLOCK_H:
        return False, f"block_h={variant.block_h} must be one of {WG_BLOCK_H} in the wg family"
    wrong = {axis: getattr(variant, axis) for axis, value in WG_SHAPE.items() if getattr(variant, axis) != value}
    if wrong:
        return False, f"the wg family is {WG_SHAPE}; got {wrong}"
    return True, None


def programs_per_sm(variant: Variant, target: Target) -> int:
    """Programs of `variant` meant to share a multiprocessor: a ws program of 4 consumer warps (8 warps with its
    producer) on a target with ws_programs_per_sm 2 launches at half the register file (128 registers per thread;
    setmaxnreg then gives its consumer warpgroup 232 and its producer 24), so two run side by side and each one's
    start and end overlap the other's loop (docs/design.md#two-ws-programs-per-multiprocessor). Every other kernel: 1."""
    if variant.family == "ws" and variant.launch_warps == 8 and target.register_reallocation:
        return target.ws_programs_per_sm
    return 1


def accumulator_registers(variant: Variant) -> int:
    """fp32 accumulator registers per thread: block_h * D_V values over 32 * num_warps threads."""
    return variant.block_h * D_V // (32 * variant.num_warps)
