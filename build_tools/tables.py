"""Heuristic dispatch tables (docs/design.md#dispatch) until a GPU host tunes them: one JSON per
(target, kv_format, h_q) in variants/<target>/, each carrying its rule in its provenance."""
from __future__ import annotations

import json
import math
from pathlib import Path

from build_tools import paths
from build_tools.measurements import read_rows, table_rows
from build_tools.render import write_if_different
from build_tools.report import read_report
from build_tools.variant import get_target
from sparse_mla_aot.contract import KV_FORMATS, MAX_SPLITS, SUPPORTED_H_Q, ArtifactRecord, parse_table_stem, table_stem

BATCH_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128)
MIN_BLOCK_H = 16
# The mma.sync targets: one SM design (sm89-proxy stands in for it on the H200), so one heuristic choice.
MMA_SYNC_TARGETS = ("sm120", "sm121", "sm89-proxy")
PROXY_TARGET = "sm89-proxy"
# Per (targets, kv_format): the variants a heuristic table picks from (every field but block_h fixed), and the
# largest block_h it may pick.
HEURISTIC_VARIANTS = {
    ("sm90", "v32"): {"family": "fused", "block_t": 64, "num_warps": 8, "num_stages": 1, "max_block_h": 64},
    ("sm90", "model1"): {"family": "fused", "block_t": 64, "num_warps": 4, "num_stages": 1, "max_block_h": 32},
    ("mma.sync", "v32"): {"family": "fused", "block_t": 32, "num_warps": 4, "num_stages": 1, "max_block_h": 32},
    ("mma.sync", "model1"): {"family": "fused", "block_t": 64, "num_warps": 4, "num_stages": 1, "max_block_h": 32},
}
RULE = ("heuristic: {variants}; block_h 16 while bound * ceil(h_q/16) < {sms} multiprocessors (heads are the "
        "parallelism a small batch has), above that the largest shipped block_h <= min(h_q, {max_block_h}) (each "
        "token is gathered once per head block); num_splits the smallest power of two with bound * "
        "ceil(h_q/block_h) * num_splits >= {sms}, at most {max_splits}; the open last row as the last bound. ")
WHY = {
    "sm90": ("Variants from the full tune of this template on the H200 (2026-12-03, bench/tune/sm90_*.csv): v32 h64 "
             "and h128 chose block_t 64 with 8 warps and one tile in flight at every batch size (block_h 32 below "
             "8 rows, 64 above); model1 h16 and h64 chose block_t 64 with 4 warps and one tile in flight from 8 rows "
             "up (block_h 32 from 48 rows at h64), block_t 32 below."),
    "mma.sync": (
        "Variants from the sm89-proxy sweep of this template (2026-12-03, H200, every shipped proxy variant x split "
        "count x 11 batch sizes; bench/tune/sm89-proxy_{v32_h128,model1_h64}.csv): v32 h128 chose block_t 32 with "
        "4 warps (block_h 32) from 4 rows up, block_t 64 below; model1 h64 chose block_t 64 with 4 warps from 8 "
        "rows up (block_h 32 from 32 rows), block_t 32 below. block_h 64 does not fit sm120's shared memory at "
        "block_t >= 32 with this template (Q and the bf16 K tile are both staged). The proxy runs on H200 "
        "multiprocessors (228 KB shared memory, 4.8 TB/s), so its times rank variants, they do not predict sm120's; "
        "`tune` on an sm120 replaces these tables."),
}


def _group(target: str) -> str:
    return "mma.sync" if target in MMA_SYNC_TARGETS else target


def table_path(target: str, kv_format: str, h_q: int) -> Path:
    return paths.VARIANTS_DIR / target / f"{table_stem(kv_format, h_q)}.json"


def _heuristic_variants(target: str, kv_format: str) -> dict:
    return HEURISTIC_VARIANTS[(_group(target), kv_format)]


