"""build_tools.ptx_barriers: which CTA barriers go, on PTX shaped like Triton 3.9's 8-warp wgmma code."""
import pytest

from build_tools.ptx_barriers import PASS_ID, drop_redundant_barriers

# A tile as Triton 3.9 lowers it: operand stores, then three wgmma dots, each waited and followed by a barrier,
# then a store into another operand buffer. Only the barriers between the dots order nothing.
TILE = """\
$L__BB0_4:
\tst.shared.v4.b32 \t[%r46], {%r94, %r95, %r96, %r97};
\tfence.proxy.async.shared::cta;
\tbar.sync \t0;
\twgmma.fence.sync.aligned;
\twgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%f1, %f2}, %rd1, %rd2, p, 1, 1, 0, 1;
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tbar.sync \t0;
$L__tmp7:
\tfence.proxy.async.shared::cta;
\tld.shared.v4.b32 \t{%r1, %r2, %r3, %r4}, [%r46];
\tst.local.u32 \t[%SP+4], %r1;
\twgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%f1, %f2}, %rd3, %rd4, p, 1, 1, 0, 1;
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tbar.sync \t0;
\twgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%f1, %f2}, %rd5, %rd6, p, 1, 1, 0, 1;
\twgmma.wait_group.sync.aligned 0;
\tbar.sync \t0;
\tst.shared.v4.b32 \t[%r49+131072], {%r392, %r393, %r394, %r395};
\tbar.sync \t0;
\t@%p66 bra \t$L__BB0_4;
"""


def barrier_lines(ptx):
    return [i for i, line in enumerate(ptx.split("\n")) if line.split() == ["bar.sync", "0;"]]


def test_barriers_between_reads_go_and_those_next_to_a_write_stay():
    out, dropped = drop_redundant_barriers(TILE)
    assert dropped == 2
    # kept: after the operand stores, after the last dot's wait (a store follows), after that store
    assert barrier_lines(TILE) == [3, 8, 16, 19, 21] and barrier_lines(out) == [3, 17, 19]
    assert out.count("wgmma.mma_async") == 3 and out.count("st.local") == 1  # nothing else touched


READ = "\twgmma.wait_group.sync.aligned 0;\n\tld.shared.u32 \t%r1, [%r2];\n"
BAR = "\tbar.sync \t0;\n"


@pytest.mark.parametrize("write", [
    "\tst.shared.u32 \t[%r1], %r2;",
    "\t@%p1 st.global.v4.b32 [ %rd820 + 0 ], { %r1, %r2, %r3, %r4 };",
    "\tst.u32 \t[%rd1], %r2;",  # generic: may address shared memory
    "\tstmatrix.sync.aligned.m8n8.x4.shared.b16 [%r1], {%r2, %r3, %r4, %r5};",
    "\tcp.async.wait_group 0;",
    "\tatom.shared.add.u32 \t%r1, [%r2], 1;",
    "\tred.global.add.f32 \t[%rd1], %f1;",
    "\tmbarrier.arrive.shared::cta.b64 \t%rd1, [%r1];",
    "\t// begin inline asm\n\t{ .reg .b32 t; mov.b32 t, %r1; st.shared.b32 [%r2], t; }\n\t// end inline asm",
    "\tbar.sync \t1, 256;",  # a named barrier is not ours to reason about: it keeps its neighbours
    "$L__BB0_9:",  # a branch target: another path enters here
    "\tret;",
])
def test_a_write_or_a_boundary_keeps_the_barriers_on_both_sides(write):
    def ptx(segments):  # four barriers around three segments, then the branch to $L__BB0_9
        return BAR + BAR.join(segments) + BAR + "\t@%p1 bra \t$L__BB0_9;\n"

    assert drop_redundant_barriers(ptx([READ, READ, READ]))[1] == 2
    middle = ptx([READ, READ + write + "\n", READ])
    assert drop_redundant_barriers(middle) == (middle, 0)
    written_first = ptx([write + "\n" + READ, READ, READ])
    out, dropped = drop_redundant_barriers(written_first)
    b0, b1, _, b3 = barrier_lines(written_first)
    assert dropped == 1 and barrier_lines(out) == [b0, b1, b3 - 1]  # only the barrier between two reads went


def test_debug_labels_and_loads_are_not_boundaries():
    ptx = ("\tbar.sync \t0;\n\tld.shared.u32 \t%r1, [%r2];\n\tbar.sync \t0;\n$L__tmp3:\n"
           "\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r3, %r4, %r5, %r6}, [%r2];\n\tbar.sync \t0;\n"
           "\t@%p1 bra \t$L__BB0_2;\n")
    out, dropped = drop_redundant_barriers(ptx)
    assert dropped == 1 and barrier_lines(out) == [0, 4]


def test_the_first_and_last_barrier_and_a_lone_one_stay():
    for ptx in ("\tbar.sync \t0;\n", "\tbar.sync \t0;\n\tbar.sync \t0;\n", ""):
        assert drop_redundant_barriers(ptx) == (ptx, 0)


def test_the_pass_is_in_the_toolchain_and_the_cubin_stages_key():
    from build_tools import artifact
    from build_tools.compile import AssembleStage
    from build_tools.variant import get_target

    assert PASS_ID in artifact.toolchain(get_target("sm90"))["ir_passes"]
    assert PASS_ID in AssembleStage("sm_90a", ())()[0]
