"""Heuristic dispatch tables (SPEC section 6) until a GPU host tunes them: one JSON per
(target, kv_format, h_q) in variants/<target>/, each carrying its rule in its provenance."""
from __future__ import annotations

import json
from pathlib import Path

from build_tools import kernels, paths
from build_tools.render import write_if_different

SUPPORTED_H_Q = (8, 16, 32, 64, 128)
BATCH_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128)
PREFERRED = {"block_t": 16, "num_warps": 4, "num_stages": 2}
MIN_BLOCK_H = 16
# Multiprocessors the split count aims to fill (the smallest common part per target).
SM_COUNT = {"sm120": 170, "sm121": 48, "sm90": 132, "sm89-proxy": 132}
RULE = ("heuristic: block_t 16, 4 warps, 2 stages (the field report's sm120 winner: 8 warps lost at every "
        "concurrency, block_t 32 at 8 warps was pruned); block_h 16 while bound * ceil(h_q/16) < {sms} "
        "multiprocessors (heads are the parallelism a small batch has), above that the largest shipped "
        "block_h <= h_q (each token is gathered once per head block); num_splits the smallest power of two "
        "with bound * ceil(h_q/block_h) * num_splits >= {sms}, at most 64; the open last row as the last bound. "
        "Measured behind it (H200, this template): model1 h64 was fastest with block_h 16 at <= 4 rows and "
        "block_h 64 at >= 48 rows; v32 h128 at 128 rows took 1,270 us with block_h 64 and 2,354 us with 16")


def table_path(target: str, kv_format: str, h_q: int) -> Path:
    return paths.VARIANTS_DIR / target / f"{kv_format}_h{h_q}.json"


def _preferred(records: dict[str, dict], kv_format: str) -> dict[int, dict]:
    """block_h -> the shipped preferred-family record."""
    found = {r["variant"]["block_h"]: r for r in records.values()
             if r["status"] == "shipped" and r.get("variant") and r["variant"]["kv_format"] == kv_format
             and all(r["variant"][k] == value for k, value in PREFERRED.items())}
    if MIN_BLOCK_H not in found:
        raise ValueError(f"no shipped {kv_format} variant with block_h {MIN_BLOCK_H} and {PREFERRED}; "
                         f"build the target first")
    return found


def _splits(rows: int, head_blocks: int, sms: int) -> int:
    splits = 1
    while rows * head_blocks * splits < sms and splits < kernels.MAX_SPLITS:
        splits *= 2
    return splits


def _row(preferred: dict[int, dict], h_q: int, bound: int, sms: int) -> dict:
    if bound * -(-h_q // MIN_BLOCK_H) < sms:
        block_h = MIN_BLOCK_H
    else:
        block_h = max(bh for bh in preferred if bh <= max(h_q, MIN_BLOCK_H))
    return {"max_batch_rows": bound, "variant": preferred[block_h]["name"],
            "num_splits": _splits(bound, -(-h_q // block_h), sms)}


def heuristic_table(target: str, records: dict[str, dict], kv_format: str, h_q: int) -> dict:
    preferred = _preferred(records, kv_format)
    sms = SM_COUNT[target]
    rows = [_row(preferred, h_q, bound, sms) for bound in BATCH_BOUNDS]
    rows.append({**rows[-1], "max_batch_rows": None})
    return {"target": target, "kv_format": kv_format, "h_q": h_q,
            "provenance": {"kind": "heuristic", "rule": RULE.format(sms=sms),
                           "command": f"python -m build_tools tables --target {target}"},
            "rows": rows}


def write_heuristic_tables(target: str) -> list[Path]:
    """From build/<target>/report.json; keeps tuned tables, rewrites only files whose content changes."""
    report = json.loads((paths.target_dir(target) / "report.json").read_text())
    records = {r["name"]: r for r in report["artifacts"]}
    written = []
    for kv_format in ("v32", "model1"):
        for h_q in SUPPORTED_H_Q:
            path = table_path(target, kv_format, h_q)
            if path.exists() and json.loads(path.read_text())["provenance"]["kind"] == "tuned":
                continue  # a measured table is never replaced by a rule
            write_if_different(path, json.dumps(heuristic_table(target, records, kv_format, h_q), indent=1) + "\n")
            written.append(path)
    return written
