"""Render and compile the fp8-operand wg kernel (templates/sparse_mla_split_wgf8.py.j2) for sm90 on the CPU and
report its resources and the SASS of each loop: CPU only (Triton 3.9.0).

    python bench/logs/wg23/compile_probe.py model1_wg_bh16_bt64_w4_s4 [--keep DIR]
"""
import argparse
import pathlib
import sys
import tempfile
from collections import Counter

sys.path[:0] = ["src", "."]
from build_tools import compile as compile_stage, cubin_inspect, render  # noqa: E402
from build_tools.variant import get_target  # noqa: E402
from sparse_mla_aot import contract  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("variants", nargs="+")
parser.add_argument("--keep", type=pathlib.Path, default=None, help="write the source, PTX-free cubin and SASS here")
args = parser.parse_args()
target = get_target("sm90")
for name in args.variants:
    variant = contract.Variant.parse(name)
    rendered = render.render_split(variant, grid_dependency=target.grid_dependency,
                                   register_reallocation=target.register_reallocation)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or pathlib.Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / f"{variant.name}.py"
        source.write_text(rendered.source)
        kernel = compile_stage.compile_kernel(rendered, source, target, variant.num_warps, variant.num_stages,
                                              variant.launch_warps)
        cubin = folder / f"{variant.name}.cubin"
        cubin.write_bytes(kernel.cubin)
        resources = cubin_inspect.inspect_cubin(cubin, kernel.kernel_name, kernel.shared_bytes)
        sass = cubin_inspect._cuobjdump("--dump-sass", str(cubin))
        if args.keep:
            (folder / f"{variant.name}.sass").write_text(sass)
    print(f"{name}: {variant.launch_warps} warps, {resources.total_shared_bytes} B shared, registers "
          f"{resources.registers}, loop spill stores / loads {resources.loop_spill_stores} / "
          f"{resources.loop_spill_loads}")
    program = [(int(a, 16), t) for a, t in cubin_inspect.SASS_INSTRUCTION.findall(sass)]
    exit_address = max(a for a, t in program if t.startswith("EXIT"))
    for first, last in cubin_inspect.loop_ranges(program):
        loop = [t for a, t in program if first <= a <= last]
        if last > exit_address or len(loop) < 16 or any("USETMAXREG" in t for t in loop):
            continue  # the barrier-wait retry stubs after the code, and setmaxnreg's retry loops
        ops = Counter(t.split()[1 if t.startswith("@") else 0].split(".")[0] for t in loop)
        top = ", ".join(f"{op} {n}" for op, n in ops.most_common(12))
        spills = f"spills {ops['STL']} / {ops['LDL']}, " if ops["STL"] or ops["LDL"] else ""
        print(f"  loop {first:#x}-{last:#x}: {len(loop)} instructions, {spills}{top}")
