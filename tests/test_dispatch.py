"""Dispatch (docs/design.md#dispatch) and the launch plan (docs/design.md#runtime-rules) against a small fake kernel
directory laid out like the wheel's: manifest.json, sm90/<name>.json records with their binaries,
tables/sm90/<kv_format>_h<h_q>.json."""
from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from sparse_mla_aot import paths
from sparse_mla_aot.catalog import Catalog, DispatchTable, TableRow, parse_table
from sparse_mla_aot.contract import COMBINE_ARG_NAMES, COMBINE_NAME, MAX_SPLITS, SPLIT_ARG_NAMES, Variant
from sparse_mla_aot.dispatch import choose, explain, forced_choice, forcing, parse_force
from sparse_mla_aot.plan import (LOG2_E, combine_arguments, combined_offsets, make_plan, split_arguments,
                                 workspace_elements)
from sparse_mla_aot.reference import make_inputs
from sparse_mla_aot.validation import check_arguments
from tests.fakes import fake_record

FORCE = paths.FORCE_ENV
PRUNED_REASON = "107,520 B shared memory > 101,376 B"

# (kv_format, family, block_h, block_t, num_warps, num_stages) -> status
VARIANTS = {
    ("v32", "fused", 16, 16, 4, 2): "shipped",
    ("v32", "fused", 16, 32, 4, 2): "shipped",
    ("v32", "fused", 16, 16, 8, 2): "shipped",
    ("v32", "fused", 16, 32, 8, 2): "pruned",   # the sm120 prototype's case (docs/design.md#the-sm120-prototype)
    ("v32", "fused", 16, 32, 8, 3): "shipped",
    ("v32", "fused", 32, 16, 4, 2): "shipped",
    ("v32", "ws", 16, 32, 8, 2): "shipped",  # the pruned variant's axes in the other family: one field away
    ("model1", "fused", 16, 32, 8, 2): "shipped",  # same axes, other kv_format: never a v32 neighbour
    ("model1", "fused", 16, 16, 8, 2): "shipped",  # one field from the pruned v32 variant, but other kv_format
}
TABLE_ROWS = [
    {"max_batch_rows": 1, "variant": "v32_fused_bh16_bt16_w4_s2", "num_splits": 16},
    {"max_batch_rows": 8, "variant": "v32_fused_bh16_bt32_w4_s2", "num_splits": 8, "programmatic_combine": True},
    {"max_batch_rows": None, "variant": "v32_fused_bh32_bt16_w4_s2", "num_splits": 2},
]


