"""The build pipeline on a reduced sm120 grid that holds the sm120 prototype's case (block_h 32, block_t 32,
8 warps, 2 stages; docs/design.md#the-sm120-prototype) and its neighbours, and ws variants of which three do not fit
sm120's shared memory: cross-compiled without a GPU, inspected, pruned with the figure, packaged and read back by
the runtime's Catalog; and the ninja graph that drives it: a
no-op compiles nothing, a grid or template change compiles what it changes, an interrupted build leaves only
complete records and resumes."""
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from build_tools import artifact, paths
from build_tools.build import build_target
from build_tools.compile import PTXAS_FLAGS, performance_notes
from build_tools.cubin_inspect import cuobjdump_path
from build_tools.package import size_lines, stage
from build_tools.report import read_report
from build_tools.selection import Decision, decide
from build_tools.variant import TRITON_PTXAS_OPTIONS, get_target, load_grid, load_targets
from sparse_mla_aot import plan
from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import COMBINE_NAME, ArtifactRecord, Resources, Variant
from sparse_mla_aot.dispatch import explain

GRID = """
[axes]
kv_format = ["v32"]

[family.fused]
block_h = [32]
block_t = [16, 32]
num_warps = [4, 8]
num_stages = [2]

[family.ws]
block_h = [16]
block_t = [32, 64]
num_warps = [4, 8]
num_stages = [4]
"""
COMPILE_LINE = re.compile(r"\] compile sm120 (\S+)$", flags=re.MULTILINE)


def _build(grid, jobs=2):
    """Build sm120 from grid; returns the report and the names of the artifacts ninja compiled."""
    log = io.StringIO()
    report = build_target("sm120", jobs=jobs, grid=grid, log=log)
    return report, set(COMPILE_LINE.findall(log.getvalue()))


@pytest.fixture(scope="module")
def sm120_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("build")
    grid = root / "grid.toml"
    grid.write_text(GRID)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(paths.BUILD_DIR_ENV, str(root / "out"))
        report, compiled = _build(grid)
        assert compiled == set(artifact.names(load_grid(grid)))
        yield root, grid, report, mp


def test_report_prunes_everything_over_the_limit_with_its_figure(sm120_build):
    _, grid, report, _ = sm120_build
    limit = get_target("sm120").max_shared_bytes
    splits = [r for r in report["artifacts"] if r.kind == "split"]
    assert [r.variant for r in splits] == load_grid(grid)
    for record in splits:
        if record.resources is None:  # ruled out before compiling, with why
            assert record.status == "pruned" and record.reason.startswith("not buildable: "), record.name
            continue
        shared = record.resources.total_shared_bytes
        if shared > limit:
            assert record.status == "pruned"
            assert f"{shared:,} B shared memory > {limit:,} B" in record.reason
        else:
            assert record.status == "shipped", record.reason
    over = [r.name for r in splits if r.reason and "shared memory >" in r.reason]
    # 104-210 KB: real pruning, real figures
    assert over == ["v32_ws_bh16_bt32_w8_s4", "v32_ws_bh16_bt64_w4_s4", "v32_ws_bh16_bt64_w8_s4"]
    # The sm120 prototype's case (107 KB there, silently pruned by autotune): here it is reported either way, with
    # its own figure, in the table a person reads.
    field_case = next(r for r in splits if r.name == "v32_fused_bh32_bt32_w8_s2")
    figure = f"{field_case.resources.total_shared_bytes:,}"
    md = (paths.target_dir("sm120") / "report.md").read_text()
    assert any(line.startswith(f"| v32_fused_bh32_bt32_w8_s2 | {field_case.status} | {figure} |")
               for line in md.splitlines())


def _resources(dynamic_shared, **overrides):
    fields = dict(elf_arch="sm_120f", registers=128, stack_bytes=0, shared_static_bytes=0, local_bytes=0,
                  mma_instructions=("HMMA.16816.F32.BF16",), loop_instructions=100, loop_spill_stores=0,
                  loop_spill_loads=0, loop_global_loads=8, loop_barriers=2)
    fields.update(overrides)
    return Resources(**fields, dynamic_shared_bytes=dynamic_shared,
                     total_shared_bytes=dynamic_shared + fields["shared_static_bytes"])


