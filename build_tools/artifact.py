"""One artifact of one binary set: render -> compile -> inspect -> select, then its binary and, last, its JSON
record (the record marks the artifact complete). This is what a compile edge of build/<target>/build.ninja runs,
one process per artifact (`python -m build_tools compile-one`)."""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import tempfile
import time
from pathlib import Path

from build_tools.compile import ir_passes, ptxas_flags, target_options
from build_tools.render import (COMBINE_NUM_WARPS, RenderedKernel, kernel_name, read_rendered, render_combine,
                                render_split, write_atomic, write_if_different)
from build_tools.variant import Target, Variant, is_buildable, programs_per_sm
from sparse_mla_aot.contract import COMBINE_NAME, SCRATCH_PARAMS, SPLIT_PARAMS, ArtifactRecord


def triton_version() -> str:
    return importlib.metadata.version("triton")


@functools.lru_cache(maxsize=None)
def ptxas_version(triton_arch: int) -> str:
    """The ptxas Triton assembles this arch with (3.9: its bundled CUDA 13.4 one from sm90 up, or whatever
    TRITON_PTXAS_BLACKWELL_PATH / TRITON_PTXAS_PATH name). The binary depends on it: one variant ran 74.1 us from
    ptxas 13.4 and 61.3 us from ptxas 12.9 on the H200 (bench/RESULTS.md)."""
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(triton_arch).version


def toolchain(target: Target) -> dict:
    """Everything a binary depends on besides its source: build/<target>/toolchain.json, an input of every compile
    edge, so another Triton, ptxas or target definition recompiles everything."""
    options = target_options(target)
    return {
        "triton": triton_version(),
        "ptxas": ptxas_version(target.triton_arch),
        "options": options,
        "ir_passes": ir_passes(),
        "ptxas_flags": list(ptxas_flags(target.ptxas_options, options["enable_fp_fusion"])),
        "target": [target.triton_arch, target.cubin_arch, target.binary, target.max_shared_bytes],
    }


def names(variants: list[Variant]) -> list[str]:
    """The artifacts of a grid, in report order: the combine kernel, then every variant."""
    return [COMBINE_NAME, *(v.name for v in variants)]


def source_path(out_dir: Path, name: str) -> Path:
    return out_dir / "src" / f"{name}.py"


def record_path(out_dir: Path, name: str) -> Path:
    return out_dir / f"{name}.json"


def render_sources(target: Target, variants: list[Variant], out_dir: Path) -> int:
    """The render edge: every buildable artifact's source, rewritten only where its text changed (ninja's restat
    then recompiles only those). Returns how many were written."""
    written = write_if_different(source_path(out_dir, COMBINE_NAME), render_combine(target.grid_dependency).source)
    for variant in variants:
        if is_buildable(variant, target)[0]:
            written += write_if_different(source_path(out_dir, variant.name),
                                          render_split(variant, grid_dependency=target.grid_dependency,
                                                       wgmma=target.wgmma,
                                                       register_reallocation=target.register_reallocation,
                                                       programs_per_sm=programs_per_sm(variant, target)).source)
    return written


def cache_key(rendered: RenderedKernel, target: Target) -> str:
    """The record's provenance: a hash of the source, its signature and the toolchain it was compiled with."""
    payload = json.dumps({"source": rendered.source, "params": [p.to_json() for p in rendered.params],
                          "toolchain": toolchain(target)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _identity(target: Target, rendered: RenderedKernel, variant: Variant | None) -> dict:
    """The record fields that the inputs decide (the outcome of compiling adds the rest)."""
    num_warps, num_stages = (variant.launch_warps, variant.num_stages) if variant else (COMBINE_NUM_WARPS, 1)
    return dict(
        name=rendered.name, kind="split" if variant else "combine", target=target.name,
        kernel_name=rendered.kernel_name, num_warps=num_warps, num_stages=num_stages,
        params=(*rendered.params, *SCRATCH_PARAMS), max_shared_bytes=target.max_shared_bytes,
        binary_format=target.binary, grid_dependency=target.grid_dependency, triton_version=triton_version(),
        ptxas_version=ptxas_version(target.triton_arch), cache_key=cache_key(rendered, target),
        source=f"src/{rendered.name}.py",
    )


def _write_record(record: ArtifactRecord, out_dir: Path) -> ArtifactRecord:
    write_atomic(record_path(out_dir, record.name), json.dumps(record.to_json(), indent=1).encode())
    return record


def compile_artifact(target: Target, name: str, out_dir: Path) -> ArtifactRecord:
    """Compile one artifact from the source the render step wrote, write its binary, then its record (last,
    atomically). A variant Triton cannot compile is pruned with the error; any other exception fails the build,
    naming the artifact."""
    from build_tools.compile import compile_errors, compile_kernel
    from build_tools.cubin_inspect import inspect_cubin
    from build_tools.selection import decide

    variant = None if name == COMBINE_NAME else Variant.parse(name)
    buildable, why_not = is_buildable(variant, target) if variant else (True, None)
    if not buildable:
        rendered = RenderedKernel(name, kernel_name(name), "", SPLIT_PARAMS)
        return _write_record(ArtifactRecord.pruned(f"not buildable: {why_not}",
                                                   **_identity(target, rendered, variant)), out_dir)
    source = source_path(out_dir, name)
    rendered = read_rendered(name, source)
    identity = _identity(target, rendered, variant)
    started = time.monotonic()
    try:
        compiled = compile_kernel(rendered, source, target, variant.num_warps if variant else COMBINE_NUM_WARPS,
                                  identity["num_stages"], identity["num_warps"],
                                  programs_per_sm(variant, target) if variant else 1)
    except compile_errors() as error:  # a variant that does not compile is a result to report
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return _write_record(ArtifactRecord.pruned(f"compile error: {type(error).__name__}: {first_line}",
                                                   compile_seconds=round(time.monotonic() - started, 2),
                                                   **identity), out_dir)
    except Exception as error:
        raise RuntimeError(f"building {target.name}/{name} failed with {type(error).__name__}: {error} (not a "
                           "Triton compile or resource error: a bug in the build)") from error
    seconds = time.monotonic() - started
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.cubin)
        cubin.flush()
        resources = inspect_cubin(Path(cubin.name), compiled.kernel_name, compiled.shared_bytes)
    decision = decide(target, resources, compiled.ptxas_notes)
    binary_path = out_dir / f"{name}.{target.binary}"
    write_atomic(binary_path, compiled.binary)
    outcome = dict(binary=binary_path.name, sha256=hashlib.sha256(compiled.binary).hexdigest(),
                   resources=resources, warnings=decision.warnings, compile_seconds=round(seconds, 2),
                   **{**identity, "kernel_name": compiled.kernel_name})
    record = (ArtifactRecord.shipped(**outcome) if decision.reason is None
              else ArtifactRecord.pruned(decision.reason, **outcome))
    return _write_record(record, out_dir)


def result_line(record: ArtifactRecord) -> str:
    """What a compile edge prints under ninja's progress line: the decision and its figure."""
    figure = f"{record.resources.total_shared_bytes:>9,} B" if record.resources else " " * 11
    return f"  {record.name:<26} {record.status:<8}{figure}  {record.reason or ''}".rstrip()