def _preferred(records: dict[str, ArtifactRecord], target: str, kv_format: str) -> dict[int, ArtifactRecord]:
    """block_h -> the shipped record of the target's heuristic variants, up to their largest block_h."""
    choice = _heuristic_variants(target, kv_format)
    fields = {k: choice[k] for k in ("family", "block_t", "num_warps", "num_stages")}
    found = {r.variant.block_h: r for r in records.values()
             if r.status == "shipped" and r.variant and r.variant.kv_format == kv_format
             and r.variant.block_h <= choice["max_block_h"]
             and all(getattr(r.variant, k) == value for k, value in fields.items())}
    if MIN_BLOCK_H not in found:
        raise ValueError(f"no shipped {kv_format} variant with block_h {MIN_BLOCK_H} and {fields}; "
                         f"build the target first")
    return found


def _splits(rows: int, head_blocks: int, sms: int) -> int:
    splits = 1
    while rows * head_blocks * splits < sms and splits < MAX_SPLITS:
        splits *= 2
    return splits


def _row(preferred: dict[int, ArtifactRecord], h_q: int, bound: int, sms: int) -> dict:
    if bound * -(-h_q // MIN_BLOCK_H) < sms:
        block_h = MIN_BLOCK_H
    else:
        block_h = max(bh for bh in preferred if bh <= max(h_q, MIN_BLOCK_H))
    return {"max_batch_rows": bound, "variant": preferred[block_h].name,
            "num_splits": _splits(bound, -(-h_q // block_h), sms)}


def heuristic_table(target: str, records: dict[str, ArtifactRecord], kv_format: str, h_q: int) -> dict:
    preferred = _preferred(records, target, kv_format)
    sms = get_target(target).sm_count
    rows = [_row(preferred, h_q, bound, sms) for bound in BATCH_BOUNDS]
    rows.append({**rows[-1], "max_batch_rows": None})
    choice = _heuristic_variants(target, kv_format)
    described = (f"{choice['family']} family, block_t {choice['block_t']}, {choice['num_warps']} warps, "
                 f"{choice['num_stages']} tile(s) in flight")
    rule = (RULE.format(variants=described, sms=sms, max_block_h=choice["max_block_h"], max_splits=MAX_SPLITS)
            + WHY[_group(target)])
    return {"target": target, "kv_format": kv_format, "h_q": h_q,
            "provenance": {"kind": "heuristic", "rule": rule,
                           "command": f"python -m build_tools tables --target {target}"},
            "rows": rows}


TABLE_KINDS = ("heuristic", "tuned", "proxy-derived")  # provenance.kind: the rule, a tune, or a proxy sweep


def _kind(path: Path) -> str | None:
    """The committed table's provenance.kind (None: no table yet); a table without one is named, not guessed at."""
    if not path.exists():
        return None
    provenance = json.loads(path.read_text()).get("provenance")
    kind = provenance.get("kind") if isinstance(provenance, dict) else None
    if kind not in TABLE_KINDS:
        raise ValueError(f"dispatch table {path}: provenance.kind must be one of {TABLE_KINDS}; got provenance "
                         f"{provenance!r}")
    return kind


def _records(target: str) -> dict[str, ArtifactRecord]:
    """The records of the binaries the target runs (sm121: sm120's build)."""
    return {r.name: r for r in read_report(get_target(target).binaries)["artifacts"]}


def write_heuristic_tables(target: str) -> list[Path]:
    """From build/<target>/report.json; keeps tables made from measurements (tuned, proxy-derived), rewrites only
    files whose content changes."""
    records = _records(target)
    written = []
    for kv_format in KV_FORMATS:
        for h_q in SUPPORTED_H_Q:
            path = table_path(target, kv_format, h_q)
            if _kind(path) in ("tuned", "proxy-derived"):
                continue  # a table from measurements is never replaced by a rule
            write_if_different(path, json.dumps(heuristic_table(target, records, kv_format, h_q), indent=1) + "\n")
            written.append(path)
    return written


# A proxy-derived table may give up this much of the proxy's speed for a variant that spills less on the target.
NEAR_TIE = 1.10
DERIVED_RULE = (
    "proxy-derived: per batch size, among the proxy's full measurements (bench/tune CSV) of variants shipped for "
    "{target}, those within {near:.0%} of the fastest; of these the one whose {target} cubin spills least (stack "
    "bytes), then the fastest. The proxy's SM is not sm120's (the cubins differ: ptxas may give the same variant "
    "fewer registers and more spills for sm_120a than for sm_89), so a variant that spills on {target} is kept "
    "only where nothing near it spills less. Split counts scaled by multiprocessors ({sms} / {proxy_sms}), to the "
    "nearest power of two. The first check on a real {target}: `python -m tuning ab --a table --b <spec>`, "
    "then `tune`, which replaces this table.")


def _scaled_splits(num_splits: int, target: str) -> int:
    scaled = num_splits * get_target(target).sm_count / get_target(PROXY_TARGET).sm_count
    return max(1, min(MAX_SPLITS, 2 ** round(math.log2(scaled))))


def _check_proxy_derived_target(target: str) -> None:
    if _group(target) != "mma.sync" or target == PROXY_TARGET:
        raise ValueError(f"proxy-derived tables are for {[t for t in MMA_SYNC_TARGETS if t != PROXY_TARGET]}; "
                         f"got {target!r}")


def proxy_derived_table(target: str, records: dict[str, ArtifactRecord], proxy_rows: list[dict], kv_format: str,
                        h_q: int, source: dict) -> dict:
    """An mma.sync target's table from an sm89-proxy sweep of the same shape (no sm120 GPU here:
    docs/design.md#verifying-sm120-without-an-sm120)."""
    _check_proxy_derived_target(target)
    shipped = {n for n, r in records.items() if r.status == "shipped"}
    full = [r for r in proxy_rows if r["stage"] == "full" and r["variant"] in shipped]
    if not full:
        raise ValueError(f"the proxy sweep of {kv_format} h_q {h_q} has no full measurement of a variant shipped "
                         f"for {target}")
    chosen = {}
    for batch in sorted({int(r["batch_rows"]) for r in full}):
        points = [r for r in full if int(r["batch_rows"]) == batch]
        fastest = min(float(r["median_us"]) for r in points)
        near = [r for r in points if float(r["median_us"]) <= NEAR_TIE * fastest]
        pick = min(near, key=lambda r: (records[r["variant"]].resources.stack_bytes, float(r["median_us"])))
        chosen[batch] = dict(pick, num_splits=_scaled_splits(int(pick["num_splits"]), target))
    rule = DERIVED_RULE.format(target=target, near=NEAR_TIE - 1, sms=get_target(target).sm_count,
                               proxy_sms=get_target(PROXY_TARGET).sm_count)
    return {"target": target, "kv_format": kv_format, "h_q": h_q,
            "provenance": {"kind": "proxy-derived", "rule": rule, "why_not_the_heuristic": WHY["mma.sync"],
                           "proxy_sweep": source,
                           "command": f"python -m build_tools tables --target {target} --proxy-sweep <dir>"},
            "rows": table_rows(chosen)}


def write_proxy_derived_tables(target: str, sweep_dir: Path) -> list[Path]:
    """One table per sm89-proxy sweep CSV in sweep_dir (`tune --target sm89-proxy` writes them); tuned tables stay."""
    _check_proxy_derived_target(target)  # before reading a build or a sweep
    records = _records(target)
    written = []
    for csv_path in sorted(sweep_dir.glob(f"{PROXY_TARGET}_*.csv")):
        try:
            kv_format, h_q = parse_table_stem(csv_path.stem.removeprefix(f"{PROXY_TARGET}_"))
        except ValueError:
            continue  # not a sweep of a table's shape
        path = table_path(target, kv_format, h_q)
        if _kind(path) == "tuned":
            continue
        proxy_table = table_path(PROXY_TARGET, kv_format, h_q)
        source = {"csv": f"{sweep_dir.name}/{csv_path.name}",
                  "proxy_table": json.loads(proxy_table.read_text())["provenance"] if proxy_table.exists() else None}
        table = proxy_derived_table(target, records, list(read_rows(csv_path).values()), kv_format, h_q, source)
        write_if_different(path, json.dumps(table, indent=1) + "\n")
        written.append(path)
    return written
