"""The contract between the build (build_tools, templates) and the runtime (this package), stated once: the KV-cache
formats and their byte layouts, the variant names, the kernels' parameter lists, the split and head limits, the
dispatch-table names and the artifact record each compiled kernel ships with. Both sides import it; it imports
neither torch nor Triton. docs/design.md#the-build-runtime-contract says what each part is for."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from functools import cached_property

# ---------------------------------------------------------------------------------------------- the op

D_V = 512  # output width of every kv_format: V is 512 latent dims (docs/design.md#the-operation)
SUPPORTED_H_Q = (8, 16, 32, 64, 128)
# topk and the extra set's topk are multiples of this, so a tile of block_t | 64 never straddles a set boundary.
TOKEN_GRANULE = 64
MAX_SPLITS = 64  # the combine kernel reduces at most this many split partials; the launch plan clamps to it


# ---------------------------------------------------------------------------------------------- KV-cache formats


@dataclass(frozen=True)
class Chunk:
    """A run of latent dims stored one way in a token record: fp8 with a per-chunk scale, or bf16."""

    dim: int  # first latent (and q) dim
    width: int
    byte: int  # offset of its values in the token record
    scale: str  # "fp32" (float32 in the token record), "ue8m0" (byte in the page's scale record), "none" (bf16)
    scale_byte: int = 0  # where that scale sits: in the token record (fp32) or the scale record (ue8m0)
    in_v: bool = True  # part of V (the output); v32's rope only enters QK^T


@dataclass(frozen=True)
class Layout:
    """One kv_format's cache layout (docs/design.md#kv-cache-layouts): what the templates unroll and what the
    runtime's validation and quantizers derive their byte offsets from."""

    d_qk: int  # latent width = q's last dim
    bytes_per_token: int  # last dim of the cache view [num_blocks, page_size, 1, bytes_per_token]
    record_bytes: int  # token record stride inside a page
    scale_record_bytes: int  # model1: per-token scale records after the page's token records; 0: none
    page_align: int  # a page block is padded up to a multiple of this many bytes (1: not padded)
    chunks: tuple[Chunk, ...]

    @property
    def scaled_chunks(self) -> tuple[Chunk, ...]:
        """The fp8 chunks ("nope" dims), in latent order; all of one width (the scale tile)."""
        return tuple(c for c in self.chunks if c.scale != "none")

    @property
    def rope(self) -> Chunk:
        """The bf16 chunk (rope dims)."""
        (chunk,) = (c for c in self.chunks if c.scale == "none")
        return chunk

    @property
    def tile(self) -> int:
        """Dims sharing one scale."""
        return self.scaled_chunks[0].width

    @property
    def nope_dims(self) -> int:
        """Dims stored as fp8 (the latent's first dims)."""
        return len(self.scaled_chunks) * self.tile


LAYOUTS = {
    # 656 B/token: 512 e4m3 | 4 fp32 scales (one per 128 dims) | 64 bf16 rope (QK only). V = the 512 nope dims.
    "v32": Layout(576, 656, 656, 0, 1,
                  tuple(Chunk(128 * j, 128, 128 * j, "fp32", 512 + 4 * j) for j in range(4))
                  + (Chunk(512, 64, 528, "none", in_v=False),)),
    # page block = page_size records of 576 B (448 e4m3 | 64 bf16 rope), then page_size records of 8 B
    # (7 UE8M0 scales, one per 64 dims, + pad), padded to a multiple of 576 B. V = all 512 dims, rope included.
    "model1": Layout(512, 584, 576, 8, 576,
                     tuple(Chunk(64 * j, 64, 64 * j, "ue8m0", j) for j in range(7))
                     + (Chunk(448, 64, 448, "none"),)),
}
KV_FORMATS = tuple(LAYOUTS)
D_QK = {kv_format: layout.d_qk for kv_format, layout in LAYOUTS.items()}
BYTES_PER_TOKEN = {kv_format: layout.bytes_per_token for kv_format, layout in LAYOUTS.items()}


# ---------------------------------------------------------------------------------------------- variants