def write_kernel_dir(root: Path) -> Path:
    (root / "sm90").mkdir(parents=True)
    (root / "tables" / "sm90").mkdir(parents=True)
    artifacts, pruned = {}, []
    records = [fake_record(COMBINE_NAME, shared=0)]
    for key, status in VARIANTS.items():
        variant = Variant(*key)
        shared = 107_520 if status == "pruned" else 1000 * variant.block_h + 100 * variant.block_t + variant.num_warps
        records.append(fake_record(variant.name, status, shared=shared + variant.num_stages,
                                   num_warps=variant.launch_warps, num_stages=variant.num_stages,
                                   reason=PRUNED_REASON if status == "pruned" else None))
    for record in records:
        if record.status == "shipped":
            data = f"fake cubin of {record.name}".encode()
            (root / "sm90" / record.binary).write_bytes(data)
            artifacts[record.name] = {"binary": record.binary, "sha256": hashlib.sha256(data).hexdigest()}
        else:
            pruned.append(record.name)
        (root / "sm90" / f"{record.name}.json").write_text(json.dumps(record.to_json()))
    # The layout package.py writes: "pruned" lists the records of what is not shipped (Catalog.records reads it).
    manifest = {"package_version": "0", "triton_version": "3.9.0",
                "targets": {"sm90": {"capability": [9, 0], "sm_count": 132, "binaries": "sm90",
                                     "artifacts": artifacts, "pruned": sorted(pruned)}},
                "tables": ["sm90/v32_h16.json"]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    table = {"target": "sm90", "kv_format": "v32", "h_q": 16,
             "provenance": {"kind": "heuristic", "rule": "test rule: one row per batch bucket"},
             "rows": TABLE_ROWS}
    (root / "tables" / "sm90" / "v32_h16.json").write_text(json.dumps(table))
    return root


@pytest.fixture(autouse=True)
def _no_force(monkeypatch):
    monkeypatch.delenv(FORCE, raising=False)


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    return Catalog(write_kernel_dir(tmp_path / "kernels"))


def raw_table(rows=None, **overrides) -> dict:
    table = {"target": "sm90", "kv_format": "v32", "h_q": 16, "provenance": {"kind": "heuristic", "rule": "r"},
             "rows": [dict(r) for r in (rows or TABLE_ROWS)]}
    table.update(overrides)
    return table


# ---------------------------------------------------------------------------------------------- tables


@pytest.mark.parametrize("batch_rows, row", [(1, 0), (2, 1), (5, 1), (8, 1), (9, 2), (10**6, 2)])
def test_row_for_threshold_bins(catalog, batch_rows, row):
    table = catalog.table("sm90", "v32", 16)
    assert table.row_for(batch_rows) == row


def test_row_for_single_open_row():
    table = DispatchTable("sm90", "v32", 16, (TableRow(None, "v", 4),), {})
    assert table.row_for(1) == 0 and table.row_for(10**6) == 0


def test_table_parsed_from_file(catalog):
    table = catalog.table("sm90", "v32", 16)
    assert (table.target, table.kv_format, table.h_q) == ("sm90", "v32", 16)
    assert table.bounds == (1, 8)
    assert table.rows[1] == TableRow(8, "v32_fused_bh16_bt32_w4_s2", 8, programmatic_combine=True)
    assert table.rows[0].programmatic_combine is False  # absent: an ordinary launch
    assert table.provenance["kind"] == "heuristic"
    assert [t.h_q for t in catalog.tables("sm90")] == [16]


def test_parse_table_rejects_bounded_last_row():
    rows = [dict(r) for r in TABLE_ROWS]
    rows[-1]["max_batch_rows"] = 64
    with pytest.raises(ValueError, match=r"dispatch table tables/sm90/x\.json: the last row must be open-ended"):
        parse_table(raw_table(rows), "tables/sm90/x.json")


def test_parse_table_rejects_empty_rows():
    with pytest.raises(ValueError, match=r"dispatch table t\.json: the last row must be open-ended"):
        parse_table({**raw_table(), "rows": []}, "t.json")


@pytest.mark.parametrize("bounds", [(8, 8), (8, 1), (None, 8), (1, "8"), (1, 8.5), (True, 8)])
def test_parse_table_rejects_non_increasing_bounds(bounds):
    rows = [dict(r) for r in TABLE_ROWS]
    rows[0]["max_batch_rows"], rows[1]["max_batch_rows"] = bounds
    with pytest.raises(ValueError, match=r"dispatch table t\.json: bounds must be strictly increasing integers; "
                                         + re.escape(f"got {list(bounds)}")):
        parse_table(raw_table(rows), "t.json")


@pytest.mark.parametrize("drop", ["provenance", "rows", "h_q"])
def test_parse_table_rejects_missing_table_key(drop):
    raw = raw_table()
    del raw[drop]
    with pytest.raises(ValueError, match=rf"dispatch table t\.json is malformed: KeyError\('{drop}'\)"):
        parse_table(raw, "t.json")


@pytest.mark.parametrize("drop", ["max_batch_rows", "variant", "num_splits"])
def test_parse_table_rejects_missing_row_key(drop):
    rows = [dict(r) for r in TABLE_ROWS]
    del rows[1][drop]
    with pytest.raises(ValueError, match=rf"dispatch table t\.json is malformed: KeyError\('{drop}'\)"):
        parse_table(raw_table(rows), "t.json")


@pytest.mark.parametrize("value", [1, "true", None])
def test_parse_table_rejects_a_programmatic_combine_that_is_not_a_bool(value):
    rows = [dict(r) for r in TABLE_ROWS]
    rows[0]["programmatic_combine"] = value
    with pytest.raises(ValueError, match=rf"dispatch table t\.json is malformed: .*programmatic_combine must be true "
                                         rf"or false; got {re.escape(repr(value))}"):
        parse_table(raw_table(rows), "t.json")


def test_malformed_table_file_is_named(catalog):
    path = catalog.root / "tables" / "sm90" / "v32_h32.json"
    raw = raw_table(h_q=32)
    del raw["rows"][0]["variant"]
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=re.escape(f"dispatch table {path} is malformed")):
        catalog.table("sm90", "v32", 32)


