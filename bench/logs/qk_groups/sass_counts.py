"""Per-opcode SASS counts inside the loops of one variant (CPU): python /tmp/sass_counts.py VARIANT TARGET [templates]"""
import collections, pathlib, re, sys, tempfile
sys.path[:0] = ["src", "."]
from build_tools import compile as compile_stage, cubin_inspect, paths, render
from build_tools.variant import get_target
from sparse_mla_aot import contract
if len(sys.argv) > 3:
    paths.templates_dir = lambda: pathlib.Path(sys.argv[3])
variant, target = contract.Variant.parse(sys.argv[1]), get_target(sys.argv[2])
rendered = render.render_split(variant, grid_dependency=target.grid_dependency, register_reallocation=target.register_reallocation)
with tempfile.TemporaryDirectory() as tmp:
    source = pathlib.Path(tmp) / f"{variant.name}.py"; source.write_text(rendered.source)
    kernel = compile_stage.compile_kernel(rendered, source, target, variant.num_warps, variant.num_stages, variant.launch_warps)
    cubin = pathlib.Path(tmp) / "k.cubin"; cubin.write_bytes(kernel.cubin)
    sass = cubin_inspect._cuobjdump("--dump-sass", str(cubin))
    res = cubin_inspect.inspect_cubin(cubin, kernel.kernel_name, kernel.shared_bytes)
pathlib.Path(f"/tmp/{variant.name}_{sys.argv[2]}{'_old' if len(sys.argv) > 3 else ''}.sass").write_text(sass)
loop = cubin_inspect.loop_instructions(sass)
c = cubin_inspect.loop_counts(loop)
print(variant.name, "loop instr", len(loop), "spills", res.loop_spill_stores, res.loop_spill_loads, "regs", getattr(res, "registers", None))
print(sorted(c.items(), key=lambda kv: -kv[1])[:25])
