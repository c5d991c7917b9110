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

from build_tools import kernels
from build_tools.compile import COMPILE_OPTIONS, PTXAS_FLAGS
from build_tools.render import (RenderedKernel, kernel_name, read_rendered, render_combine, render_split,
                                write_atomic, write_if_different)
from build_tools.variant import Target, Variant, is_buildable, variant_from_name

SPLIT_GRID_RULE = "(b * s_q, cdiv(h_q, block_h), num_splits)"
COMBINE_GRID_RULE = "(b * s_q, h_q, 1)"


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
    return {
        "triton": triton_version(),
        "ptxas": ptxas_version(target.triton_arch),
        "options": COMPILE_OPTIONS,
        "ptxas_flags": list(PTXAS_FLAGS),
        "target": [target.triton_arch, target.cubin_arch, target.binary, target.max_shared_bytes],
    }


def source_path(out_dir: Path, name: str) -> Path:
    return out_dir / "src" / f"{name}.py"


def record_path(out_dir: Path, name: str) -> Path:
    return out_dir / f"{name}.json"


def render_sources(target: Target, variants: list[Variant], out_dir: Path) -> int:
    """The render edge: every buildable artifact's source, rewritten only where its text changed (ninja's restat
    then recompiles only those). Returns how many were written."""
    written = write_if_different(source_path(out_dir, kernels.COMBINE_NAME), render_combine().source)
    for variant in variants:
        if is_buildable(variant, target)[0]:
            written += write_if_different(source_path(out_dir, variant.name), render_split(variant).source)
    return written


def _base_record(target: Target, rendered: RenderedKernel, variant: Variant | None, key: str) -> dict:
    num_warps, num_stages = (variant.num_warps, variant.num_stages) if variant else (kernels.COMBINE_NUM_WARPS, 1)
    return {
        "name": rendered.name,
        "kind": "split" if variant else "combine",
        "target": target.name,
        "variant": variant.to_json() if variant else None,
        "kernel_name": rendered.kernel_name,
        "num_warps": num_warps,
        "num_stages": num_stages,
        "params": [p.to_json() for p in (*rendered.params, *kernels.SCRATCH_PARAMS)],
        "grid": SPLIT_GRID_RULE if variant else COMBINE_GRID_RULE,
        "max_shared_bytes": target.max_shared_bytes,
        "triton_version": triton_version(),
        "ptxas_version": ptxas_version(target.triton_arch),
        "cache_key": key,
        "source": f"src/{rendered.name}.py",
    }


def cache_key(rendered: RenderedKernel, target: Target) -> str:
    """The record's provenance: a hash of the source, its signature and the toolchain it was compiled with."""
    payload = json.dumps({"source": rendered.source, "params": [p.to_json() for p in rendered.params],
                          "toolchain": toolchain(target)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def compile_artifact(target: Target, name: str, out_dir: Path) -> dict:
    """Compile one artifact from the source the render step wrote, write its binary, then its record (last,
    atomically). Returns the record."""
    from build_tools.compile import compile_kernel
    from build_tools.inspect import inspect_cubin
    from build_tools.select import decide, total_shared_bytes

    variant = None if name == kernels.COMBINE_NAME else variant_from_name(name)
    buildable, why_not = is_buildable(variant, target) if variant else (True, None)
    if not buildable:
        rendered = RenderedKernel(name, kernel_name(name), "", kernels.SPLIT_PARAMS)
        record = _base_record(target, rendered, variant, cache_key(rendered, target))
        record.update(status="pruned", reason=f"not buildable: {why_not}", warnings=[], binary=None, sha256=None,
                      resources=None, mma_instructions=[], compile_seconds=0.0)
        write_atomic(record_path(out_dir, name), json.dumps(record, indent=1).encode())
        return record
    source = source_path(out_dir, name)
    rendered = read_rendered(name, source)
    record = _base_record(target, rendered, variant, cache_key(rendered, target))
    started = time.monotonic()
    try:
        compiled = compile_kernel(rendered, source, target, record["num_warps"], record["num_stages"])
    except Exception as error:  # a compile failure is a result to report, not a crash of the whole build
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        record.update(status="pruned", reason=f"compile error: {type(error).__name__}: {first_line}",
                      warnings=[], binary=None, sha256=None, resources=None, mma_instructions=[],
                      compile_seconds=round(time.monotonic() - started, 2))
        write_atomic(record_path(out_dir, name), json.dumps(record, indent=1).encode())
        return record
    seconds = time.monotonic() - started
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.cubin)
        cubin.flush()
        inspection = inspect_cubin(Path(cubin.name), compiled.kernel_name)
    decision = decide(target, compiled.shared_bytes, inspection)
    binary_path = out_dir / f"{name}.{target.binary}"
    write_atomic(binary_path, compiled.binary)
    record.update(
        status=decision.status, reason=decision.reason, warnings=list(decision.warnings),
        kernel_name=compiled.kernel_name, binary=binary_path.name, binary_format=target.binary,
        sha256=hashlib.sha256(compiled.binary).hexdigest(),
        shared_bytes=compiled.shared_bytes,
        resources={**inspection.to_json(), "dynamic_shared_bytes": compiled.shared_bytes,
                   "total_shared_bytes": total_shared_bytes(compiled.shared_bytes, inspection)},
        mma_instructions=list(inspection.mma_instructions),
        compile_seconds=round(seconds, 2),
    )
    write_atomic(record_path(out_dir, name), json.dumps(record, indent=1).encode())
    return record


def result_line(record: dict) -> str:
    """What a compile edge prints under ninja's progress line: the decision and its figure."""
    shared = (record.get("resources") or {}).get("total_shared_bytes")
    figure = f"{shared:>9,} B" if shared is not None else " " * 11
    return f"  {record['name']:<26} {record['status']:<8}{figure}  {record.get('reason') or ''}".rstrip()