def test_missing_table_names_what_exists(catalog):
    with pytest.raises(ValueError, match=r"no dispatch table for target sm90, kv_format 'model1', h_q 16; "
                                         r"tables for sm90: v32_h16$"):
        catalog.table("sm90", "model1", 16)
    with pytest.raises(ValueError, match=r"h_q 64; tables for sm90: v32_h16$"):
        choose(catalog, "sm90", "v32", 64, 1)


@pytest.mark.parametrize("variant, message", [
    ("model1_fused_bh16_bt32_w8_s2", "a model1 variant; the table is for kv_format 'v32'"),
    ("v32_fused_bh16_bt32_w8_s2", "which is not a shipped split variant for sm90"),  # pruned
    ("v32_fused_bh64_bt64_w8_s2", "which is not a shipped split variant for sm90"),  # not in the grid
])
def test_a_table_row_naming_a_variant_it_cannot_run_is_refused(catalog, variant, message):
    """An installed table edited by hand (or mixed up between layouts) fails at its first use, naming the row."""
    rows = [dict(r) for r in TABLE_ROWS]
    rows[1]["variant"] = variant
    path = catalog.root / "tables" / "sm90" / "v32_h32.json"
    path.write_text(json.dumps(raw_table(rows, h_q=32)))
    with pytest.raises(ValueError, match=re.escape(f"dispatch table {path}: row 1 names {variant}, {message}")):
        choose(catalog, "sm90", "v32", 32, 1)


# ---------------------------------------------------------------------------------------------- choose


@pytest.mark.parametrize("batch_rows, variant, splits, row", [
    (1, "v32_fused_bh16_bt16_w4_s2", 16, 0), (4, "v32_fused_bh16_bt32_w4_s2", 8, 1), (200, "v32_fused_bh32_bt16_w4_s2", 2, 2)])
def test_choose_uses_table(catalog, batch_rows, variant, splits, row):
    choice = choose(catalog, "sm90", "v32", 16, batch_rows)
    assert (choice.variant, choice.num_splits) == (variant, splits)
    why = choice.why
    assert f"table sm90/v32_h16 (heuristic) row {row}" in why
    bound = TABLE_ROWS[row]["max_batch_rows"]
    assert (f"<= {bound}" if bound is not None else "last row") in why


def test_choose_forced(catalog, monkeypatch):
    spec = "block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=5"
    monkeypatch.setenv(FORCE, spec)
    for batch_rows in (1, 8, 10**4):  # the table is bypassed at every batch size
        choice = choose(catalog, "sm90", "v32", 16, batch_rows)
        assert (choice.variant, choice.num_splits) == ("v32_fused_bh16_bt16_w8_s2", 5)
        assert choice.why == f"forced by {FORCE}={spec}"


def test_forced_without_table(catalog, monkeypatch):
    """Forcing needs no table for the shape: h_q 64 has none here."""
    monkeypatch.setenv(FORCE, " block_h=32, block_t=16, num_warps=4, num_stages=2, num_splits=3 ")
    choice = choose(catalog, "sm90", "v32", 64, 1)
    assert (choice.variant, choice.num_splits) == ("v32_fused_bh32_bt16_w4_s2", 3)


def test_empty_force_uses_table(catalog, monkeypatch):
    monkeypatch.setenv(FORCE, "")
    assert choose(catalog, "sm90", "v32", 16, 1).variant == "v32_fused_bh16_bt16_w4_s2"


