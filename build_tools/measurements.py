"""The measurements `tune` writes (one CSV row per batch size x variant x split count x combine launch x stage) and
their reduction to dispatch-table rows. Torch-free: `tables` derives tables for other targets from the same files."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from build_tools.render import write_atomic

CSV_FIELDS = ("batch_rows", "variant", "num_splits", "programmatic_combine", "stage", "median_us", "p10_us",
              "p90_us", "n", "calls_per_replay")
Key = tuple[int, str, int, int, str]  # (batch_rows, variant, num_splits, programmatic_combine 0/1, stage)


def read_rows(path: Path) -> dict[Key, dict]:
    """Earlier measurements; rows from before screening existed (no stage column) were full measurements, rows from
    before programmatic launches (no programmatic_combine column) ordinary launches."""
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        rows = [dict(r, stage=r.get("stage") or "full", programmatic_combine=r.get("programmatic_combine") or "0")
                for r in csv.DictReader(f)]
    return {(int(r["batch_rows"]), r["variant"], int(r["num_splits"]), int(r["programmatic_combine"]), r["stage"]): r
            for r in rows}


def write_rows(path: Path, rows: list[dict]) -> None:
    """The whole CSV at once (temp file + rename), in the current column order."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: r[k] for k in CSV_FIELDS} for r in rows)
    write_atomic(path, text.getvalue().encode())


def header(path: Path) -> list[str] | None:
    with open(path, newline="") as f:
        return next(csv.reader(f), None)


def best_per_batch(rows: list[dict], batches) -> dict[int, dict]:
    """The fastest full measurement per batch size (screening rows never enter a table)."""
    full = [r for r in rows if r["stage"] == "full"]
    return {b: min((r for r in full if int(r["batch_rows"]) == b), key=lambda r: float(r["median_us"]))
            for b in batches}


def table_rows(best: dict[int, dict]) -> list[dict]:
    """<= bound buckets: consecutive batch sizes with the same choice merge; the last row is open-ended."""
    rows: list[dict] = []
    for batch in sorted(best):
        choice = (best[batch]["variant"], int(best[batch]["num_splits"]),
                  bool(int(best[batch]["programmatic_combine"])))
        if rows and (rows[-1]["variant"], rows[-1]["num_splits"], rows[-1]["programmatic_combine"]) == choice:
            rows[-1]["max_batch_rows"] = batch
        else:
            rows.append({"max_batch_rows": batch, "variant": choice[0], "num_splits": choice[1],
                         "programmatic_combine": choice[2]})
    rows[-1]["max_batch_rows"] = None
    return rows
