"""Heuristic dispatch tables (SPEC section 6) until a GPU host tunes them: one JSON per
(target, kv_format, h_q) in variants/<target>/, each carrying its rule in its provenance."""
from __future__ import annotations

import json
from pathlib import Path

from build_tools import paths
from build_tools.render import write_if_different

SUPPORTED_H_Q = (8, 16, 32, 64, 128)
BATCH_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128)
PREFERRED = {"block_t": 16, "num_warps": 4, "num_stages": 2}
MAX_SPLITS = 64
# Multiprocessors the split count aims to fill (the smallest common part per target).
SM_COUNT = {"sm120": 170, "sm121": 48, "sm90": 132, "sm89-proxy": 132}
RULE = ("heuristic: block_t 16, 4 warps, 2 stages (the field report's sm120 winner: 8 warps lost at every "
        "concurrency, block_t 32 at 8 warps was pruned); block_h: of the shipped ones <= max(h_q, 16), those "
        "with the fewest spill bytes in this target's cubins (spilled accumulators cost more than the extra "
        "gathers of more head blocks), then the largest; num_splits the smallest "
        "power of two with bound * ceil(h_q/block_h) * num_splits >= {sms} multiprocessors, at most 64; the open "
        "last row uses 1 split")


def table_path(target: str, kv_format: str, h_q: int) -> Path:
    return paths.VARIANTS_DIR / target / f"{kv_format}_h{h_q}.json"


def _spill_bytes(record: dict) -> int:
    return record["resources"]["stack_bytes"] + record["resources"]["local_bytes"]


def _pick_variant(records: dict[str, dict], kv_format: str, h_q: int) -> dict:
    """The preferred family's largest block_h <= max(h_q, 16) among those with the fewest spill bytes."""
    candidates = [r for r in records.values()
                  if r["status"] == "shipped" and r.get("variant") and r["variant"]["kv_format"] == kv_format
                  and r["variant"]["block_h"] <= max(h_q, 16)
                  and all(r["variant"][k] == value for k, value in PREFERRED.items())]
    if not candidates:
        raise ValueError(f"no shipped {kv_format} variant with {PREFERRED} for h_q {h_q}; build the target first")
    return min(candidates, key=lambda r: (_spill_bytes(r), -r["variant"]["block_h"]))


def _splits(rows: int, head_blocks: int, sms: int) -> int:
    splits = 1
    while rows * head_blocks * splits < sms and splits < MAX_SPLITS:
        splits *= 2
    return splits


def heuristic_table(target: str, records: dict[str, dict], kv_format: str, h_q: int) -> dict:
    record = _pick_variant(records, kv_format, h_q)
    head_blocks = -(-h_q // record["variant"]["block_h"])
    sms = SM_COUNT[target]
    rows = [{"max_batch_rows": bound, "variant": record["name"], "num_splits": _splits(bound, head_blocks, sms)}
            for bound in BATCH_BOUNDS]
    rows.append({"max_batch_rows": None, "variant": record["name"], "num_splits": 1})
    return {"target": target, "kv_format": kv_format, "h_q": h_q,
            "provenance": {"kind": "heuristic", "rule": RULE.format(sms=sms),
                           "command": f"python -m build_tools tables --target {target}"},
            "rows": rows}


def write_heuristic_tables(target: str) -> list[Path]:
    """From build/<target>/report.json; only rewrites files whose content changes."""
    report = json.loads((paths.target_dir(target) / "report.json").read_text())
    records = {r["name"]: r for r in report["artifacts"]}
    written = []
    for kv_format in ("v32", "model1"):
        for h_q in SUPPORTED_H_Q:
            path = table_path(target, kv_format, h_q)
            write_if_different(path, json.dumps(heuristic_table(target, records, kv_format, h_q), indent=1) + "\n")
            written.append(path)
    return written
