"""The ws family's data placement (docs/design.md#the-ws-family-producer-warps-and-a-ring), computed once here and
printed into its template as literals: which latent dims each of the 8 chunks of 64 fp8 values holds, where its
scale comes from, and the shared-memory views the consumers read a ring slot through.

A ring slot holds a tile's tokens as rows of FP8_ROW bytes (the fp8 values; model1's 448 leave the last 64 bytes
zero, which makes an eighth, empty chunk), the rope as rows of 64 bf16, the scale bytes and the indices. Rows are
swizzled in 16-byte units (unit ^= token % 8; `fp8_offset`, `rope_offset`): cp.async writes and ldmatrix reads
16-byte units, and 8 consecutive tokens' same unit then lie in 8 different bank groups. Consumer warps split the
8 chunks (a chunk's scale is one number per token, so it can multiply the chunk's logits instead of its values).
Two views read the fp8 rows: K as [chunk, dim, token] (each thread reads 4 consecutive dims of a token for QK^T)
and V as [chunk, token, n], where n is a permutation of the chunk's 64 dims chosen so that the 8 dims one thread
multiplies for PV are 8 consecutive bytes (one 8-byte load; `v_dim`). Two read the rope rows: by token groups for
QK^T (`rope_groups` of them, each at least one 8-wide MMA tile; with more warps than groups, warp w takes group
w % rope_groups), by dim groups of 64 / warps for PV. A view is a SharedLinearLayout: for each bit of the
physical offset, the view coordinate stored there (the swizzle is an XOR, so the map is linear over bits).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sparse_mla_aot.contract import LAYOUTS, Variant

CHUNKS = 8
CHUNK_DIMS = 64
FP8_ROW = CHUNKS * CHUNK_DIMS  # bytes per token row of a slot's fp8 values
ROPE_DIMS = 64
SWIZZLE_UNIT = 16  # bytes: one cp.async, one ldmatrix row
SWIZZLE_ROWS = 8  # unit index ^= token % 8
MMA_N = 8  # tokens of one mma.sync tile's n: the least a rope token group holds


def v_dim(n: int) -> int:
    """The dim (within its chunk) that V's column n holds: n's low 3 bits select which 8-byte run, its high 3 bits
    the byte inside it, so the 8 columns a thread holds (n = g + 8j) are the 8 bytes from 8g. Its own inverse."""
    return 8 * (n % 8) + n // 8


def fp8_offset(token: int, byte: int) -> int:
    """Where byte `byte` of a token's fp8 row lies in a slot (bytes)."""
    return FP8_ROW * token + (byte ^ (SWIZZLE_UNIT * (token % SWIZZLE_ROWS)))


def rope_offset(token: int, dim: int) -> int:
    """Where rope dim `dim` of a token lies in a slot (bf16 elements; a unit is 8 of them)."""
    unit = SWIZZLE_UNIT // 2
    return ROPE_DIMS * token + (dim ^ (unit * (token % SWIZZLE_ROWS)))


