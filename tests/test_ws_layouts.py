"""The ws family's data placement (build_tools.ws_layouts), which its template prints as literals and no interpreter
can run: the slot rows are swizzled as the producer writes them, the K, V and rope views read each chunk's own
bytes through that swizzle, the chunks cover every fp8 dim once with the right scale, and the template writes V's
column n of chunk c to dim chunk_base[c] + v_dim(n)."""
import pytest
import torch

from build_tools import render
from build_tools.ws_layouts import (CHUNK_DIMS, CHUNKS, FP8_ROW, ROPE_DIMS, fp8_offset, placement, rope_offset, v_dim,
                                    view_offsets)
from sparse_mla_aot.contract import LAYOUTS, Variant

# (16, 4) and (32, 8): fewer rope token groups than warps; v32 at 4 warps: QK^T groups of two chunks
VARIANTS = [Variant(kv, "ws", 16, bt, w, 2) for kv in ("v32", "model1") for bt, w in ((16, 4), (32, 4), (32, 8), (64, 8))]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_the_views_read_each_chunks_bytes_through_the_swizzle(variant):
    ws, bt, w = placement(variant), variant.block_t, variant.num_warps
    groups, group_tokens = ws.qk_groups, bt // ws.rope_groups
    rows, k, v = view_offsets(ws.fp8_rows), view_offsets(ws.k_view), view_offsets(ws.v_view)
    rope_rows, k_rope, v_rope = view_offsets(ws.rope_rows), view_offsets(ws.k_rope_view), view_offsets(ws.v_rope_view)
    for t in range(bt):
        assert [rows[t, byte] for byte in range(FP8_ROW)] == [fp8_offset(t, byte) for byte in range(FP8_ROW)]
        assert [rope_rows[t, d] for d in range(ROPE_DIMS)] == [rope_offset(t, d) for d in range(ROPE_DIMS)]
        for c in range(CHUNKS):
            base = ws.chunk_base[c]
            group, first = c % groups, CHUNK_DIMS * (c // groups)  # chunk c is dims first.. of its QK^T group
            assert [k[group, first + d, t] for d in range(CHUNK_DIMS)] == [fp8_offset(t, base + d) for d in
                                                                            range(CHUNK_DIMS)]
            assert [v[c, t, n] for n in range(CHUNK_DIMS)] == [fp8_offset(t, base + v_dim(n)) for n in
                                                               range(CHUNK_DIMS)]
        for d in range(ROPE_DIMS):
            assert k_rope[t // group_tokens, d, t % group_tokens] == rope_offset(t, d)
            assert v_rope[d // (ROPE_DIMS // w), t, d % (ROPE_DIMS // w)] == rope_offset(t, d)


def test_eight_consecutive_tokens_put_a_unit_in_eight_bank_groups():
    """ldmatrix reads 8 rows of 16 bytes, one per token: unswizzled, rows 512 bytes apart share 4 banks (8-way
    conflicts); with the swizzle each token's unit lands in its own 16-byte column of the 128-byte bank window."""
    for unit in range(FP8_ROW // 16):
        assert sorted(fp8_offset(t, 16 * unit) % 128 for t in range(8)) == list(range(0, 128, 16))
    for unit in range(ROPE_DIMS // 8):
        assert sorted(rope_offset(t, 8 * unit) % 64 for t in range(8)) == list(range(0, 64, 8))


def test_v_dim_is_a_permutation_putting_a_threads_columns_in_8_consecutive_bytes():
    assert sorted(v_dim(n) for n in range(CHUNK_DIMS)) == list(range(CHUNK_DIMS))
    for g in range(8):  # mma.sync's B operand gives lane group g the columns g, g + 8, ..., g + 56
        assert [v_dim(g + 8 * j) for j in range(8)] == list(range(8 * g, 8 * g + 8))


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_chunks_cover_every_fp8_dim_once_with_its_scale(kv_format):
    ws, layout = placement(Variant(kv_format, "ws", 16, 64, 8, 2)), LAYOUTS[kv_format]
    covered = []
    for base, scale in zip(ws.chunk_base, ws.chunk_scale):
        dims = range(base, base + CHUNK_DIMS)
        if scale < 0:  # the empty chunk lies past the fp8 values: zero bytes in every slot row
            assert base >= layout.nope_dims
            continue
        chunk = layout.scaled_chunks[scale]
        assert chunk.dim <= base and base + CHUNK_DIMS <= chunk.dim + chunk.width, (base, scale)
        covered += dims
    assert sorted(covered) == list(range(layout.nope_dims))
    assert ws.fp8_bytes == layout.nope_dims and ws.rope_byte == layout.rope.byte
    assert ws.rope_in_v == layout.rope.in_v


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_the_template_writes_columns_where_the_views_read_them(kv_format):
    variant = Variant(kv_format, "ws", 16, 64, 8, 2)
    ws = placement(variant)
    expression = ws.chunk_base_expression("c")
    assert [eval(expression, {"c": c}) for c in range(CHUNKS)] == list(ws.chunk_base)
    source = render.render_split(variant).source
    # out: chunk_base[c] plus the column of the [8, 8] -> transposed view of n, which is v_dim(n)
    assert f"out_dim = ({ws.chunk_base_expression('out_chunk')}[:, None, None]" in source
    assert "gl.permute(gl.reshape(acc, [8, acc.shape[1], 8, 8]), [0, 1, 3, 2])" in source
    assert [8 * (n % 8) + n // 8 for n in range(CHUNK_DIMS)] == [v_dim(n) for n in range(CHUNK_DIMS)]
    assert f"chunk_base = {ws.chunk_base_expression('chunk')}" in source
    assert f"K_VIEW = gl.constexpr(gl.SharedLinearLayout(offset_bases={[list(b) for b in ws.k_view]}))" in source
    assert f"V_VIEW = gl.constexpr(gl.SharedLinearLayout(offset_bases={[list(b) for b in ws.v_view]}))" in source


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_qk_groups_hold_one_warps_chunks_that_share_a_scale_and_rope_groups_one_mma_tile(variant):
    ws, w = placement(variant), variant.num_warps
    assert ws.qk_groups == (4 if (variant.kv_format, w) == ("v32", 4) else CHUNKS)
    for c in range(CHUNKS):  # chunk c is on warp c % w, in group c % qk_groups: the same warp, the same scale
        assert (c % ws.qk_groups) % w == c % w and ws.chunk_scale[c] == ws.chunk_scale[c % ws.qk_groups]
    assert ws.rope_groups == min(w, variant.block_t // 8)


def test_the_template_regroups_q_and_p_as_the_k_view_groups_chunks():
    """q16 [8 chunks, heads, 64] becomes [4 groups, heads, 128] (group g: chunk g + 4j as dims 64j ..), and P per
    group becomes P per chunk (chunk c takes group c % 4's): the template's reshapes, replayed with torch's, whose
    reshape / permute / stack have the same row-major meaning as Gluon's reshape / permute / join."""
    source = render.render_split(Variant("v32", "pingpong", 16, 32, 4, 2), register_reallocation=True).source
    assert "q16 = gl.reshape(gl.permute(gl.reshape(q16, [2, 4, 16, 64]), [1, 2, 0, 3]), [4, 16, 128])" in source
    assert ("gl.reshape(gl.permute(gl.join(groups, groups), joined_axis_first(groups.shape)), "
            "per_chunk_shape(groups.shape))") in source
    assert "return [len(shape)] + list(range(len(shape)))" in source and "return [8] + list(shape[1:])" in source
    q = torch.arange(8 * 16 * 64).reshape(8, 16, 64)
    grouped = q.reshape(2, 4, 16, 64).permute(1, 2, 0, 3).reshape(4, 16, 128)
    for c in range(CHUNKS):
        assert torch.equal(grouped[c % 4, :, 64 * (c // 4):64 * (c // 4) + 64], q[c])
    p = torch.arange(4 * 16 * 32).reshape(4, 16, 32)
    per_chunk = torch.stack([p, p], -1).permute([p.dim()] + list(range(p.dim()))).reshape([8] + list(p.shape[1:]))
    assert all(torch.equal(per_chunk[c], p[c % 4]) for c in range(CHUNKS))
