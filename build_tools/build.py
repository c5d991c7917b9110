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

from build_tools import paths
from build_tools.compile import COMPILE_OPTIONS
from build_tools.render import (COMBINE_NUM_WARPS, RenderedKernel, render_combine, render_split, write_atomic,
                                write_if_different)
from build_tools.variant import Target, get_target, is_buildable, load_grid
from sparse_mla_aot.contract import SCRATCH_PARAMS, ArtifactRecord, Variant


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
        "num_warps": num_warps, "num_stages": num_stages, "options": COMPILE_OPTIONS,
        "target": [target.triton_arch, target.cubin_arch, target.binary, target.max_shared_bytes],
        "triton": triton_version(),
        "ptxas": ptxas_version(target.triton_arch),
    }, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _binary_name(name: str, target: Target) -> str:
    return f"{name}.{target.binary}"


def _identity(job: Job) -> dict:
    """The record fields that the inputs decide (the outcome of compiling adds the rest)."""
    rendered = job.rendered
    return dict(
        name=rendered.name, kind="split" if job.variant else "combine", target=job.target.name,
        kernel_name=rendered.kernel_name, num_warps=job.num_warps, num_stages=job.num_stages,
        params=(*rendered.params, *SCRATCH_PARAMS), max_shared_bytes=job.target.max_shared_bytes,
        binary_format=job.target.binary, triton_version=triton_version(),
        ptxas_version=ptxas_version(job.target.triton_arch), cache_key=job.cache_key,
        source=f"src/{rendered.name}.py",
    )


def _write_record(record: ArtifactRecord, out_dir: Path) -> ArtifactRecord:
    write_atomic(out_dir / f"{record.name}.json", json.dumps(record.to_json(), indent=1).encode())
    return record


def build_artifact(job: Job) -> ArtifactRecord:
    """Worker: compile one artifact, write its binary, then its JSON (last). Returns the record. A variant Triton
    cannot compile is pruned with the error; any other exception fails the build, naming the artifact."""
    from build_tools.compile import compile_errors, compile_kernel
    from build_tools.cubin_inspect import inspect_cubin
    from build_tools.selection import decide

    identity = _identity(job)
    source_path = job.out_dir / identity["source"]
    write_if_different(source_path, job.rendered.source)
    started = time.monotonic()
    try:
        compiled = compile_kernel(job.rendered, source_path, job.target, job.num_warps, job.num_stages)
    except compile_errors() as error:  # a variant that does not compile is a result to report
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return _write_record(ArtifactRecord.pruned(f"compile error: {type(error).__name__}: {first_line}",
                                                   compile_seconds=round(time.monotonic() - started, 2),
                                                   **identity), job.out_dir)
    except Exception as error:
        raise RuntimeError(f"building {job.target.name}/{job.rendered.name} failed with {type(error).__name__}: "
                           f"{error} (not a Triton compile or resource error: a bug in the build)") from error
    seconds = time.monotonic() - started
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.cubin)
        cubin.flush()
        resources = inspect_cubin(Path(cubin.name), compiled.kernel_name, compiled.shared_bytes)
    decision = decide(job.target, resources)
    binary_path = job.out_dir / _binary_name(job.rendered.name, job.target)
    write_atomic(binary_path, compiled.binary)
    outcome = dict(binary=binary_path.name, sha256=hashlib.sha256(compiled.binary).hexdigest(),
                   resources=resources, warnings=decision.warnings, compile_seconds=round(seconds, 2),
                   **{**identity, "kernel_name": compiled.kernel_name})
    record = (ArtifactRecord.shipped(**outcome) if decision.reason is None
              else ArtifactRecord.pruned(decision.reason, **outcome))
    return _write_record(record, job.out_dir)


def _cached_record(job: Job) -> ArtifactRecord | None:
    """The existing record if it was built from the same inputs (same schema too) and its binary is intact."""
    json_path = job.out_dir / f"{job.rendered.name}.json"
    if not json_path.exists():
        return None
    try:
        record = ArtifactRecord.from_json(json.loads(json_path.read_text()), str(json_path))
    except ValueError:
        return None  # another schema: rebuild
    if record.cache_key != job.cache_key:
        return None
    if record.binary:
        binary = job.out_dir / record.binary
        if not binary.exists() or sha256_file(binary) != record.sha256:
            return None
    return record


def plan_jobs(target: Target, variants: list[Variant], out_dir: Path) -> list[Job]:
    combine = render_combine()
    jobs = [Job(target, combine, None, COMBINE_NUM_WARPS, 1, cache_key(combine, target, COMBINE_NUM_WARPS, 1),
                out_dir)]
    for variant in variants:
        rendered = render_split(variant)
        jobs.append(Job(target, rendered, variant, variant.num_warps, variant.num_stages,
                        cache_key(rendered, target, variant.num_warps, variant.num_stages), out_dir))
    return jobs


def _compile_worker_init() -> None:
    """Compile workers compile: an inherited TRITON_INTERPRET=1 would hand them interpreter functions."""
    os.environ.pop("TRITON_INTERPRET", None)


def _progress(done: int, total: int, record: ArtifactRecord, started: float, log: TextIO) -> None:
    elapsed = time.monotonic() - started
    figure = f"{record.resources.total_shared_bytes:>9,} B" if record.resources else " " * 11
    print(f"[{done:>4}/{total}] {elapsed:6.0f}s  {record.target:<10} {record.name:<26} "
          f"{record.status:<8}{figure}  {record.reason or ''}", file=log, flush=True)


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
            records[job.rendered.name] = ArtifactRecord.pruned(f"not buildable: {reason}", **_identity(job))
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
                    records[record.name] = record
                    _progress(done, total, record, started, log)
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    ordered = [records[job.rendered.name] for job in all_jobs]
    return write_report(target, ordered, out_dir, seconds=time.monotonic() - started)

