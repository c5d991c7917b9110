"""The kernels' parameter lists: the one source of truth for the rendered `def` lines, the compile
signature (types and divisibility hints) and the per-variant JSON the runtime packs arguments from."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # Triton signature type: "*bf16", "*u8", "i32", "i64", "fp32", ...
    divisible_by: int = 1  # 16 becomes a tt.divisibility hint; the runtime validates it

    def to_json(self) -> dict:
        return {"name": self.name, "type": self.type, "divisible_by": self.divisible_by}


SPLIT_PARAMS = (
    Param("q_ptr", "*bf16", 16),
    Param("k_cache_ptr", "*u8", 16),
    Param("indices_ptr", "*i32", 16),
    Param("topk_length_ptr", "*i32", 16),
    Param("extra_k_cache_ptr", "*u8", 16),
    Param("extra_indices_ptr", "*i32", 16),
    Param("extra_topk_length_ptr", "*i32", 16),
    Param("partial_out_ptr", "*fp32", 16),
    Param("partial_lse_ptr", "*fp32", 16),
    Param("sm_scale_log2", "fp32"),
    Param("s_q", "i32"),
    Param("h_q", "i32"),
    Param("topk", "i32", 16),
    Param("extra_topk", "i32", 16),
    Param("num_splits", "i32"),
    Param("has_topk_length", "i32"),
    Param("has_extra_topk_length", "i32"),
    Param("page_size", "i32"),
    Param("block_stride", "i64", 16),
    Param("extra_page_size", "i32"),
    Param("extra_block_stride", "i64", 16),
)

COMBINE_PARAMS = (
    Param("partial_out_ptr", "*fp32", 16),
    Param("partial_lse_ptr", "*fp32", 16),
    Param("attn_sink_ptr", "*fp32", 16),
    Param("out_ptr", "*bf16", 16),
    Param("lse_ptr", "*fp32", 16),
    Param("h_q", "i32"),
    Param("num_splits", "i32"),
    Param("has_attn_sink", "i32"),
)

# Triton appends two scratch pointers (global, profile) to every compiled kernel's parameters.
SCRATCH_PARAMS = (Param("global_scratch", "*i8"), Param("profile_scratch", "*i8"))

MAX_SPLITS = 64
COMBINE_NUM_WARPS = 4
COMBINE_NAME = "combine"

D_QK = {"v32": 576, "model1": 512}


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
    """SPEC section 3, as the template consumes it."""

    record_bytes: int  # token record stride inside a page
    scale_record_bytes: int  # model1: per-token scale records after the page's token records; 0: none
    chunks: tuple[Chunk, ...]


LAYOUTS = {
    # 656 B/token: 512 e4m3 | 4 fp32 scales (one per 128 dims) | 64 bf16 rope (QK only). V = the 512 nope dims.
    "v32": Layout(656, 0, tuple(Chunk(128 * j, 128, 128 * j, "fp32", 512 + 4 * j) for j in range(4))
                  + (Chunk(512, 64, 528, "none", in_v=False),)),
    # page block = page_size records of 576 B (448 e4m3 | 64 bf16 rope), then page_size records of 8 B
    # (7 UE8M0 scales, one per 64 dims, + pad). V = all 512 dims, rope included.
    "model1": Layout(576, 8, tuple(Chunk(64 * j, 64, 64 * j, "ue8m0", j) for j in range(7))
                     + (Chunk(448, 64, 448, "none"),)),
}


def signature(params: tuple[Param, ...]) -> dict[str, str]:
    return {p.name: p.type for p in params}


def divisibility_attrs(params: tuple[Param, ...]) -> dict[tuple[int], list]:
    """Triton's attrs form: {(arg_index,): [["tt.divisibility", 16]]}."""
    return {(i,): [["tt.divisibility", 16]] for i, p in enumerate(params) if p.divisible_by == 16}