def test_forcing_pruned_variant_names_reason_and_neighbours(catalog, monkeypatch):
    monkeypatch.setenv(FORCE, "block_h=16,block_t=32,num_warps=8,num_stages=2,num_splits=4")
    with pytest.raises(ValueError) as info:
        choose(catalog, "sm90", "v32", 16, 1)
    message = str(info.value)
    assert FORCE in message
    assert "v32_fused_bh16_bt32_w8_s2 was pruned for sm90" in message
    assert PRUNED_REASON in message
    neighbours = message.split("shipped neighbours: ")[1]
    # one field away: block_t, num_warps, num_stages, family; two away (bh16_bt16_w4) and the model1 twin are not
    assert neighbours == ("v32_fused_bh16_bt16_w8_s2, v32_fused_bh16_bt32_w4_s2, v32_fused_bh16_bt32_w8_s3, "
                          "v32_ws_bh16_bt32_w8_s2")


def test_forcing_unknown_variant(catalog, monkeypatch):
    monkeypatch.setenv(FORCE, "block_h=16,block_t=64,num_warps=4,num_stages=2,num_splits=4")
    with pytest.raises(ValueError, match=r"variant v32_fused_bh16_bt64_w4_s2 is not in the wheel's grid for sm90; "
                                         r"shipped neighbours: v32_fused_bh16_bt16_w4_s2, v32_fused_bh16_bt32_w4_s2$"):
        choose(catalog, "sm90", "v32", 16, 1)
    monkeypatch.setenv(FORCE, "block_h=128,block_t=128,num_warps=2,num_stages=7,num_splits=4")
    with pytest.raises(ValueError, match=r"not in the wheel's grid for sm90; shipped neighbours: none$"):
        choose(catalog, "sm90", "v32", 16, 1)


def test_forcing_is_per_kv_format(catalog):
    spec = "block_h=16,block_t=32,num_warps=8,num_stages=2,num_splits=4"
    assert forced_choice(catalog, "sm90", "model1", spec).variant == "model1_fused_bh16_bt32_w8_s2"
    with pytest.raises(ValueError, match="pruned"):
        forced_choice(catalog, "sm90", "v32", spec)


@pytest.mark.parametrize("spec, message", [
    ("block_h=16,block_t=16,num_warps=4,num_stages=2", r"lacks \['num_splits'\]"),
    ("block_h=16", r"lacks \['block_t', 'num_warps', 'num_stages', 'num_splits'\]"),
    ("block_h=16,block_t=x,num_warps=4,num_stages=2,num_splits=4", r"block_t must be an integer; got 'x'"),
    ("block_h=16,block_t=16,num_warps=4,num_stages=2,num_splits=2.5", r"num_splits must be an integer; got '2\.5'"),
    ("block_h=16,block_t=16,num_warps=4,num_stages=2,num_splits=4,mma=bf16", r"'mma=bf16' is not field=value"),
    ("block_h=16,block_t=16,num_warps=4,num_stages=2,num_splits", r"'num_splits' is not field=value"),
    ("block_h=16,block_t=16,num_warps=4,num_stages=2,num_splits=0", r"num_splits must be >= 1; got 0"),
    ("block_h=16,block_t=16,num_warps=4,num_stages=2,num_splits=-3", r"num_splits must be >= 1; got -3"),
    ("block_h=16,block_t=16,num_warps=4,num_stages=2,num_splits=4,programmatic_combine=2",
     r"programmatic_combine must be 0 or 1; got 2"),
])
def test_malformed_force_spec(catalog, monkeypatch, spec, message):
    with pytest.raises(ValueError, match=rf"^{FORCE}.*{message}"):
        parse_force(spec)
    monkeypatch.setenv(FORCE, spec)
    with pytest.raises(ValueError, match=rf"^{FORCE}.*{message}"):
        choose(catalog, "sm90", "v32", 16, 1)


