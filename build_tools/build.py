"""`build`: every artifact of the grid for one binary set, through build/<target>/build.ninja (the graph:
build_tools/ninja_graph.py; one artifact: build_tools/artifact.py). ninja decides what is out of date from the
files themselves, so an interrupted build resumes where it stopped and a rebuild with nothing changed runs
nothing. Writes build/<target>/: sources, binaries, one JSON per artifact (written last: it marks the artifact
complete), report.json and report.md."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import TextIO

from build_tools import artifact, paths
from build_tools.ninja_graph import configure, run_ninja
from build_tools.variant import Target, get_target, load_grid
from sparse_mla_aot.contract import ArtifactRecord


def binary_set(target_name: str) -> Target:
    """The target whose build holds this target's binaries (sm121 runs sm120's sm_120f cubins)."""
    return get_target(get_target(target_name).binaries)


def grid_file(grid: Path | None) -> Path:
    return (grid or paths.GRID_FILE).resolve()


def write_target_report(target: Target, grid: Path | None) -> dict:
    """The report edge: every artifact's record, in grid order, into report.json and report.md."""
    from build_tools.report import write_report

    out_dir = paths.target_dir(target.name)
    records = [_read_record(artifact.record_path(out_dir, name)) for name in artifact.names(load_grid(grid))]
    return write_report(target, records, out_dir)


def _read_record(path: Path) -> ArtifactRecord:
    return ArtifactRecord.from_json(json.loads(path.read_text()), str(path))


def forget_damaged(out_dir: Path, names: list[str]) -> list[str]:
    """Delete each record whose binary is missing or altered, so ninja compiles that artifact again (ninja
    watches the record, which is written after its binary). Returns their names."""
    damaged = []
    for name in names:
        path = artifact.record_path(out_dir, name)
        if not path.exists():
            continue
        try:
            record = _read_record(path)
        except ValueError:  # another record schema: compile again
            path.unlink()
            damaged.append(name)
            continue
        binary = out_dir / record.binary if record.binary else None
        if binary and (not binary.exists() or hashlib.sha256(binary.read_bytes()).hexdigest() != record.sha256):
            path.unlink()
            damaged.append(name)
    return damaged


def build_target(target_name: str, *, jobs: int = 1, grid: Path | None = None, log: TextIO | None = None) -> dict:
    """Build (or find up to date) every artifact of the grid for the target's binary set; returns the report."""
    target, variants, log = binary_set(target_name), load_grid(grid), log or sys.stdout
    out_dir = configure(target, variants, grid_file(grid))
    for name in forget_damaged(out_dir, artifact.names(variants)):
        print(f"{target.name}: {name}'s record is of another schema or its binary does not match it; compiling it "
              "again", file=log)
    run_ninja(out_dir, jobs, log)
    from build_tools.report import read_report

    return read_report(target.name)
