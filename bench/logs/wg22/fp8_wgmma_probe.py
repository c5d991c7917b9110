"""Does Gluon (Triton 3.9) compile, for sm_90a, the two wgmmas an fp8-direct 16-head tile would need?
QK^T with the tokens as rows: S^T [64 tokens, 16 heads] = K [64, 128 fp8 dims] q^T, both e4m3 in 128-byte swizzled
shared memory (the ring's bytes as gathered, no dequantization). PV: O^T [64 dims, 16 heads] = V^T [64 dims,
64 tokens] P^T, V^T in registers as f16 (converted from the same fp8 bytes), P^T f16 in shared memory."""
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path[:0] = ["src", "."]  # run from the repository root
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, warpgroup_mma,  # noqa: E402
                                                              warpgroup_mma_wait)

from build_tools import cubin_inspect  # noqa: E402

FP8_TILE = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2))
F16_TILE = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2))
S_ACC = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 32]))
O_ACC = gl.constexpr(gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16]))
VT_OPERAND = gl.constexpr(gl.DotOperandLayout(0, O_ACC, 2))
L = gl.constexpr(gl.BlockedLayout([1, 16], [8, 4], [4, 1], [1, 0]))


@gluon.jit
def probe(k_ptr, q_ptr, p_ptr, s_ptr, o_ptr):
    t = gl.arange(0, 64, gl.SliceLayout(1, L))
    d = gl.arange(0, 128, gl.SliceLayout(0, L))
    h = gl.arange(0, 16, gl.SliceLayout(1, L))
    k_bytes = gl.load(k_ptr + t[:, None] * 128 + d[None, :])
    q_bytes = gl.load(q_ptr + h[:, None] * 128 + d[None, :])
    k_smem = gl.allocate_shared_memory(gl.float8e4nv, [64, 128], FP8_TILE, k_bytes.to(gl.float8e4nv, bitcast=True))
    q_smem = gl.allocate_shared_memory(gl.float8e4nv, [16, 128], FP8_TILE, q_bytes.to(gl.float8e4nv, bitcast=True))
    t64 = gl.arange(0, 64, gl.SliceLayout(0, L))
    p = gl.load(p_ptr + h[:, None] * 64 + t64[None, :])
    p_smem = gl.allocate_shared_memory(gl.float16, [16, 64], F16_TILE, p)
    fence_async_shared()
    s = warpgroup_mma(k_smem, q_smem.permute([1, 0]), gl.zeros([64, 16], gl.float32, S_ACC), use_acc=False,
                      is_async=True)
    s = warpgroup_mma_wait(0, deps=[s])
    so = gl.arange(0, 64, gl.SliceLayout(1, S_ACC))[:, None] * 16 + gl.arange(0, 16, gl.SliceLayout(0, S_ACC))[None, :]
    gl.store(s_ptr + so, s)
    # V^T: the first 64 fp8 dims of the same tokens, as f16 in registers
    v = k_smem.slice(0, 64, dim=1).permute([1, 0]).load(VT_OPERAND)
    o = warpgroup_mma(v.to(gl.float16), p_smem.permute([1, 0]), gl.zeros([64, 16], gl.float32, O_ACC), use_acc=False)
    oo = gl.arange(0, 64, gl.SliceLayout(1, O_ACC))[:, None] * 16 + gl.arange(0, 16, gl.SliceLayout(0, O_ACC))[None, :]
    gl.store(o_ptr + oo, o)


def compiled_opcodes(kernel, signature: dict, attrs: dict | None = None) -> tuple[str, Counter]:
    """The kernel compiled for sm_90a at 4 warps: its PTX and how often each SASS opcode occurs in its cubin."""
    compiled = triton.compile(GluonASTSource(kernel, signature, {}, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4})
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "probe.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        sass = cubin_inspect._cuobjdump("--dump-sass", str(cubin))
    opcodes = Counter(text.split()[1 if text.startswith("@") else 0]
                      for _, text in cubin_inspect.SASS_INSTRUCTION.findall(sass))
    return compiled.asm["ptx"], opcodes


if __name__ == "__main__":
    ptx, opcodes = compiled_opcodes(probe, {"k_ptr": "*u8", "q_ptr": "*u8", "p_ptr": "*fp16", "s_ptr": "*fp32",
                                            "o_ptr": "*fp32"})
    print(sorted(set(re.findall(r"wgmma\.mma_async[\w.]+", ptx))))
    print({op: n for op, n in sorted(opcodes.items()) if cubin_inspect.MMA_OPCODE.search(op) or op.startswith(("LDS", "F2FP"))})