def test_forcing_overrides_the_environment_in_its_context_only(catalog, monkeypatch):
    monkeypatch.setenv(FORCE, "block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=5")
    with forcing("block_h=32,block_t=16,num_warps=4,num_stages=2,num_splits=3"):
        choice = choose(catalog, "sm90", "v32", 16, 1)
        assert (choice.variant, choice.num_splits, choice.table) == ("v32_fused_bh32_bt16_w4_s2", 3, None)
        with forcing(None):  # the table, although the environment forces
            assert choose(catalog, "sm90", "v32", 16, 1).row == 0
    assert choose(catalog, "sm90", "v32", 16, 1).variant == "v32_fused_bh16_bt16_w8_s2"  # the environment again


def test_parse_force_valid():
    assert parse_force("num_splits=16,block_h=16,block_t=16,num_warps=8,num_stages=2,") == {
        "family": "fused", "block_h": 16, "block_t": 16, "num_warps": 8, "num_stages": 2, "num_splits": 16,
        "programmatic_combine": 0}
    assert parse_force("family=ws,block_h=16,block_t=64,num_warps=8,num_stages=2,num_splits=4")["family"] == "ws"
    with pytest.raises(ValueError, match=r"family must be one of \('fused', 'ws', 'pingpong', 'wg'\); got 'tiled'"):
        parse_force("family=tiled,block_h=16,block_t=64,num_warps=8,num_stages=2,num_splits=4")
    assert parse_force("block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=4,programmatic_combine=1")[
        "programmatic_combine"] == 1


def test_the_combine_launch_follows_the_table_row_or_the_forced_spec(catalog):
    """A row's programmatic_combine reaches the choice; a forced spec leaves it off unless it says 1."""
    table = catalog.table("sm90", "v32", 16)
    for i, row in enumerate(table.rows):
        batch_rows = row.max_batch_rows if row.max_batch_rows is not None else 10_000
        assert choose(catalog, "sm90", "v32", 16, batch_rows).programmatic_combine is row.programmatic_combine
    spec = "block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=4"
    assert forced_choice(catalog, "sm90", "v32", spec).programmatic_combine is False
    assert forced_choice(catalog, "sm90", "v32", spec + ",programmatic_combine=1").programmatic_combine is True


# ---------------------------------------------------------------------------------------------- explain


def test_explain_names_variant_splits_and_row(catalog):
    text = explain(5, 16, "v32", target="sm90", catalog=catalog)
    assert text == ("v32_fused_bh16_bt32_w4_s2, num_splits=8 (clamped at run time to the tile count; rows that fill "
                    "whole waves of the GPU run unsplit): batch_rows 5: "
                    "table sm90/v32_h16 (heuristic) row 1: batch_rows <= 8; 19,206 B shared, 128 registers")
    assert "batch_rows 5" in text
    assert "table sm90/v32_h16 (heuristic) row 1" in text and "<= 8" in text
    shared = 1000 * 16 + 100 * 32 + 4 + 2
    assert f"{shared:,} B shared, 128 registers" in text
    last = explain(10**6, 16, "v32", target="sm90", catalog=catalog)
    assert last.startswith("v32_fused_bh32_bt16_w4_s2, num_splits=2") and "row 2" in last and "last row" in last


def test_explain_forced(catalog, monkeypatch):
    monkeypatch.setenv(FORCE, "block_h=16,block_t=32,num_warps=8,num_stages=3,num_splits=7")
    text = explain(1, 16, "v32", target="sm90", catalog=catalog)
    assert text.startswith("v32_fused_bh16_bt32_w8_s3, num_splits=7") and f"forced by {FORCE}" in text


# ---------------------------------------------------------------------------------------------- catalog


def test_binary_checks_sha256(catalog):
    name = "v32_fused_bh16_bt16_w4_s2"
    assert catalog.binary("sm90", name) == f"fake cubin of {name}".encode()
    (catalog.root / "sm90" / f"{name}.cubin").write_bytes(b"tampered")
    with pytest.raises(RuntimeError, match=r"has sha256 .*the manifest says .*reinstall the wheel"):
        catalog.binary("sm90", name)


def test_binary_refuses_a_record_from_another_triton(catalog):
    name = "v32_fused_bh16_bt16_w4_s2"
    path = catalog.root / "sm90" / f"{name}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "triton_version": "3.6.0"}))
    with pytest.raises(RuntimeError, match=r"compiled by Triton 3\.6\.0, the package by Triton 3\.9\.0"):
        Catalog(catalog.root).binary("sm90", name)


