"""`build`: render -> compile -> inspect -> select every variant of the grid for one target, in parallel,
cached by content hash. Writes build/<target>/: binaries, one JSON per artifact (written last: it marks the
artifact complete), report.json and report.md."""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from build_tools import kernels, paths
from build_tools.compile import compile_options
from build_tools.render import RenderedKernel, render_combine, render_split, write_atomic, write_if_different
from build_tools.variant import Target, Variant, get_target, is_buildable, load_grid

SPLIT_GRID_RULE = "(b * s_q, cdiv(h_q, block_h), num_splits)"
COMBINE_GRID_RULE = "(b * s_q, h_q, 1)"


@dataclass(frozen=True)
class Job:
    """One artifact to produce: everything a worker process needs, picklable."""

    target: Target
    rendered: RenderedKernel
    variant: Variant | None  # None for the combine kernel
    num_warps: int
    num_stages: int
    cache_key: str
    out_dir: Path


def triton_version() -> str:
    return importlib.metadata.version("triton")


@functools.lru_cache(maxsize=None)
def ptxas_version(triton_arch: int) -> str:
    """The ptxas Triton assembles this arch with (3.9: its bundled CUDA 13.4 one from sm90 up, or whatever
    TRITON_PTXAS_BLACKWELL_PATH / TRITON_PTXAS_PATH name). The binary depends on it: one variant ran 74.1 us from
    ptxas 13.4 and 61.3 us from ptxas 12.9 on the H200 (bench/RESULTS.md)."""
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(triton_arch).version


def cache_key(rendered: RenderedKernel, target: Target, num_warps: int, num_stages: int) -> str:
    """Everything the binary depends on: source, signature and hints, options, target, Triton and ptxas versions."""
    payload = json.dumps({
        "source": rendered.source,
        "params": [p.to_json() for p in rendered.params],
        "num_stages": num_stages, "options": compile_options(target, num_warps),
        "target": [target.triton_arch, target.cubin_arch, target.binary, target.max_shared_bytes],
        "triton": triton_version(),
        "ptxas": ptxas_version(target.triton_arch),
    }, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _binary_name(name: str, target: Target) -> str:
    return f"{name}.{target.binary}"


def _base_record(job: Job) -> dict:
    rendered = job.rendered
    return {
        "name": rendered.name,
        "kind": "split" if job.variant else "combine",
        "target": job.target.name,
        "variant": job.variant.to_json() if job.variant else None,
        "kernel_name": rendered.kernel_name,
        "num_warps": job.num_warps,
        "num_stages": job.num_stages,
        "params": [p.to_json() for p in (*rendered.params, *kernels.SCRATCH_PARAMS)],
        "grid": SPLIT_GRID_RULE if job.variant else COMBINE_GRID_RULE,
        "max_shared_bytes": job.target.max_shared_bytes,
        "triton_version": triton_version(),
        "ptxas_version": ptxas_version(job.target.triton_arch),
        "cache_key": job.cache_key,
        "source": f"src/{rendered.name}.py",
    }


def build_artifact(job: Job) -> dict:
    """Worker: compile one artifact, write its binary, then its JSON (last). Returns the record."""
    from build_tools.compile import compile_kernel
    from build_tools.inspect import inspect_cubin
    from build_tools.select import decide, total_shared_bytes

    record = _base_record(job)
    source_path = job.out_dir / record["source"]
    write_if_different(source_path, job.rendered.source)
    started = time.monotonic()
    try:
        compiled = compile_kernel(job.rendered, source_path, job.target, job.num_warps, job.num_stages)
    except Exception as error:  # a compile failure is a result to report, not a crash of the whole build
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        record.update(status="pruned", reason=f"compile error: {type(error).__name__}: {first_line}",
                      warnings=[], binary=None, sha256=None, resources=None, mma_instructions=[],
                      compile_seconds=round(time.monotonic() - started, 2))
        write_atomic(job.out_dir / f"{record['name']}.json", json.dumps(record, indent=1).encode())
        return record
    seconds = time.monotonic() - started
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.cubin)
        cubin.flush()
        inspection = inspect_cubin(Path(cubin.name), compiled.kernel_name)
    decision = decide(job.target, compiled.shared_bytes, inspection)
    binary_path = job.out_dir / _binary_name(record["name"], job.target)
    write_atomic(binary_path, compiled.binary)
    record.update(
        status=decision.status, reason=decision.reason, warnings=list(decision.warnings),
        kernel_name=compiled.kernel_name, binary=binary_path.name, binary_format=job.target.binary,
        sha256=hashlib.sha256(compiled.binary).hexdigest(),
        shared_bytes=compiled.shared_bytes,
        resources={**inspection.to_json(), "dynamic_shared_bytes": compiled.shared_bytes,
                   "total_shared_bytes": total_shared_bytes(compiled.shared_bytes, inspection)},
        mma_instructions=list(inspection.mma_instructions),
        compile_seconds=round(seconds, 2),
    )
    write_atomic(job.out_dir / f"{record['name']}.json", json.dumps(record, indent=1).encode())
    return record


