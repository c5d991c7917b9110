"""An fp8 mma_v2 in Gluon: does it compile to a native e4m3 mma.sync for sm120, the proxy and sm90? (docs/design.md, the
ws family: the next step.)"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

MMA = gl.constexpr(gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8]))
A = gl.constexpr(gl.DotOperandLayout(0, MMA, 4))
B = gl.constexpr(gl.DotOperandLayout(1, MMA, 4))
L = gl.constexpr(gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0]))


@gluon.jit
def k(a_ptr, b_ptr, c_ptr):
    r = gl.arange(0, 64, gl.SliceLayout(1, L))
    c = gl.arange(0, 64, gl.SliceLayout(0, L))
    a = gl.load(a_ptr + r[:, None] * 64 + c[None, :]).to(gl.float8e4nv, bitcast=True)
    b = gl.load(b_ptr + r[:, None] * 64 + c[None, :]).to(gl.float8e4nv, bitcast=True)
    acc = mma_v2(gl.convert_layout(a, A), gl.convert_layout(b, B), gl.zeros([64, 64], gl.float32, MMA))
    gl.store(c_ptr + gl.convert_layout(r[:, None] * 64 + c[None, :], MMA), acc)


if __name__ == "__main__":
    # python bench/logs/qk_groups/fp8_mma_probe.py (CPU, Triton 3.9.0), 2026-12-06: for 120, 89 and 90 the PTX holds
    # mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 -- Gluon's mma_v2 takes e4m3 operands natively.
    import re

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    for arch in (120, 89, 90):
        source = GluonASTSource(k, {"a_ptr": "*u8", "b_ptr": "*u8", "c_ptr": "*fp32"}, {})
        ptx = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": 4}).asm["ptx"]
        print(arch, sorted(set(re.findall(r"mma\.sync\.aligned\.[\w.]+", ptx))))