def test_a_target_without_capability_is_only_chosen_by_name(catalog, monkeypatch):
    """sm89-proxy has no compute capability of its own (variants/targets.toml): SPARSE_MLA_AOT_TARGET selects it."""
    path = catalog.root / paths.MANIFEST_NAME
    manifest = json.loads(path.read_text())
    manifest["targets"]["sm89-proxy"] = {"capability": None, "sm_count": 132, "binaries": "sm89-proxy",
                                         "artifacts": {}, "pruned": []}
    path.write_text(json.dumps(manifest))
    fresh = Catalog(catalog.root)
    with pytest.raises(RuntimeError, match=r"compute capability 8\.9; this wheel holds: sm90 \(compute capability "
                                           r"9\.0\)$"):
        fresh.target_for_capability((8, 9))
    monkeypatch.setenv(paths.TARGET_ENV, "sm89-proxy")
    assert fresh.target_for_capability((9, 0)) == "sm89-proxy"


def test_a_record_that_breaks_the_schema_is_refused_naming_its_file(catalog):
    path = catalog.root / "sm90" / "v32_fused_bh16_bt16_w4_s2.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "shared_bytes": 8}))
    with pytest.raises(ValueError, match=re.escape(f"{path}: artifact record has unknown keys ['shared_bytes'] and "
                                                   f"lacks keys []")):
        Catalog(catalog.root).records("sm90")


def test_target_for_capability(catalog):
    assert catalog.target_for_capability((9, 0)) == "sm90"
    assert catalog.targets == ["sm90"]
    for capability in ((8, 0), (12, 0), (9, 1)):
        with pytest.raises(RuntimeError, match=rf"no kernels for compute capability "
                                               rf"{capability[0]}\.{capability[1]}; this wheel holds: "
                                               rf"sm90 \(compute capability 9\.0\)$"):
            catalog.target_for_capability(capability)


def test_missing_manifest(tmp_path):
    with pytest.raises(RuntimeError, match=r"no kernel manifest at .*" + paths.KERNEL_DIR_ENV):
        Catalog(tmp_path).targets


def test_records_and_shipped(catalog):
    records = catalog.records("sm90")
    assert set(records) == {COMBINE_NAME, *(Variant(*k).name for k in VARIANTS)}
    assert set(catalog.shipped("sm90")) == set(records) - {"v32_fused_bh16_bt32_w8_s2"}


# ---------------------------------------------------------------------------------------------- plan


def decode_call(b=2, s_q=3, h_q=16, topk=128, kv_format="v32", **kw):
    args = make_inputs(b, s_q, h_q, topk, kv_format, page_size=kw.pop("page_size", 64), **kw)
    return check_arguments(**args)


@pytest.mark.parametrize("h_q, block_h", [(16, 16), (16, 32), (16, 64), (128, 16), (64, 32), (8, 16)])
def test_plan_grid(h_q, block_h):
    call = decode_call(h_q=h_q)
    plan = make_plan(call, "v", block_h, 16, 4)
    assert plan.split_grid == (6 * 4 * math.ceil(h_q / block_h), 1, 1)  # rows x splits x head blocks
    assert plan.combine_grid == (6, h_q, 1)
    assert plan.partial_shape == (6, h_q, 4)
    assert (plan.variant, plan.block_h, plan.block_t, plan.num_splits) == ("v", block_h, 16, 4)