def _cached_record(job: Job) -> dict | None:
    """The existing record if it was built from the same inputs and its binary is intact."""
    json_path = job.out_dir / f"{job.rendered.name}.json"
    if not json_path.exists():
        return None
    record = json.loads(json_path.read_text())
    if record.get("cache_key") != job.cache_key:
        return None
    if record.get("binary"):
        binary = job.out_dir / record["binary"]
        if not binary.exists() or sha256_file(binary) != record["sha256"]:
            return None
    return record


def _not_buildable_record(job: Job, reason: str) -> dict:
    record = _base_record(job)
    record.update(status="pruned", reason=f"not buildable: {reason}", warnings=[], binary=None, sha256=None,
                  resources=None, mma_instructions=[], compile_seconds=0.0)
    return record


def plan_jobs(target: Target, variants: list[Variant], out_dir: Path) -> list[Job]:
    combine = render_combine()
    jobs = [Job(target, combine, None, kernels.COMBINE_NUM_WARPS, 1,
                cache_key(combine, target, kernels.COMBINE_NUM_WARPS, 1), out_dir)]
    for variant in variants:
        rendered = render_split(variant)
        jobs.append(Job(target, rendered, variant, variant.num_warps, variant.num_stages,
                        cache_key(rendered, target, variant.num_warps, variant.num_stages), out_dir))
    return jobs


def _compile_worker_init() -> None:
    """Compile workers compile: an inherited TRITON_INTERPRET=1 would hand them interpreter functions."""
    os.environ.pop("TRITON_INTERPRET", None)


def _progress(done: int, total: int, record: dict, started: float, log: TextIO) -> None:
    elapsed = time.monotonic() - started
    shared = (record.get("resources") or {}).get("total_shared_bytes")
    figure = f"{shared:>9,} B" if shared is not None else " " * 11
    print(f"[{done:>4}/{total}] {elapsed:6.0f}s  {record['target']:<10} {record['name']:<26} "
          f"{record['status']:<8}{figure}  {record.get('reason') or ''}", file=log, flush=True)


def build_target(target_name: str, *, jobs: int = 1, grid: Path | None = None, log: TextIO | None = None) -> dict:
    """Build (or reuse) every artifact of the grid for one target; returns the report dict."""
    log = log or sys.stdout
    from build_tools.report import write_report

    target = get_target(target_name)
    out_dir = paths.target_dir(target.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    records, pending = {}, []
    all_jobs = plan_jobs(target, load_grid(grid), out_dir)
    for job in all_jobs:
        ok, reason = is_buildable(job.variant, target) if job.variant else (True, None)
        if not ok:
            records[job.rendered.name] = _not_buildable_record(job, reason)
        elif (cached := _cached_record(job)) is not None:
            records[job.rendered.name] = cached
        else:
            pending.append(job)
    total = len(records) + len(pending)
    print(f"{target.name}: {total} artifacts, {len(records)} up to date, {len(pending)} to compile "
          f"on {jobs} process(es)", file=log, flush=True)
    if pending:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_compile_worker_init) as pool:
            futures = {pool.submit(build_artifact, job): job for job in pending}
            try:
                for done, future in enumerate(as_completed(futures), len(records) + 1):
                    record = future.result()
                    records[record["name"]] = record
                    _progress(done, total, record, started, log)
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    ordered = [records[job.rendered.name] for job in all_jobs]
    return write_report(target, ordered, out_dir, seconds=time.monotonic() - started)

