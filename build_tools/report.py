"""Stage 5: the resource report of one target, from the per-artifact JSON records (never re-derived):
report.json, report.md and the printed table. Pruned variants are listed with their figures and reason."""
from __future__ import annotations

import json
from pathlib import Path

from build_tools import paths
from build_tools.render import write_atomic
from build_tools.variant import Target

COLUMNS = ("variant", "status", "shared B", "regs", "spill B", "loop STL/LDL", "tiles in flight", "mma",
           "reason / warnings")


def _row(record: dict) -> tuple[str, ...]:
    res = record.get("resources") or {}
    spill = res.get("stack_bytes", 0) + res.get("local_bytes", 0) if res else ""
    notes = record.get("reason") or "; ".join(record.get("warnings") or [])
    return (
        record["name"], record["status"],
        f"{res['total_shared_bytes']:,}" if res else "-",
        str(res.get("registers", "-")), str(spill) if res else "-",
        f"{res['loop_spill_stores']}/{res['loop_spill_loads']}" if res else "-",
        str(record["variant"]["num_stages"]) if record.get("variant") else "-",
        ",".join(record.get("mma_instructions") or []) or "-",
        notes,
    )


def counts(records: list[dict]) -> dict:
    """Shipped / pruned split kernels per kv_format."""
    result: dict[str, dict[str, int]] = {}
    for record in records:
        if record["kind"] != "split":
            continue
        entry = result.setdefault(record["variant"]["kv_format"], {"shipped": 0, "pruned": 0})
        entry[record["status"]] += 1
    return result


def format_table(records: list[dict]) -> str:
    rows = [COLUMNS, *(_row(r) for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(target: Target, records: list[dict], seconds: float) -> str:
    lines = [f"# Build report: {target.name}", "",
             f"Triton target cuda {target.triton_arch}, {target.cubin_arch}, ships {target.binary}; "
             f"shared-memory limit {target.max_shared_bytes:,} B/block. Built in {seconds:.1f} s.", ""]
    for kv_format, c in counts(records).items():
        lines.append(f"- {kv_format}: {c['shipped']} shipped, {c['pruned']} pruned")
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in _row(r)) + " |" for r in records]
    return "\n".join(lines) + "\n"


def write_report(target: Target, records: list[dict], out_dir: Path, *, seconds: float) -> dict:
    report = {
        "target": target.name,
        "triton_arch": target.triton_arch,
        "cubin_arch": target.cubin_arch,
        "binary": target.binary,
        "max_shared_bytes": target.max_shared_bytes,
        "build_seconds": round(seconds, 2),
        "counts": counts(records),
        "artifacts": records,
    }
    write_atomic(out_dir / "report.json", json.dumps(report, indent=1).encode())
    write_atomic(out_dir / "report.md", markdown(target, records, seconds).encode())
    return report


def read_report(target: str) -> dict:
    """build/<target>/report.json, as write_report left it (the input of tables and package)."""
    return json.loads((paths.target_dir(target) / "report.json").read_text())