# Kernel families (docs/design.md#the-variant-space), an axis of the grid that the tables choose between per batch
# size. fused: one Triton kernel whose warps all gather and compute; num_stages is its tiles in flight (1 gathers a
# tile's bytes where they are computed, its indices loaded a tile ahead; 2 and 3 also have the next one or two
# tiles' bytes in flight, through shared memory by Triton's software pipeliner with that many stages). ws: a Gluon
# kernel whose producer warps gather tiles into a ring of num_stages shared-memory slots guarded by mbarriers, while
# num_warps consumer warps compute (docs/design.md#the-ws-family-producer-warps-and-a-ring). pingpong: the ws kernel
# with two groups of num_warps consumer warps that take the tiles in turn
# (docs/design.md#the-pingpong-family-two-consumer-groups-in-turn). wg (sm90 only): a producer warpgroup dequantizes
# tiles to bf16 into a ring for two consumer warpgroups of num_warps (4) warps that compute with wgmma, each one half
# of V's columns, with the heads as wgmma's rows at block_h 64 and the tile's tokens at 16 and 32
# (docs/design.md#the-wg-family-warpgroup-mmas-on-sm90).
FAMILIES = ("fused", "ws", "pingpong", "wg")
# The families with producer warps and a ring, and their groups of num_warps consumer warps.
WS_CONSUMER_GROUPS = {"ws": 1, "pingpong": 2, "wg": 2}
VARIANT_FIELDS = ("kv_format", "family", "block_h", "block_t", "num_warps", "num_stages")
TILES_IN_FLIGHT = (1, 2, 3)
# A ws kernel's producer warps: one warp of cp.async copies keeps too few bytes in flight (a warp's outstanding
# memory instructions are limited), so a whole warpgroup gathers (docs/design.md#the-ws-family-producer-warps-and-a-ring).
WS_PRODUCER_WARPS = 4
_VARIANT_NAME = re.compile(rf"({'|'.join(KV_FORMATS)})_({'|'.join(FAMILIES)})_bh(\d+)_bt(\d+)_w(\d+)_s(\d+)")