@pytest.mark.parametrize("wave, unsplit_rows, splits", [
    (0, 0, 4),    # unknown wave: every row split
    (13, 0, 4),   # 12 programs of one split fit one wave: every row split
    (12, 6, 1),   # 12 programs fill one wave exactly: nothing split, no combine
    (4, 6, 1),    # three whole waves
    (5, 5, 4),    # rows 0-4 fill two waves, row 5 is split
    (7, 3, 4),    # one wave of 7 programs ends inside row 3: rows 0-2 unsplit
])
def test_plan_splits_only_the_rows_past_the_last_whole_wave(wave, unsplit_rows, splits):
    """6 rows x 2 head blocks at 4 splits on a GPU that runs `wave` programs at once."""
    call = decode_call(h_q=32)
    plan = make_plan(call, "v", 16, 16, 4, wave)
    split_rows = 6 - unsplit_rows
    assert (plan.num_splits, plan.unsplit_rows) == (splits, unsplit_rows)
    assert plan.split_grid == ((unsplit_rows + split_rows * splits) * 2, 1, 1)
    assert plan.combine_grid == (None if splits == 1 else (split_rows, 32, 1))
    assert plan.partial_shape == (split_rows, 32, splits)
    assert combined_offsets(call, plan) == (unsplit_rows * 32 * 512, unsplit_rows * 32)
    args = _named(split_arguments(call, plan, "po", "pl", "out", "lse", pointer=lambda t: t), SPLIT_ARG_NAMES)
    assert (args["num_splits"], args["unsplit_rows"]) == (splits, unsplit_rows)


@pytest.mark.parametrize("topk, extra_topk, block_t, requested, expected", [
    (128, 0, 16, 16, 8),      # clamped to 128/16 tiles
    (128, 0, 32, 16, 4),
    (128, 64, 16, 16, 12),    # the extra set's tiles count too
    (128, 64, 64, 16, 3),
    (2048, 0, 16, 100, MAX_SPLITS),   # 128 tiles: clamped to MAX_SPLITS
    (2048, 0, 16, MAX_SPLITS, MAX_SPLITS),
    (2048, 0, 16, 5, 5),      # below both: as asked
    (128, 0, 16, 0, 1),       # never below 1
    (64, 0, 128, 4, 1),       # fewer tokens than one tile: one split
])
def test_plan_split_clamp(topk, extra_topk, block_t, requested, expected):
    call = decode_call(b=1, s_q=1, topk=topk, kv_format="model1", extra_topk=extra_topk)
    plan = make_plan(call, "v", 16, block_t, requested)
    assert plan.num_splits == expected
    assert plan.split_grid == (expected, 1, 1) and plan.partial_shape == (int(expected > 1), 16, expected)
    # one split writes out and lse itself: no combine kernel, no workspace
    assert (plan.combine_grid is None) == (expected == 1)
    assert (workspace_elements(plan) == (0, 0)) == (expected == 1)


def test_plan_ignores_tensor_values():
    a = decode_call(seed=1, with_topk_length=True)
    b = decode_call(seed=2, with_topk_length=True)
    assert make_plan(a, "v", 16, 16, 8) == make_plan(b, "v", 16, 16, 8)


def _named(args, names):
    assert len(args) == len(names)
    return dict(zip(names, args))


def test_split_arguments_without_options():
    call = decode_call(kv_format="v32")
    plan = make_plan(call, "v", 16, 16, 4)
    po, pl, out, lse = object(), object(), object(), object()
    a = _named(split_arguments(call, plan, po, pl, out, lse, pointer=lambda t: t), SPLIT_ARG_NAMES)
    assert a["q_ptr"] is call.q and a["k_cache_ptr"] is call.k_cache and a["indices_ptr"] is call.indices
    for name in ("topk_length_ptr", "extra_k_cache_ptr", "extra_indices_ptr", "extra_topk_length_ptr",
                 "attn_sink_ptr"):
        assert a[name] is call.q, name
    assert a["partial_out_ptr"] is po and a["partial_lse_ptr"] is pl
    assert a["out_ptr"] is out and a["lse_ptr"] is lse
    assert a["sm_scale_log2"] == pytest.approx(call.softmax_scale * LOG2_E)
    assert (a["s_q"], a["h_q"], a["topk"], a["extra_topk"], a["num_splits"], a["unsplit_rows"]) == (3, 16, 128, 0, 4, 0)
    assert (a["has_topk_length"], a["has_extra_topk_length"], a["has_attn_sink"]) == (0, 0, 0)
    assert (a["page_size"], a["block_stride"]) == (64, 64 * 656)
    assert (a["extra_page_size"], a["extra_block_stride"]) == (1, 0)


