"""The build pipeline on a reduced sm120 grid that holds the field report's case (block_h 32, block_t 32,
8 warps, 2 stages) and its neighbours: cross-compiled without a GPU, inspected, pruned with the figure; and the
ninja graph that drives it: a no-op compiles nothing, a grid or template change compiles what it changes, an
interrupted build leaves only complete records and resumes."""
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

from build_tools import paths
from build_tools.build import build_target
from build_tools.inspect import CubinInspection, cuobjdump_path
from build_tools.select import decide
from build_tools.variant import get_target, load_grid, load_targets

GRID = """
[axes]
kv_format = ["v32"]
block_h = [32]
block_t = [16, 32]
num_warps = [4, 8]
num_stages = [2]
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
        assert compiled == {"combine", *(v.name for v in load_grid(grid))}
        yield root, grid, report, mp


def test_report_prunes_everything_over_the_limit_with_its_figure(sm120_build):
    _, _, report, _ = sm120_build
    limit = get_target("sm120").max_shared_bytes
    splits = [r for r in report["artifacts"] if r["kind"] == "split"]
    assert len(splits) == 4
    for record in splits:
        shared = record["resources"]["total_shared_bytes"]
        if shared > limit:
            assert record["status"] == "pruned"
            assert f"{shared:,} B shared memory > {limit:,} B" in record["reason"]
        else:
            assert record["status"] == "shipped", record["reason"]
    # The field report's case (107 KB in a prototype, silently pruned by autotune): here it is reported either
    # way, with its own figure, in the table a person reads.
    field_case = next(r for r in splits if r["name"] == "v32_bh32_bt32_w8_s2")
    figure = f"{field_case['resources']['total_shared_bytes']:,}"
    md = (paths.target_dir("sm120") / "report.md").read_text()
    assert any(line.startswith(f"| v32_bh32_bt32_w8_s2 | {field_case['status']} | {figure} |")
               for line in md.splitlines())


def _inspection(**overrides):
    fields = dict(elf_arch="sm_120f", registers=128, stack_bytes=0, shared_static_bytes=0, local_bytes=0,
                  mma_instructions=("HMMA.16816.F32.BF16",))
    return CubinInspection(**{**fields, **overrides})


def test_decide_prunes_over_the_limit_and_warns_on_spills():
    sm120 = get_target("sm120")
    over = decide(sm120, 107_392, _inspection())
    assert over.status == "pruned" and over.reason == "107,392 B shared memory > 101,376 B"
    assert decide(sm120, 101_376, _inspection()).status == "shipped"
    static = decide(sm120, 101_000, _inspection(shared_static_bytes=1024))
    assert static.status == "pruned" and "102,024 B" in static.reason
    spills = decide(sm120, 50_000, _inspection(stack_bytes=128))
    assert spills.status == "shipped" and "spills: 128 B stack" in spills.warnings[0]
    for wrong in ("sm_90a", "sm_120a"):  # sm_120a would not load on a 12.1 device
        decision = decide(sm120, 50_000, _inspection(elf_arch=wrong))
        assert decision.status == "pruned" and f"cubin is {wrong}, target needs sm_120f" in decision.reason
    assert "no tensor-core" in decide(sm120, 1_000, _inspection(mma_instructions=())).warnings[0]


def test_sm121_runs_sm120s_family_binaries():
    targets = load_targets()
    assert targets["sm121"].binaries == "sm120" and targets["sm120"].cubin_arch == "sm_120f"
    assert targets["sm121"].cubin_arch == "sm_120f"
    assert targets["sm121"].max_shared_bytes == targets["sm120"].max_shared_bytes


def test_shipped_sm120_binaries_are_sm_120f_elves_without_debug_sections(sm120_build):
    _, _, report, _ = sm120_build
    shipped = [r for r in report["artifacts"] if r["status"] == "shipped"]
    assert shipped
    for record in shipped:
        path = paths.target_dir("sm120") / record["binary"]
        assert path.read_bytes()[:4] == b"\x7fELF"
        elf = subprocess.run([str(cuobjdump_path()), "--dump-elf", str(path)], capture_output=True,
                             text=True, check=True).stdout
        assert "-arch sm_120f" in elf and record["resources"]["elf_arch"] == "sm_120f"
        # -lineinfo without -suppress-debug-info embeds the PTX twice and the build directory's path
        assert ".nv_debug_ptx_txt" not in elf and str(paths.build_dir()) not in elf
        if record["kind"] == "split":
            assert any(m.startswith("HMMA") for m in record["mma_instructions"])
        names = [p["name"] for p in record["params"]]
        assert names[-2:] == ["global_scratch", "profile_scratch"]


def _record_mtimes():
    return {p.name: p.stat().st_mtime_ns for p in paths.target_dir("sm120").glob("*.json")
            if p.name not in ("report.json", "toolchain.json")}


def test_second_build_compiles_nothing(sm120_build):
    _, grid, first, _ = sm120_build
    before = _record_mtimes()
    second, compiled = _build(grid)
    assert compiled == set()
    assert _record_mtimes() == before
    assert [r["sha256"] for r in second["artifacts"]] == [r["sha256"] for r in first["artifacts"]]


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
    victim = paths.target_dir("sm120") / "combine.cubin"
    victim.write_bytes(b"garbage")
    _, compiled = _build(grid, jobs=1)
    assert compiled == {"combine"}
    record = json.loads((paths.target_dir("sm120") / "combine.json").read_text())
    assert victim.read_bytes()[:4] == b"\x7fELF" and record["status"] == "shipped"


def test_a_template_edit_compiles_what_it_renders(sm120_build, tmp_path):
    _, grid, _, mp = sm120_build
    shutil.copytree(paths.templates_dir(), tmp_path / "templates")
    mp.setenv(paths.TEMPLATES_DIR_ENV, str(tmp_path / "templates"))
    try:
        assert _build(grid)[1] == set()  # the same templates elsewhere: same sources, nothing to compile
        combine = tmp_path / "templates" / "sparse_mla_combine.py.j2"
        combine.write_text(combine.read_text() + "# one more line\n")
        assert _build(grid)[1] == {"combine"}
        chunks = tmp_path / "templates" / "kv_chunks.j2"  # imported by the split template only
        chunks.write_text(chunks.read_text() + "{# one more line #}\n")
        assert _build(grid)[1] == {v.name for v in load_grid(grid)}
    finally:
        mp.delenv(paths.TEMPLATES_DIR_ENV)


def test_records_name_their_ptxas_and_another_toolchain_recompiles_everything(sm120_build):
    """Another Triton or ptxas (TRITON_PTXAS_BLACKWELL_PATH) changes toolchain.json, an input of every compile."""
    from build_tools import artifact

    record = json.loads((paths.target_dir("sm120") / "combine.json").read_text())
    assert record["ptxas_version"] == artifact.ptxas_version(120)
    assert [int(part) for part in record["ptxas_version"].split(".")] >= [12, 9]  # sm_120f needs CUDA 12.9+
    toolchain = json.loads((paths.target_dir("sm120") / "toolchain.json").read_text())
    assert toolchain == artifact.toolchain(get_target("sm120"))
    graph = (paths.target_dir("sm120") / "build.ninja").read_text()
    compile_edges = [line for line in graph.splitlines() if re.match(r"build \S+\.json: compile ", line)]
    assert compile_edges and all(" toolchain.json" in line.split("|")[1] for line in compile_edges)


def test_an_interrupted_build_leaves_only_complete_records_and_resumes(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.replace('block_t = [16, 32]', 'block_t = [16, 32, 64]'))
    env = dict(os.environ, **{paths.BUILD_DIR_ENV: str(tmp_path / "out")})
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
    for name in finished:
        record = json.loads((out_dir / f"{name}.json").read_text())
        assert record["status"] in ("shipped", "pruned")
    assert not list(out_dir.glob(".*.tmp"))
    resumed = subprocess.run(command, cwd=paths.ROOT, env=env, capture_output=True, text=True, check=True)
    assert set(COMPILE_LINE.findall(resumed.stdout)) == {"combine", *(v.name for v in load_grid(grid))} - finished