def _bases(bits: int, coordinate: Callable[[int], tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """A view's offset bases: the coordinate stored at each power-of-two offset."""
    return tuple(coordinate(1 << b) for b in range(bits))


@dataclass(frozen=True)
class WsPlacement:
    kv_format: str
    fp8_bytes: int  # fp8 values per token (the rest of a slot row stays zero)
    rope_byte: int  # the bf16 rope's offset in a token record
    scale: str  # "ue8m0": byte c of the page's scale record is chunk c's; "fp32": 4 floats in the token record
    scale_byte: int  # fp32: the scales' offset in the token record
    rope_in_v: bool  # model1: V is the whole latent, rope included
    chunk_base: tuple[int, ...]  # per chunk: its first latent dim (= its byte in a slot row)
    chunk_scale: tuple[int, ...]  # per chunk: which scale (ue8m0 byte / fp32 index); -1: the empty chunk
    k_view: tuple[tuple[int, ...], ...]  # [group, dim, token] over a slot's fp8 rows (qk_groups; chunk g + groups j: dims 64j ..)
    v_view: tuple[tuple[int, ...], ...]  # [chunk, token, n] (dim v_dim(n))
    qk_groups: int  # the QK^T dot's batch: one group per warp of the chunks sharing a scale (v32 at 4 warps), else 8
    rope_groups: int  # token groups of the rope's QK^T: min(warps, block_t / MMA_N)
    k_rope_view: tuple[tuple[int, ...], ...]  # [group, dim, j]: token group * (block_t / rope_groups) + j
    v_rope_view: tuple[tuple[int, ...], ...]  # [group, token, j]: dim group * (64 / warps) + j
    fp8_rows: tuple[tuple[int, ...], ...]  # [token, byte]: how the producer writes a slot's fp8 rows
    rope_rows: tuple[tuple[int, ...], ...]  # [token, dim]: ... its rope rows

    @property
    def empty_chunk(self) -> int | None:
        """The chunk past the fp8 values (model1's eighth), or None."""
        return self.chunk_scale.index(-1) if -1 in self.chunk_scale else None

    def chunk_base_expression(self, chunk: str) -> str:
        """chunk_base[chunk] as arithmetic on a chunk-index expression (the bases are linear in the index's bits)."""
        b1, b2, b4 = self.chunk_base[1], self.chunk_base[2], self.chunk_base[4]
        return f"(({chunk} & 1) * {b1} + (({chunk} >> 1) & 1) * {b2} + ({chunk} >> 2) * {b4})"


def placement(variant: Variant) -> WsPlacement:
    layout = LAYOUTS[variant.kv_format]
    scaled = layout.scaled_chunks
    if layout.tile == CHUNK_DIMS:  # model1: 7 chunks of 64 dims, chunk 7 empty
        chunk_base = tuple(CHUNK_DIMS * c for c in range(CHUNKS))
        chunk_scale = tuple(c if c < len(scaled) else -1 for c in range(CHUNKS))
    else:  # v32: 4 scale groups of 128 dims; chunk c is half c // 4 of group c % 4, so both halves read scale c % 4
        groups = CHUNKS // (layout.tile // CHUNK_DIMS)
        chunk_base = tuple(layout.tile * (c % groups) + CHUNK_DIMS * (c // groups) for c in range(CHUNKS))
        chunk_scale = tuple(c % groups for c in range(CHUNKS))
    block_t, warps = variant.block_t, variant.num_warps
    # Warp w holds chunks w, w + warps, ...: where they share one scale their logits need not be apart, and one dot
    # over their dims (a group) leaves one [heads, tokens] tile to scale and sum instead of 8 / warps of them.
    qk_groups = warps if all(chunk_scale[c] == chunk_scale[c % warps] >= 0 for c in range(CHUNKS)) else CHUNKS
    rope_groups = min(warps, block_t // MMA_N)
    group_tokens, group_dims = block_t // rope_groups, ROPE_DIMS // warps

    def fp8_byte(offset: int) -> tuple[int, int]:
        """The (token, byte) that fp8_offset puts at `offset`."""
        token = offset // FP8_ROW
        return token, (offset % FP8_ROW) ^ (SWIZZLE_UNIT * (token % SWIZZLE_ROWS))

    def k(offset: int) -> tuple[int, int, int]:
        token, byte = fp8_byte(offset)
        chunk = chunk_base.index(byte & -CHUNK_DIMS)
        return chunk % qk_groups, CHUNK_DIMS * (chunk // qk_groups) + byte % CHUNK_DIMS, token

    def v(offset: int) -> tuple[int, int, int]:
        token, byte = fp8_byte(offset)
        return chunk_base.index(byte & -CHUNK_DIMS), token, v_dim(byte % CHUNK_DIMS)

    def rope_dim(offset: int) -> tuple[int, int]:
        token = offset // ROPE_DIMS
        return token, (offset % ROPE_DIMS) ^ (SWIZZLE_UNIT // 2 * (token % SWIZZLE_ROWS))

    def k_rope(offset: int) -> tuple[int, int, int]:
        token, dim = rope_dim(offset)
        return token // group_tokens, dim, token % group_tokens

    def v_rope(offset: int) -> tuple[int, int, int]:
        token, dim = rope_dim(offset)
        return dim // group_dims, token, dim % group_dims

    fp8_bits, rope_bits = (block_t * FP8_ROW - 1).bit_length(), (block_t * ROPE_DIMS - 1).bit_length()
    fp32_scale = scaled[0].scale == "fp32"
    return WsPlacement(
        kv_format=variant.kv_format, fp8_bytes=layout.nope_dims, rope_byte=layout.rope.byte,
        scale="fp32" if fp32_scale else "ue8m0", scale_byte=scaled[0].scale_byte if fp32_scale else 0,
        rope_in_v=layout.rope.in_v, chunk_base=chunk_base, chunk_scale=chunk_scale, qk_groups=qk_groups,
        rope_groups=rope_groups,
        k_view=_bases(fp8_bits, k), v_view=_bases(fp8_bits, v),
        k_rope_view=_bases(rope_bits, k_rope), v_rope_view=_bases(rope_bits, v_rope),
        fp8_rows=_bases(fp8_bits, fp8_byte), rope_rows=_bases(rope_bits, rope_dim))


def view_offsets(bases: tuple[tuple[int, ...], ...]) -> dict[tuple[int, ...], int]:
    """Every coordinate of a view and the offset it reads: the coordinate at an offset is the XOR of the bases of
    the offset's set bits."""
    found = {}
    for offset in range(1 << len(bases)):
        coordinate = [0] * len(bases[0])
        for bit, basis in enumerate(bases):
            if offset >> bit & 1:
                coordinate = [a ^ b for a, b in zip(coordinate, basis)]
        found[tuple(coordinate)] = offset
    return found