def test_decide_prunes_over_the_limit_and_warns_on_spills():
    sm120 = get_target("sm120")
    over = decide(sm120, _resources(107_392))
    assert over.status == "pruned" and over.reason == "107,392 B shared memory > 101,376 B"
    assert decide(sm120, _resources(101_376)).status == "shipped"
    static = decide(sm120, _resources(101_000, shared_static_bytes=1024))
    assert static.status == "pruned" and "102,024 B" in static.reason
    spills = decide(sm120, _resources(50_000, stack_bytes=128))
    assert spills.status == "shipped" and "spills: 128 B stack" in spills.warnings[0]
    for wrong in ("sm_90a", "sm_120a"):  # sm_120a would not load on a 12.1 device
        decision = decide(sm120, _resources(50_000, elf_arch=wrong))
        assert decision.status == "pruned" and f"cubin is {wrong}, target needs sm_120f" in decision.reason
    assert "no tensor-core" in decide(sm120, _resources(1_000, mma_instructions=())).warnings[0]


WS_GRID = """
[axes]
kv_format = ["v32", "model1"]

[family.ws]
block_h = [16, 32]
block_t = [32, 64]
num_warps = [4, 8]
num_stages = [2, 4]

[family.pingpong]
block_h = [16]
block_t = [32]
num_warps = [4]
num_stages = [2, 4]
"""


def test_every_ws_variant_compiles_for_the_proxy_without_register_reallocation(tmp_path, monkeypatch):
    """The whole ws axis and the pingpong variants for sm89-proxy (sm120 and sm90 get them in the CI wheel test): each variant is ruled out with
    why, or compiles and ships or is pruned with its figure; its PTX has no setmaxnreg, which sm_89 lacks."""
    grid = tmp_path / "grid.toml"
    grid.write_text(WS_GRID)
    monkeypatch.setenv(paths.BUILD_DIR_ENV, str(tmp_path / "out"))
    report = build_target("sm89-proxy", jobs=2, grid=grid, log=io.StringIO())
    limit = get_target("sm89-proxy").max_shared_bytes
    splits = [r for r in report["artifacts"] if r.kind == "split"]
    assert [r.variant for r in splits] == load_grid(grid)
    compiled = [r for r in splits if r.resources is not None]
    assert len(compiled) == 28  # 12 ws and 2 pingpong per kv_format pass is_buildable
    for record in splits:
        if record.resources is None:
            assert record.status == "pruned" and record.reason.startswith("not buildable: "), record.name
        elif record.resources.total_shared_bytes > limit:
            assert record.status == "pruned" and "shared memory >" in record.reason, record.name
        else:
            assert record.status == "shipped", (record.name, record.reason)
            ptx = (paths.target_dir("sm89-proxy") / record.binary).read_text()
            assert "setmaxnreg" not in ptx, record.name
    assert {r.name for r in splits if r.status == "shipped"} >= {"v32_ws_bh16_bt32_w4_s4", "model1_ws_bh16_bt32_w4_s4",
                                                                 "v32_pingpong_bh16_bt32_w4_s2",
                                                                 "model1_pingpong_bh16_bt32_w4_s2"}


def test_sm121_runs_sm120s_family_binaries():
    targets = load_targets()
    assert targets["sm121"].binaries == "sm120" and targets["sm120"].cubin_arch == "sm_120f"
    assert targets["sm121"].cubin_arch == "sm_120f"
    assert targets["sm121"].max_shared_bytes == targets["sm120"].max_shared_bytes


def test_ptxas_options_default_to_tritons_are_inherited_with_the_binaries_and_enter_the_toolchain(tmp_path):
    targets = load_targets()
    assert targets["sm90"].ptxas_options == ()
    assert targets["sm120"].ptxas_options == targets["sm121"].ptxas_options == TRITON_PTXAS_OPTIONS
    assert artifact.toolchain(targets["sm90"])["ptxas_flags"] == list(PTXAS_FLAGS)
    assert artifact.toolchain(targets["sm120"])["ptxas_flags"] == [*PTXAS_FLAGS, *TRITON_PTXAS_OPTIONS]
    base = 'triton_arch = 90\ncubin_arch = "sm_90a"\nmax_shared_bytes = 1\nbinary = "cubin"\ndefault = true\n'
    base += 'sm_count = 1\nnote = ""\n'
    for bad in ('"-O3"', '["O3"]', "[3]"):
        path = tmp_path / "targets.toml"
        path.write_text(f"[t]\n{base}ptxas_options = {bad}\n")
        with pytest.raises(ValueError, match=r"\[t\] ptxas_options must be a list of ptxas options"):
            load_targets(path)


