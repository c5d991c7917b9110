"""CPU-only probe (Triton 3.9, sm_90a): with num_ctas (argv[1]) CTAs per cluster, each holding whole tensors (the
CGA layouts replicate), does a warp_specialize kernel with a warpgroup_mma consumer compile?"""
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                              warpgroup_mma_wait)

NUM_CTAS = int(sys.argv[1])
C2 = [[0, 0]] if NUM_CTAS == 2 else []
TILE = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2, cga_layout=C2))
ACC = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16],
                                             cga_layout=C2))
LOAD = gl.constexpr(gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0], cga_layout=C2))
BAR = gl.constexpr(mbarrier.MBarrierLayout(cga_layout=[[0]] if NUM_CTAS == 2 else []))


@gluon.jit
def _consumer(a, b, full, out_ptr):
    mbarrier.wait(full.index(0), 0)
    acc = warpgroup_mma(a, b.permute([1, 0]), gl.zeros([64, 64], gl.float32, ACC), use_acc=False, is_async=True)
    acc = warpgroup_mma_wait(0, deps=[acc])
    rows = gl.arange(0, 64, gl.SliceLayout(1, ACC))
    cols = gl.arange(0, 64, gl.SliceLayout(0, ACC))
    gl.store(out_ptr + rows[:, None] * 64 + cols[None, :], acc)


@gluon.jit
def _producer(x_ptr, b, full):
    rows = gl.arange(0, 64, gl.SliceLayout(1, LOAD))
    cols = gl.arange(0, 64, gl.SliceLayout(0, LOAD))
    b.store(gl.load(x_ptr + rows[:, None] * 64 + cols[None, :]))
    fence_async_shared()
    mbarrier.arrive(full.index(0))


@gluon.jit
def probe(x_ptr, out_ptr):
    rows = gl.arange(0, 64, gl.SliceLayout(1, LOAD))
    cols = gl.arange(0, 64, gl.SliceLayout(0, LOAD))
    a = gl.allocate_shared_memory(gl.bfloat16, [64, 64], TILE, gl.load(x_ptr + rows[:, None] * 64 + cols[None, :]))
    b = gl.allocate_shared_memory(gl.bfloat16, [64, 64], TILE)
    full = gl.allocate_shared_memory(gl.int64, [1, 1], BAR)
    mbarrier.init(full.index(0), count=1)
    fence_async_shared()
    gl.warp_specialize([(_consumer, (a, b, full, out_ptr)), (_producer, (x_ptr, b, full))], [4], [96])


src = GluonASTSource(probe, {"x_ptr": "*bf16", "out_ptr": "*fp32"}, {}, {})
try:
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": NUM_CTAS})
    ptx = k.asm["ptx"]
    print(NUM_CTAS, "compiled;", ".reqnctapercluster" in ptx, "wgmma" in ptx, "setmaxnreg" in ptx)
except Exception as e:
    print(NUM_CTAS, "failed:", " | ".join(str(e).splitlines()[-4:]))
