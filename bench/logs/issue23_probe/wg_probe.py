"""Compile-only probe (sm_90a): can Gluon in Triton 3.9 express FlashMLA's sm90 sparse decode structure?
A producer warpgroup dequantizes fp8 tokens into a bf16 K/V tile in an NVMMA-swizzled ring; two consumer
warpgroups each run QK^T with wgmma (q from shared memory, K^T a permuted view of the tile) and PV on their half of
V's 512 dims with P from registers; full/empty mbarriers; setmaxnreg through worker_num_regs. Not part of the product: a record of what compiles (docs/design.md).

    python3 bench/logs/issue23_probe/wg_probe.py [consumer1_registers producer_registers [out.cubin]]
    (CPU, Triton 3.9; TRITON_ALWAYS_COMPILE=1 when changing the registers: they are not in Triton's cache key)"""
import sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, warpgroup_mma, \
    warpgroup_mma_init, warpgroup_mma_wait

H = gl.constexpr(64)
T = gl.constexpr(64)
D = gl.constexpr(576)
DV = gl.constexpr(512)
S = gl.constexpr(2)
TILE = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2))
ACC_S = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16]))
ACC_O = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 256, 16]))
LOAD = gl.constexpr(gl.BlockedLayout([1, 16], [4, 8], [4, 1], [1, 0]))


@gluon.jit
def _producer(kv_ptr, idx_ptr, n_tiles, ring, ring_rope, full, empty):
    rows = gl.arange(0, T, gl.SliceLayout(1, LOAD))
    cols = gl.arange(0, 64, gl.SliceLayout(0, LOAD))
    for i in range(n_tiles):
        slot = i % S
        tok = gl.load(idx_ptr + i * T + rows)
        mbarrier.wait(empty.index(slot), ((i // S) & 1) ^ 1)
        for c in gl.static_range(8):
            raw = gl.load(kv_ptr + tok.to(gl.int64)[:, None] * 656 + c * 64 + cols[None, :])
            scale = gl.load((kv_ptr + tok.to(gl.int64) * 656 + 512 + (c // 2) * 4).to(gl.pointer_type(gl.float32)))
            vals = (raw.to(gl.float8e4nv, bitcast=True).to(gl.float32) * scale[:, None]).to(gl.bfloat16)
            ring.index(slot).slice(c * 64, 64, dim=1).store(vals)
        rc = gl.arange(0, 64, gl.SliceLayout(0, LOAD))
        rope = gl.load((kv_ptr + tok.to(gl.int64)[:, None] * 656 + 528).to(gl.pointer_type(gl.bfloat16)) + rc[None, :])
        ring_rope.index(slot).store(rope)
        fence_async_shared()
        mbarrier.arrive(full.index(slot), count=1)


@gluon.jit
def _consumer(q_smem, q_rope, out_ptr, n_tiles, ring, ring_rope, full, empty, half: gl.constexpr):
    m_i = gl.full([H], float("-inf"), gl.float32, gl.SliceLayout(1, ACC_S))
    acc = gl.zeros([H, DV // 2], gl.float32, ACC_O)
    for i in range(n_tiles):
        slot = i % S
        mbarrier.wait(full.index(slot), (i // S) & 1)
        tile = ring.index(slot)
        s = warpgroup_mma(q_smem, tile.permute([1, 0]), gl.zeros([H, T], gl.float32, ACC_S), is_async=True)
        s = warpgroup_mma(q_rope, ring_rope.index(slot).permute([1, 0]), s, is_async=True)
        s = warpgroup_mma_wait(0, deps=[s])
        m_new = gl.maximum(m_i, gl.max(s, 1))
        p = gl.exp2(s - m_new[:, None])
        acc = acc * gl.convert_layout(gl.exp2(m_i - m_new), gl.SliceLayout(1, ACC_O))[:, None]
        m_i = m_new
        p16 = gl.convert_layout(p.to(gl.bfloat16), gl.DotOperandLayout(0, ACC_O, 2))
        v = tile.slice(half * (DV // 2), DV // 2, dim=1)
        o = warpgroup_mma(p16, v, warpgroup_mma_init(acc), is_async=True)
        acc = warpgroup_mma_wait(0, deps=[o])
        mbarrier.arrive(empty.index(slot), count=1)
    rows = gl.arange(0, H, gl.SliceLayout(1, ACC_O))
    cols = gl.arange(0, DV // 2, gl.SliceLayout(0, ACC_O)) + half * (DV // 2)
    gl.store(out_ptr + rows[:, None] * DV + cols[None, :], acc.to(gl.bfloat16))


@gluon.jit
def _consumer0(q_smem, q_rope, out_ptr, n_tiles, ring, ring_rope, full, empty):
    _consumer(q_smem, q_rope, out_ptr, n_tiles, ring, ring_rope, full, empty, 0)


@gluon.jit
def _consumer1(q_smem, q_rope, out_ptr, n_tiles, ring, ring_rope, full, empty):
    _consumer(q_smem, q_rope, out_ptr, n_tiles, ring, ring_rope, full, empty, 1)


@gluon.jit
def probe(q_ptr, kv_ptr, idx_ptr, out_ptr, n_tiles):
    row = gl.program_id(0)  # program r: index row r, output row r (one shared q)
    idx_ptr += row * n_tiles * T
    out_ptr += row * H * DV
    q_smem = gl.allocate_shared_memory(gl.bfloat16, [H, DV], TILE)
    q_rope = gl.allocate_shared_memory(gl.bfloat16, [H, 64], TILE)
    qr = gl.arange(0, H, gl.SliceLayout(1, LOAD))
    qc = gl.arange(0, DV, gl.SliceLayout(0, LOAD))
    q_smem.store(gl.load(q_ptr + qr[:, None] * D + qc[None, :]))
    qrc = gl.arange(0, 64, gl.SliceLayout(0, LOAD))
    q_rope.store(gl.load(q_ptr + qr[:, None] * D + DV + qrc[None, :]))
    ring = gl.allocate_shared_memory(gl.bfloat16, [S, T, DV], TILE)
    ring_rope = gl.allocate_shared_memory(gl.bfloat16, [S, T, 64], TILE)
    full = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(S):
        mbarrier.init(full.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)
    fence_async_shared()
    gl.warp_specialize([
        (_consumer0, (q_smem, q_rope, out_ptr, n_tiles, ring, ring_rope, full, empty)),
        (_consumer1, (q_smem, q_rope, out_ptr, n_tiles, ring, ring_rope, full, empty)),
        (_producer, (kv_ptr, idx_ptr, n_tiles, ring, ring_rope, full, empty)),
    ], [4, 4], [int(sys.argv[1]) if len(sys.argv) > 1 else 232, int(sys.argv[2]) if len(sys.argv) > 2 else 40])


src = GluonASTSource(probe, {"q_ptr": "*bf16", "kv_ptr": "*u8", "idx_ptr": "*i32", "out_ptr": "*bf16",
                             "n_tiles": "i32"}, {}, {})
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
open(sys.argv[3] if len(sys.argv) > 3 else "wg_probe.cubin", "wb").write(k.asm["cubin"])
print("compiled: shared", k.metadata.shared, "warps", k.metadata.num_warps)
