"""Stage 5: the resource report of one target, from the per-artifact JSON records (never re-derived):
report.json, report.md and the printed table. Pruned variants are listed with their figures and reason."""
from __future__ import annotations

import json
from pathlib import Path

from build_tools import paths
from build_tools.render import write_atomic
from build_tools.variant import Target, load_targets
from sparse_mla_aot.contract import ArtifactRecord

COLUMNS = ("variant", "status", "shared B", "regs", "spill B", "loop STL/LDL", "loop BAR", "tiles in flight", "mma",
           "reason / warnings")


def _row(record: ArtifactRecord) -> tuple[str, ...]:
    res = record.resources
    return (
        record.name, record.status,
        f"{res.total_shared_bytes:,}" if res else "-",
        str(res.registers) if res else "-",
        str(res.stack_bytes + res.local_bytes) if res else "-",
        f"{res.loop_spill_stores}/{res.loop_spill_loads}" if res else "-",
        str(res.loop_barriers) if res else "-",
        str(record.variant.num_stages) if record.variant else "-",
        ",".join(res.mma_instructions) if res and res.mma_instructions else "-",
        record.reason or "; ".join(record.warnings),
    )


def counts(records: list[ArtifactRecord]) -> dict:
    """Shipped / pruned split kernels per kv_format."""
    result: dict[str, dict[str, int]] = {}
    for record in records:
        if record.variant is None:
            continue
        entry = result.setdefault(record.variant.kv_format, {"shipped": 0, "pruned": 0})
        entry[record.status] += 1
    return result


def format_table(records: list[ArtifactRecord]) -> str:
    rows = [COLUMNS, *(_row(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def compile_seconds(records: list[ArtifactRecord]) -> float:
    """The artifacts' compile times added up (they ran in parallel, so more than the build's wall time)."""
    return round(sum(r.compile_seconds for r in records), 1)


def runs_on(target: Target) -> list[str]:
    """The targets whose devices run this build's binaries: itself, and those with `binaries` = it."""
    return [name for name, other in load_targets().items() if other.binaries == target.name]


def shipped_bytes(records: list[ArtifactRecord], out_dir: Path) -> int:
    return sum((out_dir / r.binary).stat().st_size for r in records if r.status == "shipped")


def markdown(target: Target, records: list[ArtifactRecord], out_dir: Path) -> str:
    shipped = [r for r in records if r.status == "shipped"]
    lines = [f"# Build report: {target.name}", "",
             f"Triton target cuda {target.triton_arch}, {target.cubin_arch}, ships {target.binary}; "
             f"shared-memory limit {target.max_shared_bytes:,} B/block. Runs on: {', '.join(runs_on(target))}. "
             f"Shipped binaries: {len(shipped)}, {shipped_bytes(records, out_dir):,} B. Compile time, summed over "
             f"artifacts: {compile_seconds(records)} s.", ""]
    for kv_format, c in counts(records).items():
        lines.append(f"- {kv_format}: {c['shipped']} shipped, {c['pruned']} pruned")
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in _row(r)) + " |" for r in records]
    return "\n".join(lines) + "\n"


def write_report(target: Target, records: list[ArtifactRecord], out_dir: Path) -> dict:
    """report.json (the records as JSON) and report.md; returns the report with the records as they are."""
    report = {
        "target": target.name,
        "triton_arch": target.triton_arch,
        "cubin_arch": target.cubin_arch,
        "binary": target.binary,
        "max_shared_bytes": target.max_shared_bytes,
        "runs_on": runs_on(target),
        "shipped_bytes": shipped_bytes(records, out_dir),
        "compile_seconds": compile_seconds(records),
        "counts": counts(records),
        "artifacts": records,
    }
    on_disk = {**report, "artifacts": [r.to_json() for r in records]}
    write_atomic(out_dir / "report.json", json.dumps(on_disk, indent=1).encode())
    write_atomic(out_dir / "report.md", markdown(target, records, out_dir).encode())
    return report


def read_report(target: str) -> dict:
    """build/<target>/report.json, as write_report returned it (the input of tables and package)."""
    path = paths.target_dir(target) / "report.json"
    report = json.loads(path.read_text())
    return {**report, "artifacts": [ArtifactRecord.from_json(raw, f"{path}, artifact {i}")
                                    for i, raw in enumerate(report["artifacts"])]}