def test_shipped_sm120_binaries_are_sm_120f_elves_without_debug_sections(sm120_build):
    _, _, report, _ = sm120_build
    shipped = [r for r in report["artifacts"] if r.status == "shipped"]
    assert shipped
    for record in shipped:
        path = paths.target_dir("sm120") / record.binary
        assert path.read_bytes()[:4] == b"\x7fELF"
        elf = subprocess.run([str(cuobjdump_path()), "--dump-elf", str(path)], capture_output=True,
                             text=True, check=True).stdout
        assert "-arch sm_120f" in elf and record.resources.elf_arch == "sm_120f"
        # -lineinfo without -suppress-debug-info embeds the PTX twice and the build directory's path
        assert ".nv_debug_ptx_txt" not in elf and str(paths.build_dir()) not in elf
        if record.kind == "split":
            assert any(m.startswith("HMMA") for m in record.resources.mma_instructions)
        assert [p.name for p in record.params][-2:] == ["global_scratch", "profile_scratch"]


def _record(name):
    return ArtifactRecord.from_json(json.loads((paths.target_dir("sm120") / f"{name}.json").read_text()))


def _record_mtimes():
    return {p.name: p.stat().st_mtime_ns for p in paths.target_dir("sm120").glob("*.json")
            if p.name not in ("report.json", "toolchain.json")}


def test_second_build_compiles_nothing(sm120_build):
    _, grid, first, _ = sm120_build
    before = _record_mtimes()
    second, compiled = _build(grid)
    assert compiled == set()
    assert _record_mtimes() == before
    assert [r.sha256 for r in second["artifacts"]] == [r.sha256 for r in first["artifacts"]]


def test_ninja_by_hand_finds_nothing_to_do(sm120_build):
    import ninja

    result = subprocess.run([os.path.join(ninja.BIN_DIR, "ninja"), "-C", str(paths.target_dir("sm120"))],
                            capture_output=True, text=True, check=True)
    assert "no work to do" in result.stdout


def test_a_grid_with_more_variants_compiles_only_those(sm120_build):
    root, grid, _, _ = sm120_build
    wider = root / "grid-wider.toml"
    wider.write_text(GRID.replace("num_stages = [2]", "num_stages = [1, 2]"))
    report, compiled = _build(wider)
    assert compiled == {v.name for v in load_grid(wider)} - {v.name for v in load_grid(grid)}
    assert len(report["artifacts"]) == 1 + len(load_grid(wider))


def test_a_tampered_binary_is_compiled_again(sm120_build):
    _, grid, _, _ = sm120_build
    victim = paths.target_dir("sm120") / f"{COMBINE_NAME}.cubin"
    victim.write_bytes(b"garbage")
    _, compiled = _build(grid, jobs=1)
    assert compiled == {COMBINE_NAME}
    assert victim.read_bytes()[:4] == b"\x7fELF" and _record(COMBINE_NAME).status == "shipped"


def test_a_template_edit_compiles_what_it_renders(sm120_build, tmp_path):
    _, grid, _, mp = sm120_build
    shutil.copytree(paths.templates_dir(), tmp_path / "templates")
    mp.setenv(paths.TEMPLATES_DIR_ENV, str(tmp_path / "templates"))
    try:
        assert _build(grid)[1] == set()  # the same templates elsewhere: same sources, nothing to compile
        combine = tmp_path / "templates" / "sparse_mla_combine.py.j2"
        combine.write_text(combine.read_text() + "# one more line\n")
        assert _build(grid)[1] == {COMBINE_NAME}
        chunks = tmp_path / "templates" / "kv_chunks.j2"  # imported by the fused family's split template only
        chunks.write_text(chunks.read_text() + "{# one more line #}\n")
        assert _build(grid)[1] == {v.name for v in load_grid(grid) if v.family == "fused"}
    finally:
        mp.delenv(paths.TEMPLATES_DIR_ENV)


