"""CPU-only probe (Triton 3.9, sm_90a): a 2-CTA cluster Gluon kernel in which each CTA stores a register tile into
its peer's shared memory with inline st.async (mapa + complete_tx on the peer's mbarrier) and waits for its own."""
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

NUM_CTAS = int(sys.argv[1])
CGA2 = [[0, 0]] if NUM_CTAS == 2 else []  # each CTA holds the whole tensor
LAYOUT = gl.constexpr(gl.BlockedLayout([1, 4], [32, 1], [4, 1], [1, 0], cga_layout=CGA2))
ROW = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0], cga_layout=CGA2))
BAR = gl.constexpr(mbarrier.MBarrierLayout(cga_layout=[[0]] if NUM_CTAS == 2 else []))


@gluon.constexpr_function
def _peer_store(outputs, inputs):
    tile, bar, peer, offset, values = inputs
    v = ", ".join(values)
    return "\n".join([
        "{ .reg .b32 ra, rb;",
        f"add.u32 ra, {tile[0]}, {offset[0]};",
        f"mapa.shared::cluster.u32 ra, ra, {peer[0]};",
        f"mapa.shared::cluster.u32 rb, {bar[0]}, {peer[0]};",
        f"st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [ra], {{{v}}}, [rb];",
        "}"])


@gluon.jit
def probe(x_ptr, out_ptr):
    rank = gl.inline_asm("mov.u32 $0, %cluster_ctarank;", "=r", [], gl.int32)
    tile = gl.allocate_shared_memory(gl.float32, [128, 4], ROW)
    bar = gl.allocate_shared_memory(gl.int64, [1, 1], BAR)
    mbarrier.init(bar.index(0), count=1)
    mbarrier.expect(bar.index(0), 128 * 4 * 4)
    gl.inline_asm("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;", "", [])
    rows = gl.arange(0, 128, gl.SliceLayout(1, LAYOUT))
    cols = gl.arange(0, 4, gl.SliceLayout(0, LAYOUT))
    x = gl.load(x_ptr + rank * 512 + rows[:, None] * 4 + cols[None, :])
    offset = gl.convert_layout(rows * 16, gl.SliceLayout(1, LAYOUT))
    gl.inline_asm(_peer_store, ("r", "r", "r", "r", "r"), [tile, bar.index(0), 1 - rank, offset, x.to(gl.int32, bitcast=True)])
    mbarrier.wait(bar.index(0), 0)
    gl.store(out_ptr + rank * 512 + rows[:, None] * 4 + cols[None, :], tile.load(LAYOUT))
    gl.inline_asm("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;", "", [])


for num_ctas in (NUM_CTAS,):
    try:
        src = GluonASTSource(probe, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {}, {})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": num_ctas})
        ptx = k.asm["ptx"]
        print(num_ctas, "compiled;", [l.strip() for l in ptx.splitlines() if "cluster" in l and (".req" in l or ".explicit" in l or "nctapercluster" in l)][:3],
              "st.async" in ptx, "mapa" in ptx, k.metadata.num_ctas if hasattr(k.metadata, "num_ctas") else None)
    except Exception as e:
        print(num_ctas, "failed:", str(e).splitlines()[-3:] if str(e) else type(e))