@dataclass(frozen=True, order=True)
class Variant:
    """One specialization of the split kernel; every field is baked into its rendered source and its name."""

    kv_format: str
    family: str
    block_h: int
    block_t: int
    num_warps: int
    num_stages: int

    @property
    def name(self) -> str:
        return (f"{self.kv_format}_{self.family}_bh{self.block_h}_bt{self.block_t}_w{self.num_warps}"
                f"_s{self.num_stages}")

    @property
    def consumer_groups(self) -> int:
        """Groups of num_warps consumer warps beside the producer warps; 0: no producer (the fused family)."""
        return WS_CONSUMER_GROUPS.get(self.family, 0)

    @property
    def launch_warps(self) -> int:
        """Warps per program at launch: a ws, pingpong or wg kernel adds its producer warps, and warp specialization hands
        registers out per warpgroup of 4 warps, so its warp count rounds up to a multiple of 4."""
        if self.consumer_groups:
            return -(-(self.consumer_groups * self.num_warps + WS_PRODUCER_WARPS) // 4) * 4
        return self.num_warps

    @classmethod
    def parse(cls, name: str) -> Variant:
        """The inverse of name: 'v32_fused_bh16_bt32_w4_s2' -> Variant('v32', 'fused', 16, 32, 4, 2)."""
        match = _VARIANT_NAME.fullmatch(name)
        if match is None:
            raise ValueError(f"{name!r} is not a variant name like v32_fused_bh16_bt32_w4_s2 (kv_format one of "
                             f"{KV_FORMATS}, family one of {FAMILIES})")
        return cls(match.group(1), match.group(2), *(int(g) for g in match.groups()[2:]))

    def to_json(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- kernel parameters


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # Triton signature type: "*bf16", "*u8", "i32", "i64", "fp32", ...
    divisible_by: int = 1  # 16 becomes a tt.divisibility hint; the runtime validates it

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict) -> Param:
        return cls(**_exact_keys(raw, cls, "param"))


# Where both kernels write a call's result: the split partials, the sink, out and lse (the split kernel writes out
# and lse itself when it is the only split; the combine kernel reads the partials and writes them otherwise).
RESULT_PARAMS = (
    Param("partial_out_ptr", "*fp32", 16),
    Param("partial_lse_ptr", "*fp32", 16),
    Param("attn_sink_ptr", "*fp32", 16),
    Param("out_ptr", "*bf16", 16),
    Param("lse_ptr", "*fp32", 16),
)

SPLIT_PARAMS = (
    Param("q_ptr", "*bf16", 16),
    Param("k_cache_ptr", "*u8", 16),
    Param("indices_ptr", "*i32", 16),
    Param("topk_length_ptr", "*i32", 16),
    Param("extra_k_cache_ptr", "*u8", 16),
    Param("extra_indices_ptr", "*i32", 16),
    Param("extra_topk_length_ptr", "*i32", 16),
    *RESULT_PARAMS,
    Param("sm_scale_log2", "fp32"),
    Param("s_q", "i32"),
    Param("h_q", "i32"),
    Param("topk", "i32", 16),
    Param("extra_topk", "i32", 16),
    Param("num_splits", "i32"),
    Param("unsplit_rows", "i32"),  # rows before it run one split (docs/design.md#splitting-only-the-last-wave)
    Param("has_topk_length", "i32"),
    Param("has_extra_topk_length", "i32"),
    Param("has_attn_sink", "i32"),
    Param("page_size", "i32"),
    Param("block_stride", "i64", 16),
    Param("extra_page_size", "i32"),
    Param("extra_block_stride", "i64", 16),
)

COMBINE_PARAMS = (
    *RESULT_PARAMS,
    Param("h_q", "i32"),
    Param("num_splits", "i32"),
    Param("has_attn_sink", "i32"),
)

# Triton appends two scratch pointers (global, profile) to every compiled kernel's parameters.
SCRATCH_PARAMS = (Param("global_scratch", "*i8"), Param("profile_scratch", "*i8"))

# The order the runtime packs arguments in; checked against each artifact's recorded params at load time.
SPLIT_ARG_NAMES = tuple(p.name for p in SPLIT_PARAMS)
COMBINE_ARG_NAMES = tuple(p.name for p in COMBINE_PARAMS)

COMBINE_NAME = "combine"  # the combine kernel's artifact name (split kernels are named by their Variant)


# ---------------------------------------------------------------------------------------------- dispatch tables


def table_stem(kv_format: str, h_q: int) -> str:
    """A dispatch table's name: variants/<target>/<stem>.json in the repository, tables/<target>/<stem>.json in
    the wheel, and the tune's measurements <target>_<stem>.csv."""
    return f"{kv_format}_h{h_q}"


def parse_table_stem(stem: str) -> tuple[str, int]:
    """The inverse of table_stem: 'model1_h64' -> ('model1', 64)."""
    kv_format, sep, h_q = stem.rpartition("_h")
    if not sep or kv_format not in LAYOUTS or not h_q.isdigit() or int(h_q) not in SUPPORTED_H_Q:
        raise ValueError(f"{stem!r} is not a table name <kv_format>_h<h_q> with kv_format one of {KV_FORMATS} "
                         f"and h_q one of {SUPPORTED_H_Q}")
    return kv_format, int(h_q)


# ---------------------------------------------------------------------------------------------- artifact records

RECORD_SCHEMA = 7  # bump when a field of ArtifactRecord or Resources changes (7: warnings hold ptxas's notes)
STATUSES = ("shipped", "pruned")
KINDS = ("split", "combine")


def _exact_keys(raw: dict, cls: type, what: str) -> dict:
    """raw's items if its keys are exactly cls's fields; otherwise a ValueError naming the extra and missing."""
    expected = {f.name for f in fields(cls)}
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be a JSON object; got {type(raw).__name__}")
    unknown, missing = sorted(set(raw) - expected), sorted(expected - set(raw))
    if unknown or missing:
        raise ValueError(f"{what} has unknown keys {unknown} and lacks keys {missing}")
    return raw


@dataclass(frozen=True)
class Resources:
    """What the compiled cubin uses, as cuobjdump and Triton report it."""

    elf_arch: str  # e.g. "sm_120a"
    registers: int
    stack_bytes: int
    local_bytes: int
    shared_static_bytes: int
    dynamic_shared_bytes: int  # Triton's metadata: what the launch asks for
    total_shared_bytes: int  # static + dynamic: what must fit the target's limit
    mma_instructions: tuple[str, ...]
    # Inside the main loops (the SASS ranges closed by backward branches), summed over the loops: what one tile's
    # work issues (docs/design.md#the-static-gate).
    loop_instructions: int
    loop_spill_stores: int  # STL
    loop_spill_loads: int  # LDL
    loop_global_loads: int  # LDG: the gathers and index loads
    loop_barriers: int  # BAR.SYNC: CTA-wide barriers, where every warp of the program waits for the slowest

    def to_json(self) -> dict:
        return {**asdict(self), "mma_instructions": list(self.mma_instructions)}

    @classmethod
    def from_json(cls, raw: dict) -> Resources:
        raw = _exact_keys(raw, cls, "resources")
        return cls(**{**raw, "mma_instructions": tuple(raw["mma_instructions"])})


@dataclass(frozen=True)
class ArtifactRecord:
    """Everything known about one compiled (or pruned) kernel of one target: written beside its binary by the build
    (last: it marks the artifact complete), read by the report, the tables, the package and the runtime."""

    schema: int
    name: str  # a Variant's name, or COMBINE_NAME
    kind: str  # "split" | "combine"
    target: str
    kernel_name: str  # the symbol inside the binary
    num_warps: int  # warps per program at launch (Variant.launch_warps; the block is 32 * num_warps threads)
    num_stages: int
    params: tuple[Param, ...]  # the kernel's parameters, scratch pointers included
    max_shared_bytes: int  # the target's limit it was checked against
    binary_format: str  # "cubin" | "ptx"
    # Compiled with grid-dependency control (griddepcontrol, sm_90 and up): a split kernel lets the kernel after it
    # launch early, a combine kernel waits for the grid before it, so the runtime launches the combine kernel as a
    # programmatic dependent launch of the split kernel (docs/design.md#programmatic-dependent-launch).
    grid_dependency: bool
    triton_version: str
    ptxas_version: str
    cache_key: str
    source: str  # the rendered source, relative to the build directory
    status: str  # "shipped" | "pruned"
    reason: str | None  # why it was pruned
    warnings: tuple[str, ...]
    binary: str | None  # file name beside the record; None when nothing was compiled
    sha256: str | None
    resources: Resources | None
    compile_seconds: float

    def __post_init__(self):
        if self.schema != RECORD_SCHEMA:
            raise ValueError(f"artifact record {self.name} has schema {self.schema}; this code reads schema "
                             f"{RECORD_SCHEMA}: rebuild (python -m build_tools build) or reinstall the wheel")
        if self.status not in STATUSES or self.kind not in KINDS:
            raise ValueError(f"artifact record {self.name}: status {self.status!r} must be one of {STATUSES} and "
                             f"kind {self.kind!r} one of {KINDS}")
        if (self.status == "pruned") != (self.reason is not None):
            raise ValueError(f"artifact record {self.name}: a pruned record has a reason, a shipped one none; got "
                             f"status {self.status!r}, reason {self.reason!r}")

    @classmethod
    def shipped(cls, **fields) -> ArtifactRecord:
        return cls(schema=RECORD_SCHEMA, status="shipped", reason=None, **fields)

    @classmethod
    def pruned(cls, reason: str, **fields) -> ArtifactRecord:
        """Unless fields say otherwise, nothing was compiled: no binary, sha256, resources or warnings."""
        nothing_compiled = dict(binary=None, sha256=None, resources=None, warnings=(), compile_seconds=0.0)
        return cls(schema=RECORD_SCHEMA, status="pruned", reason=reason, **{**nothing_compiled, **fields})

    @cached_property
    def variant(self) -> Variant | None:
        """The split kernel's variant (parsed from its name); None for the combine kernel."""
        return Variant.parse(self.name) if self.kind == "split" else None

    def to_json(self) -> dict:
        raw = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**raw, "params": [p.to_json() for p in self.params], "warnings": list(self.warnings),
                "resources": self.resources.to_json() if self.resources else None}

    @classmethod
    def from_json(cls, raw: dict, source: str = "artifact record") -> ArtifactRecord:
        """Strict: unknown or missing keys, another schema or a bad status are errors naming `source`."""
        try:
            raw = _exact_keys(raw, cls, "artifact record")
            return cls(**{**raw, "params": tuple(Param.from_json(p) for p in raw["params"]),
                          "warnings": tuple(raw["warnings"]),
                          "resources": Resources.from_json(raw["resources"]) if raw["resources"] else None})
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: {error}") from error
