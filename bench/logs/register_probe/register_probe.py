"""Spills of a pingpong variant under another register budget or consumer-group count (the 2026-12-05 register
probe, bench/RESULTS.md). CPU only: renders with build_tools.render, compiles with Triton for the target and
counts spill stores / loads inside the SASS loops as the build's report does.

    python bench/logs/register_probe/register_probe.py v32_pingpong_bh16_bt32_w4_s4 sm90 --groups 3 --consumer-registers 160
    python bench/logs/register_probe/register_probe.py ... --templates <dir with q_in_shared_memory.patch applied>
"""
import argparse
import pathlib
import sys
import tempfile

sys.path[:0] = ["src", "."]
from build_tools import compile as compile_stage, cubin_inspect, paths, render  # noqa: E402
from build_tools.variant import get_target  # noqa: E402
from sparse_mla_aot import contract  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("variant")
parser.add_argument("target")
parser.add_argument("--groups", type=int, default=2, help="consumer groups of the pingpong family")
parser.add_argument("--consumer-registers", type=int, default=render.WS_CONSUMER_REGISTERS)
parser.add_argument("--producer-registers", type=int, default=24)
parser.add_argument("--templates", type=pathlib.Path, default=None, help="render from this templates folder")
args = parser.parse_args()
if args.templates:
    paths.templates_dir = lambda: args.templates
contract.WS_CONSUMER_GROUPS["pingpong"] = args.groups
render.WS_CONSUMER_REGISTERS = args.consumer_registers
render.WS_PRODUCER_REGISTERS = {**render.WS_PRODUCER_REGISTERS, args.groups: args.producer_registers}
variant, target = contract.Variant.parse(args.variant), get_target(args.target)
rendered = render.render_split(variant, grid_dependency=target.grid_dependency,
                               register_reallocation=target.register_reallocation)
with tempfile.TemporaryDirectory() as tmp:
    source = pathlib.Path(tmp) / f"{variant.name}.py"
    source.write_text(rendered.source)
    kernel = compile_stage.compile_kernel(rendered, source, target, variant.num_warps, variant.num_stages,
                                          variant.launch_warps)
    cubin = pathlib.Path(tmp) / f"{variant.name}.cubin"
    cubin.write_bytes(kernel.cubin)
    resources = cubin_inspect.inspect_cubin(cubin, kernel.kernel_name, kernel.shared_bytes)
print(f"{args.variant} {args.target} groups {args.groups} consumer registers {args.consumer_registers}: "
      f"{variant.launch_warps} warps, {resources.total_shared_bytes} B shared, "
      f"loop spill stores / loads {resources.loop_spill_stores} / {resources.loop_spill_loads}")
