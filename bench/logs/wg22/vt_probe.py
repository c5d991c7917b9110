"""PV of an fp8-direct 16-head tile on sm_90a: V^T [512 dims, 64 tokens] read from the ring's fp8 bytes (four
[64 tokens, 128 B] K-blocks in wgmma's 128-byte swizzle, as QK^T's QGMMA reads them) straight into the f16 A
operand of HGMMA m64n16k16, through a view whose rows are the dims permuted so that each thread's 16 rows are 16
consecutive bytes. Counts the SASS of the load + conversion + MMAs."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fp8_wgmma_probe import compiled_opcodes  # noqa: E402  (it puts the repository on the path)
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma  # noqa: E402

FP8_TILE = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2))
F16_TILE = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2))
O_ACC = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16]))
VT_OPERAND = gl.constexpr(gl.DotOperandLayout(0, O_ACC, 2))
L = gl.constexpr(gl.BlockedLayout([1, 16], [8, 4], [4, 1], [1, 0]))


def dim_of_row(m: int) -> int:
    """V^T's row m holds dim: a thread's 16 rows (m bits 3, 6, 7, 8) are the dim's low 4 bits (16 consecutive
    bytes), the lane's and warp's row bits (0-2, 4-5) its 16-byte unit."""
    bit = lambda x, i: (x >> i) & 1
    return (bit(m, 3) | bit(m, 6) << 1 | bit(m, 7) << 2 | bit(m, 8) << 3 | (m & 7) << 4 | bit(m, 4) << 7
            | bit(m, 5) << 8)


ROW_OF_DIM = {dim_of_row(m): m for m in range(512)}


def ring_offset(t: int, d: int) -> int:
    """Byte (token t, fp8 dim d) of the ring: K-block d // 128 is a [64, 128] tile in the 128-byte swizzle."""
    return 128 * (64 * (d >> 7) + t) + 16 * (((d >> 4) & 7) ^ (t & 7)) + (d & 15)


def vt_view_bases():
    bases = []
    for b in range(15):
        o = 1 << b
        if b < 7:
            t, d = 0, o  # within a row: the swizzle is 0 at t = 0
        elif b < 13:
            t = o >> 7
            d = 16 * (t & 7)  # undo the swizzle: the unit at 0 of row t holds unit t & 7
        else:
            t, d = 0, 128 * (o >> 13)
        assert ring_offset(t, d) == o
        bases.append([ROW_OF_DIM[d], t])
    return bases


VT_VIEW = gl.constexpr(gl.SharedLinearLayout(offset_bases=vt_view_bases()))


@gluon.constexpr_function
def rows_first(layout):
    """The layout with its register bases along the rows first (consecutive registers: consecutive bytes)."""
    rows = sorted((b for b in layout.reg_bases if b[0]), key=lambda b: b[0])
    return gl.DistributedLinearLayout(reg_bases=rows + [b for b in layout.reg_bases if not b[0]],
                                      lane_bases=layout.lane_bases, warp_bases=layout.warp_bases,
                                      block_bases=layout.block_bases, shape=layout.shape)


@gluon.jit
def probe(k_ptr, p_ptr, o_ptr):
    r = gl.arange(0, 256, gl.SliceLayout(1, L))
    c = gl.arange(0, 128, gl.SliceLayout(0, L))
    ring = gl.allocate_shared_memory(gl.uint8, [256, 128], FP8_TILE, gl.load(k_ptr + r[:, None] * 128 + c[None, :]))
    h = gl.arange(0, 16, gl.SliceLayout(1, L))
    t64 = gl.arange(0, 64, gl.SliceLayout(0, L))
    p_smem = gl.allocate_shared_memory(gl.float16, [16, 64], F16_TILE, gl.load(p_ptr + h[:, None] * 64 + t64[None, :]))
    fence_async_shared()
    VT_LOAD: gl.constexpr = rows_first(gl.to_linear_layout(VT_OPERAND, [512, 64]))
    v = ring.reinterpret(gl.uint8, [512, 64], VT_VIEW).load(VT_LOAD)
    v16 = gl.convert_layout(v.to(gl.float8e4nv, bitcast=True).to(gl.float16), VT_OPERAND)
    o = warpgroup_mma(v16, p_smem.permute([1, 0]), gl.zeros([512, 16], gl.float32, O_ACC), use_acc=False)
    oo = gl.arange(0, 512, gl.SliceLayout(1, O_ACC))[:, None] * 16 + gl.arange(0, 16, gl.SliceLayout(0, O_ACC))[None, :]
    gl.store(o_ptr + oo, o)


if __name__ == "__main__":
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(3)}
    _, opcodes = compiled_opcodes(probe, {"k_ptr": "*u8", "p_ptr": "*fp16", "o_ptr": "*fp32"}, aligned)
    for op, n in opcodes.most_common(25):
        print(f"{n:5d} {op}")