def test_records_name_their_ptxas_and_another_toolchain_recompiles_everything(sm120_build):
    """Another Triton or ptxas (TRITON_PTXAS_BLACKWELL_PATH) changes toolchain.json, an input of every compile."""
    record = _record(COMBINE_NAME)
    assert record.ptxas_version == artifact.ptxas_version(120)
    assert [int(part) for part in record.ptxas_version.split(".")] >= [12, 9]  # sm_120f needs CUDA 12.9+
    toolchain = json.loads((paths.target_dir("sm120") / "toolchain.json").read_text())
    assert toolchain == artifact.toolchain(get_target("sm120"))
    graph = (paths.target_dir("sm120") / "build.ninja").read_text()
    compile_edges = [line for line in graph.splitlines() if re.match(r"build \S+\.json: compile ", line)]
    assert compile_edges and all(" toolchain.json" in line.split("|")[1] for line in compile_edges)


def test_an_interrupted_build_leaves_only_complete_records_and_resumes(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.replace('block_t = [16, 32]', 'block_t = [16, 32, 64]'))
    # an empty Triton cache: compiles take seconds, so the interrupt lands while some are running
    env = dict(os.environ, **{paths.BUILD_DIR_ENV: str(tmp_path / "out"), "TRITON_CACHE_DIR": str(tmp_path / "tc")})
    command = [sys.executable, "-m", "build_tools", "build", "--target", "sm120", "--grid", str(grid),
               "--jobs", "2", "--quiet-table"]
    build = subprocess.Popen(command, cwd=paths.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
    out_dir = tmp_path / "out" / "sm120"
    deadline = time.monotonic() + 300
    while not list(out_dir.glob("v32_*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(build.pid, signal.SIGINT)  # what Ctrl-C sends the terminal's process group
    build.communicate(timeout=120)
    assert build.returncode != 0
    finished = {p.stem for p in out_dir.glob("*.json")} - {"report", "toolchain"}
    assert finished and not (out_dir / "report.json").exists()
    for name in finished:  # each parses as a whole record (half a JSON file would not)
        assert ArtifactRecord.from_json(json.loads((out_dir / f"{name}.json").read_text())).name == name
    assert not list(out_dir.glob(".*.tmp"))
    resumed = subprocess.run(command, cwd=paths.ROOT, env=env, capture_output=True, text=True, check=True)
    compiled, missing = set(COMPILE_LINE.findall(resumed.stdout)), set(artifact.names(load_grid(grid))) - finished
    # What ninja logged as done stays done; a record written just as the interrupt came, before ninja logged it,
    # is compiled again (at most one per job that was running).
    assert missing <= compiled and len(compiled - missing) <= 2
    assert (out_dir / "report.json").exists()


def test_a_built_artifact_is_packaged_and_read_back_through_the_runtime_catalog(sm120_build, tmp_path, monkeypatch):
    """render -> compile -> record -> package.stage -> Catalog: the runtime reads what the build wrote; sm121 is
    served from sm120's binaries, its own capability and its own tables."""
    _, grid, report, _ = sm120_build
    _build(grid)  # the tests above may have left another grid's report
    shipped = next(r for r in report["artifacts"] if r.kind == "split" and r.status == "shipped")
    monkeypatch.setattr(paths, "VARIANTS_DIR", tmp_path / "variants")
    for target in ("sm120", "sm121"):
        table = {"target": target, "kv_format": "v32", "h_q": 32, "provenance": {"kind": "heuristic", "rule": "test"},
                 "rows": [{"max_batch_rows": None, "variant": shipped.name, "num_splits": 4}]}
        (tmp_path / "variants" / target).mkdir(parents=True)
        (tmp_path / "variants" / target / "v32_h32.json").write_text(json.dumps(table))
    manifest = stage(["sm120", "sm121"], tmp_path / "kernels", "0.0.test")
    assert manifest["targets"]["sm121"]["binaries"] == "sm120" and not (tmp_path / "kernels" / "sm121").exists()
    (sizes,) = size_lines(manifest, tmp_path / "kernels")
    assert sizes.startswith(f"sm120 (runs on sm120, sm121): {len(manifest['targets']['sm120']['artifacts'])} binaries")
    catalog = Catalog(tmp_path / "kernels")
    for target in ("sm120", "sm121"):
        assert catalog.target_for_capability(get_target(target).capability) == target
        assert catalog.records(target) == {r.name: r for r in read_report("sm120")["artifacts"]}
        assert catalog.binary(target, shipped.name) == (paths.target_dir("sm120") / shipped.binary).read_bytes()
        assert explain(1, 32, "v32", target=target, catalog=catalog).startswith(f"{shipped.name}, num_splits=4")
    combine_source = (paths.target_dir("sm120") / catalog.records("sm120")[COMBINE_NAME].source).read_text()
    assert f"splits = tl.arange(0, {plan.MAX_SPLITS})" in combine_source
    # A table naming a variant of the other layout is refused at packaging, as the runtime refuses it.
    other = "model1" if shipped.variant.kv_format == "v32" else "v32"
    source = tmp_path / "variants" / "sm121" / f"{other}_h32.json"
    source.write_text(json.dumps({**table, "kv_format": other}))
    with pytest.raises(ValueError, match=re.escape(f"{source}: row 0 names {shipped.name}, a "
                                                   f"{shipped.variant.kv_format} variant; the table is for kv_format "
                                                   f"'{other}' (see build/sm120/report.md)")):
        stage(["sm120", "sm121"], tmp_path / "kernels", "0.0.test")


@pytest.mark.parametrize("target_name, name, programs", [("sm90", "v32_ws_bh16_bt32_w4_s4", 2),
                                                         ("sm90", "v32_ws_bh16_bt64_w8_s2", 1),
                                                         ("sm120", "v32_ws_bh16_bt32_w4_s4", 1)])
def test_the_build_renders_and_compiles_a_ws_variant_for_its_programs_per_sm(tmp_path, monkeypatch, target_name, name,
                                                                            programs):
    """The render and compile stages agree on how many programs share an SM (docs/design.md#two-ws-programs-per-
    multiprocessor): the source says so (the cache key hashes it) and compile_kernel gets the same count."""
    from build_tools import compile as compile_stage

    target, variant = get_target(target_name), Variant.parse(name)
    artifact.render_sources(target, [variant], tmp_path)
    assert ("programs_per_sm=2" in artifact.source_path(tmp_path, name).read_text()) == (programs == 2)
    calls = []

    def recorded(*args):
        calls.append(args)
        raise KeyError("stop here")

    monkeypatch.setattr(compile_stage, "compile_kernel", recorded)
    with pytest.raises(RuntimeError, match="stop here"):
        artifact.compile_artifact(target, name, tmp_path)
    assert calls[0][-1] == programs and calls[0][-2] == variant.launch_warps


def test_compiling_for_two_programs_per_sm_needs_a_source_rendered_for_them(tmp_path):
    from build_tools.compile import compile_kernel
    from build_tools.render import render_split

    variant = Variant.parse("v32_ws_bh16_bt32_w4_s4")
    rendered = render_split(variant, register_reallocation=True)  # rendered for one program per SM
    with pytest.raises(ValueError, match=r"^v32_ws_bh16_bt32_w4_s4: compiling for 2 programs per multiprocessor "
                                         r"needs a source rendered for them"):
        compile_kernel(rendered, tmp_path / "unused.py", get_target("sm90"), variant.num_warps, variant.num_stages,
                       variant.launch_warps, 2)


def test_only_triton_compile_errors_prune_anything_else_fails_the_build_naming_the_variant(tmp_path, monkeypatch):
    from triton.compiler.errors import CompilationError

    from build_tools import compile as compile_stage

    target, variant = get_target("sm120"), load_grid()[0]
    artifact.render_sources(target, [variant], tmp_path)

    def compile_error(*args):
        raise CompilationError("src", None, "no tl.dot for these shapes")

    monkeypatch.setattr(compile_stage, "compile_kernel", compile_error)
    record = artifact.compile_artifact(target, variant.name, tmp_path)
    assert record.status == "pruned" and record.reason.startswith("compile error: CompilationError")
    assert ArtifactRecord.from_json(json.loads((tmp_path / f"{variant.name}.json").read_text())) == record

    def bug(*args):
        raise KeyError("block_q")

    monkeypatch.setattr(compile_stage, "compile_kernel", bug)
    with pytest.raises(RuntimeError, match=rf"^building sm120/{re.escape(variant.name)} failed with KeyError: "
                                           r"'block_q' \(not a Triton compile or resource error"):
        artifact.compile_artifact(target, variant.name, tmp_path)


SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   STL [R1], R2 ;
        /*0020*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0030*/                   LDL R5, [R1] ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0050*/                   HMMA.16816.F32.BF16 R8, R4, R6, R8 ;
        /*0060*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0070*/                   MEMBAR.ALL.CTA ;
        /*0080*/                   STL [R1+0x4], R8 ;
        /*0090*/               @P0 BRA 0x20 ;
        /*00a0*/                   STL [R1+0x8], R9 ;
        /*00b0*/                   LDL R3, [R1+0x8] ;
        /*00c0*/                   BRA.U UP0, 0xa0 ;
        /*00d0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00e0*/                   EXIT ;
        /*00f0*/                   BRA 0xf0;
"""


def test_loop_statistics_count_only_instructions_inside_backward_branches():
    from build_tools.cubin_inspect import loop_counts, loop_instructions

    loop = loop_instructions(SASS)
    assert [text.split()[0] for text in loop] == ["LDG.E", "LDL", "BAR.SYNC.DEFER_BLOCKING", "HMMA.16816.F32.BF16",
                                                  "WARPGROUP.DEPBAR.LE", "MEMBAR.ALL.CTA", "STL", "@P0", "STL",
                                                  "LDL", "BRA.U"]
    # a CTA barrier is BAR.SYNC, not a wgmma wait (DEPBAR) or a memory fence (MEMBAR)
    assert loop_counts(loop) == {"loop_instructions": 11, "loop_spill_stores": 2, "loop_spill_loads": 2,
                                 "loop_global_loads": 1, "loop_barriers": 1}


SAME_SASS = r"""
import dataclasses, json, re, subprocess, sys
from pathlib import Path
import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from build_tools import operand_stores
from build_tools.compile import AssembleStage, compile_options, divisibility_attrs, load_jit_function, signature
from build_tools.cubin_inspect import cuobjdump_path
from build_tools.render import render_split
from build_tools.variant import TRITON_PTXAS_OPTIONS, get_target
from sparse_mla_aot.contract import Variant

# Triton's own cubin stage always passes its --regAllocOptLevel=2: compare with the target given that option.
target = dataclasses.replace(get_target(sys.argv[1]), ptxas_options=TRITON_PTXAS_OPTIONS)
variant = Variant("v32", "fused", 16, 16, 4, 1)
rendered = render_split(variant)
source = Path(sys.argv[2]) / f"{variant.name}.py"
source.write_text(rendered.source)
gpu = GPUTarget("cuda", target.triton_arch, 32)
with knobs.runtime.scope():
    knobs.runtime.add_stages_inspection_hook = AssembleStage(target.cubin_arch, target.ptxas_options)
    compiled = triton.compile(ASTSource(load_jit_function(source, rendered.kernel_name), signature(rendered.params),
                                        constexprs={}, attrs=divisibility_attrs(rendered.params)),
                              target=gpu, options=compile_options(target, variant.num_warps))
ours = compiled.asm["cubin"]
# Triton's own cubin stage on the same PTX (the PTX after our passes)
backend = make_backend(gpu)
tritons = backend.make_cubin(compiled.asm["ptx"], {}, backend.parse_options(compile_options(target, variant.num_warps)),
                             target.triton_arch)

def instructions(cubin):
    path = Path(sys.argv[2]) / "kernel.cubin"
    path.write_bytes(cubin)
    sass = subprocess.run([str(cuobjdump_path()), "--dump-sass", str(path)], capture_output=True, text=True,
                          check=True).stdout
    return [line.strip() for line in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", line)]

ttgir = compiled.asm["ttgir"].splitlines()
stored_where_made = sum(1 for made, stored in zip(ttgir, ttgir[1:])
                        if "tt.elementwise_inline_asm" in made and "ttg.local_alloc " + made.split()[0] + " " in stored)
print(json.dumps({"ours": instructions(ours), "tritons": instructions(tritons), "sizes": [len(ours), len(tritons)],
                  "stored_where_made": stored_where_made,
                  "left_to_hoist": operand_stores.hoist_operand_stores(compiled.asm["ttgir"])[1]}))
"""


@pytest.mark.parametrize("target_name", ["sm120", "sm90"])
def test_our_cubin_stage_gives_tritons_instructions_without_its_debug_sections(target_name, tmp_path):
    """The ptxas flags in build_tools/compile.py, with Triton's ptxas option, mirror Triton's own cubin stage on the
    same PTX: the same SASS (for sm120 from sm_120f instead of Triton's sm_120a), a cubin less than half the size.
    On the way, build_tools.operand_stores rewrote the TTGIR, which Triton parsed back and lowered: every
    dequantized chunk (v32: four) is stored right where its inline asm makes it, in both tile loops."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile, do not interpret
    env["PYTHONPATH"] = os.pathsep.join([str(paths.ROOT), str(paths.ROOT / "src")])
    result = subprocess.run([sys.executable, "-c", SAME_SASS, target_name, str(tmp_path)], capture_output=True,
                            text=True, env=env, check=True)
    compared = json.loads(result.stdout.strip().splitlines()[-1])
    assert compared["ours"] and compared["ours"] == compared["tritons"]
    assert compared["stored_where_made"] == 8 and compared["left_to_hoist"] == 0
    ours, tritons = compared["sizes"]
    assert ours < tritons / 2


def test_our_cubin_stage_passes_the_targets_ptxas_options_and_turns_fmad_off_where_tritons_does(monkeypatch):
    """ptxas gets the fixed flags, then the target's ptxas_options; Triton's make_cubin adds --fmad=false when
    enable_fp_fusion is off, and ours must too (a target's compile_options may set it). The options are in the
    stage's cache key, so a Triton-cached cubin of other options is never taken. The PTX it assembles is Triton's
    after build_tools.ptx_barriers."""
    from types import SimpleNamespace

    from build_tools import compile as compile_stage

    calls = []

    def assemble(ptx, arch, ptxas, flags):
        calls.append((ptx, flags))
        return b"cubin", ("ptxas C7512: a note",)

    monkeypatch.setattr(compile_stage, "assemble", assemble)
    backend = SimpleNamespace(target=SimpleNamespace(arch=120))
    for options in ((), ("--regAllocOptLevel=2",)):
        for fusion in (True, False):
            stages = {"ttgir": lambda src, metadata: src,
                      "ptx": lambda src, metadata: "\tbar.sync \t0;\n\tbar.sync \t0;\n\tbar.sync \t0;\n"}
            stage = compile_stage.AssembleStage("sm_120f", options)
            stage(backend, stages, SimpleNamespace(enable_fp_fusion=fusion), None, 120)
            metadata = {}
            assert stages["cubin"](stages["ptx"]("ttgir", metadata), metadata) == b"cubin"
            assert metadata == {"ptxas_notes": ("ptxas C7512: a note",)}  # the compiled kernel's metadata
    fixed = compile_stage.PTXAS_FLAGS
    # Triton's PTX reaches ptxas through drop_redundant_barriers (the middle of three adjacent barriers goes)
    assert {ptx for ptx, _ in calls} == {"\tbar.sync \t0;\n\tbar.sync \t0;\n"}
    assert [flags for _, flags in calls] == [fixed, (*fixed, "--fmad=false"), (*fixed, "--regAllocOptLevel=2"),
                                             (*fixed, "--regAllocOptLevel=2", "--fmad=false")]
    assert compile_stage.AssembleStage("sm_90a", ())()[0] != compile_stage.AssembleStage("sm_90a", ("-O3",))()[0]


PTXAS_SERIALIZED = """ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due \
to insufficient register resources for the function 'sparse_mla_split_model1_wgf8_bh32_bt64_w4_s2'
ptxas info    : 11 bytes gmem
ptxas info    : Compiling entry function 'sparse_mla_split_model1_wgf8_bh32_bt64_w4_s2' for 'sm_90a'
ptxas info    : Used 128 registers, used 5 barriers
"""
PTXAS_NON_WGMMA = """ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due \
to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in \
the function 'sparse_mla_split_v32_fused_bh64_bt16_w8_s1' in line 1811
"""


def test_ptxas_performance_notes_become_the_artifacts_warnings():
    """ptxas -v says when it serialized wgmmas for lack of registers (as for the first block_h 32 cubins of
    bench/logs/wg23/wgf8.patch): the note, without the function's name, is one of the variant's warnings in its
    record and the report; a clean compile has none."""
    notes = performance_notes(PTXAS_SERIALIZED + PTXAS_SERIALIZED)  # once each
    assert notes == ("ptxas C7512: wgmma.mma_async instructions are serialized due to insufficient register "
                     "resources",)
    assert performance_notes(PTXAS_SERIALIZED.splitlines(keepends=True)[1]) == ()
    assert performance_notes(PTXAS_NON_WGMMA) == (  # main's v32 fused block_h 64, 8-warp, 1-tile cubins (sm90)
        "ptxas C7515: wgmma.mma_async instructions are serialized due to non wgmma instructions defining "
        "accumulator registers of a wgmma between start and end of the pipeline stage",)
    sm120 = get_target("sm120")
    assert decide(sm120, _resources(50_000), notes) == Decision("shipped", None, notes)
    assert decide(sm120, _resources(50_000)) == Decision("shipped", None, ())