def test_split_arguments_with_every_option():
    call = decode_call(kv_format="model1", page_size=61, extra_topk=64, extra_page_size=3, with_topk_length=True,
                       with_sink=True)
    plan = make_plan(call, "v", 16, 16, 64)
    a = _named(split_arguments(call, plan, "po", "pl", "out", "lse", pointer=lambda t: t), SPLIT_ARG_NAMES)
    assert a["topk_length_ptr"] is call.topk_length
    assert a["extra_k_cache_ptr"] is call.extra_k_cache
    assert a["extra_indices_ptr"] is call.extra_indices
    assert a["extra_topk_length_ptr"] is call.extra_topk_length
    assert a["attn_sink_ptr"] is call.attn_sink
    assert (a["has_topk_length"], a["has_extra_topk_length"], a["has_attn_sink"]) == (1, 1, 1)
    assert (a["topk"], a["extra_topk"], a["num_splits"]) == (128, 64, 12)
    assert (a["page_size"], a["block_stride"], a["extra_page_size"], a["extra_block_stride"]) == (61, 35712, 3, 2304)


def test_split_arguments_extra_set_without_lengths():
    call = decode_call(kv_format="model1", extra_topk=64, with_topk_length=False)
    plan = make_plan(call, "v", 16, 16, 4)
    a = _named(split_arguments(call, plan, "po", "pl", "out", "lse", pointer=lambda t: t), SPLIT_ARG_NAMES)
    assert a["extra_k_cache_ptr"] is call.extra_k_cache and a["extra_indices_ptr"] is call.extra_indices
    assert a["topk_length_ptr"] is call.q and a["extra_topk_length_ptr"] is call.q
    assert (a["has_topk_length"], a["has_extra_topk_length"]) == (0, 0)


def test_split_arguments_topk_length_only():
    call = decode_call(kv_format="v32", with_topk_length=True)
    plan = make_plan(call, "v", 16, 16, 4)
    a = _named(split_arguments(call, plan, "po", "pl", "out", "lse", pointer=lambda t: t), SPLIT_ARG_NAMES)
    assert a["topk_length_ptr"] is call.topk_length and a["extra_topk_length_ptr"] is call.q
    assert (a["has_topk_length"], a["has_extra_topk_length"]) == (1, 0)


def test_split_arguments_extra_topk_length_only():
    args = make_inputs(2, 3, 16, 128, "model1", extra_topk=64, with_topk_length=True)
    call = check_arguments(**{**args, "topk_length": None})
    plan = make_plan(call, "v", 16, 16, 4)
    a = _named(split_arguments(call, plan, "po", "pl", "out", "lse", pointer=lambda t: t), SPLIT_ARG_NAMES)
    assert a["topk_length_ptr"] is call.q and a["extra_topk_length_ptr"] is call.extra_topk_length
    assert (a["has_topk_length"], a["has_extra_topk_length"]) == (0, 1)


def test_split_arguments_default_pointer_is_address():
    call = decode_call()
    plan = make_plan(call, "v", 16, 16, 4)
    a = _named(split_arguments(call, plan, call.q, call.q, call.q, call.q), SPLIT_ARG_NAMES)
    assert a["q_ptr"] == call.q.data_ptr() and a["topk_length_ptr"] == call.q.data_ptr()
    assert a["indices_ptr"] == call.indices.data_ptr()


@pytest.mark.parametrize("with_sink", [False, True])
def test_combine_arguments(with_sink):
    call = decode_call(with_sink=with_sink)
    plan = make_plan(call, "v", 16, 16, 4)
    a = _named(combine_arguments(call, plan, "po", "pl", "out", "lse", pointer=lambda t: t), COMBINE_ARG_NAMES)
    assert (a["partial_out_ptr"], a["partial_lse_ptr"], a["out_ptr"], a["lse_ptr"]) == ("po", "pl", "out", "lse")
    assert a["attn_sink_ptr"] is (call.attn_sink if with_sink else "pl")
    assert (a["h_q"], a["num_splits"], a["has_attn_sink"]) == (16, 4, int(with_sink))
