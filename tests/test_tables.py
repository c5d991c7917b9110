"""Proxy-derived dispatch tables (build_tools/tables.py): an sm120 / sm121 table made from an sm89-proxy sweep CSV
(written here by measurements.write_rows, as tune writes it) and the target's build report, in tmp folders: the
repository's variants/ and build/ are never read for records nor written."""
from __future__ import annotations

import json
import re

import pytest

from build_tools import paths, tables
from build_tools.measurements import CSV_FIELDS, write_rows
from build_tools.tables import NEAR_TIE, PROXY_TARGET, proxy_derived_table, write_proxy_derived_tables
from sparse_mla_aot.catalog import parse_table
from sparse_mla_aot.contract import MAX_SPLITS, Variant, table_stem
from tests.fakes import fake_record

FAST_SPILLS = Variant("v32", "fused", 16, 32, 4, 1).name  # fastest on the proxy, but spills on sm120
NEAR_CLEAN = Variant("v32", "fused", 16, 64, 4, 1).name  # no spills
SOME_SPILLS = Variant("v32", "fused", 32, 32, 4, 1).name
ALSO_SOME = Variant("v32", "fused", 32, 64, 4, 1).name  # spills as much as SOME_SPILLS
PRUNED = Variant("v32", "fused", 64, 64, 4, 1).name  # pruned for sm120
UNBUILT = Variant("v32", "ws", 16, 32, 8, 2).name  # measured on the proxy, not in sm120's build at all
STACK = {FAST_SPILLS: 1328, NEAR_CLEAN: 0, SOME_SPILLS: 200, ALSO_SOME: 200, PRUNED: 0}
SM_COUNT = {"sm120": 170, "sm121": 48, PROXY_TARGET: 132}  # variants/targets.toml


def measured(batch, variant, splits, median, stage="full", programmatic=0) -> dict:
    """One CSV row as tune records it (every column of measurements.CSV_FIELDS)."""
    row = {"batch_rows": batch, "variant": variant, "num_splits": splits, "programmatic_combine": programmatic,
           "stage": stage, "median_us": median, "p10_us": median * 0.98, "p90_us": median * 1.02, "n": 50,
           "calls_per_replay": 32}
    assert set(row) == set(CSV_FIELDS)
    return row


def strings(rows) -> list[dict]:
    """Rows as read back from a CSV (every value a string): what proxy_derived_table is given."""
    return [{k: str(v) for k, v in r.items()} for r in rows]


def records() -> dict:
    return {name: fake_record(name, "pruned" if name == PRUNED else "shipped", target="sm120", stack_bytes=stack,
                              reason="107,520 B shared memory > 101,376 B" if name == PRUNED else None)
            for name, stack in STACK.items()}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """tmp variants/ and build/ (with sm120's report.json, which sm121 also runs), and an empty sweep folder."""
    monkeypatch.setattr(paths, "VARIANTS_DIR", tmp_path / "variants")
    monkeypatch.setenv(paths.BUILD_DIR_ENV, str(tmp_path / "build"))
    report = tmp_path / "build" / "sm120" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"target": "sm120", "artifacts": [r.to_json() for r in records().values()]}))
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    assert tables.table_path("sm120", "v32", 128).is_relative_to(tmp_path)
    return sweep


def write_sweep(sweep, kv_format, h_q, rows):
    path = sweep / f"{PROXY_TARGET}_{table_stem(kv_format, h_q)}.csv"
    write_rows(path, rows)
    return path


def choices(table) -> list[tuple]:
    return [(r["max_batch_rows"], r["variant"], r["num_splits"]) for r in table["rows"]]


# ---------------------------------------------------------------------------------------------- the pick


def test_a_near_tie_that_spills_less_beats_the_fastest(workspace):
    """Within NEAR_TIE of the fastest, the least-spilling variant wins (the proxy's SM hides sm120's spills);
    beyond it the fastest wins even though it spills. Splits 4 stay 4 on sm120 (4 x 170/132 = 5.2)."""
    assert NEAR_TIE == 1.10
    write_sweep(workspace, "v32", 128, [
        measured(1, FAST_SPILLS, 4, 100.0), measured(1, NEAR_CLEAN, 4, 108.0),  # within 10%
        measured(2, FAST_SPILLS, 4, 100.0), measured(2, NEAR_CLEAN, 4, 111.0),  # beyond
    ])
    (path,) = write_proxy_derived_tables("sm120", workspace)
    assert path == paths.VARIANTS_DIR / "sm120" / "v32_h128.json"
    table = json.loads(path.read_text())
    assert choices(table) == [(1, NEAR_CLEAN, 4), (None, FAST_SPILLS, 4)]
    assert (table["target"], table["kv_format"], table["h_q"]) == ("sm120", "v32", 128)
    assert table["provenance"]["kind"] == "proxy-derived"
    runtime = parse_table(table, str(path))  # the runtime reads it as it reads any table
    assert runtime.rows[runtime.row_for(1)].variant == NEAR_CLEAN
    assert runtime.rows[runtime.row_for(64)].variant == FAST_SPILLS


def test_among_near_ties_least_spills_first_then_speed():
    """Three near ties: the spill-free one although it is the slowest of them; with no spill-free one near, the
    least spilling, and of two that spill alike the faster."""
    rows = strings([
        measured(1, FAST_SPILLS, 8, 100.0), measured(1, SOME_SPILLS, 8, 103.0), measured(1, NEAR_CLEAN, 8, 109.0),
        measured(2, FAST_SPILLS, 8, 100.0), measured(2, ALSO_SOME, 8, 106.0), measured(2, SOME_SPILLS, 8, 104.0),
        measured(2, NEAR_CLEAN, 8, 120.0),
    ])
    table = proxy_derived_table("sm120", records(), rows, "v32", 128, {"csv": "s.csv"})
    assert choices(table) == [(1, NEAR_CLEAN, 8), (None, SOME_SPILLS, 8)]


def test_rows_of_unshipped_variants_and_screening_rows_are_ignored():
    """A pruned or unbuilt variant's time, however fast, is neither picked nor the fastest that sets the near-tie
    window; nor is a screening row (5 replays, not a result)."""
    rows = strings([
        measured(1, PRUNED, 4, 10.0), measured(1, UNBUILT, 4, 10.0), measured(1, NEAR_CLEAN, 4, 10.0, "screen"),
        measured(1, FAST_SPILLS, 4, 100.0), measured(1, SOME_SPILLS, 4, 115.0),
        measured(2, NEAR_CLEAN, 16, 1.0, "screen"), measured(2, SOME_SPILLS, 4, 50.0),
    ])
    table = proxy_derived_table("sm120", records(), rows, "v32", 128, {"csv": "s.csv"})
    assert choices(table) == [(1, FAST_SPILLS, 4), (None, SOME_SPILLS, 4)]


def test_a_measured_programmatic_combine_launch_is_kept():
    rows = strings([measured(1, NEAR_CLEAN, 4, 90.0, programmatic=1), measured(1, NEAR_CLEAN, 4, 95.0)])
    table = proxy_derived_table("sm120", records(), rows, "v32", 128, {})
    assert table["rows"] == [{"max_batch_rows": None, "variant": NEAR_CLEAN, "num_splits": 4,
                              "programmatic_combine": True}]


# ---------------------------------------------------------------------------------------------- split counts


@pytest.mark.parametrize("target, proxy_splits, expected", [
    ("sm120", 1, 1), ("sm120", 2, 2), ("sm120", 3, 4),  # 3.9 -> 4
    ("sm120", 5, 8), ("sm120", 6, 8),  # 6.4 and 7.7 -> 8 (nearest in log2)
    ("sm120", 10, 16),  # 12.9: log2 3.69 -> 16 (a tile-count-clamped proxy measurement)
    ("sm120", 32, 32),  # 41.2: log2 5.36 -> 32
    ("sm120", 64, MAX_SPLITS),  # 82.4 -> 64
    ("sm120", 128, MAX_SPLITS),  # 164.8 -> 128, capped
    ("sm121", 1, 1),  # 0.36 -> 0.5, never below one split
    ("sm121", 4, 2),  # 1.45 -> 2
    ("sm121", 32, 16),  # 11.6 -> 16
])
def test_split_counts_scale_by_the_sm_ratio_to_a_power_of_two(target, proxy_splits, expected):
    rows = strings([measured(1, NEAR_CLEAN, proxy_splits, 50.0)])
    table = proxy_derived_table(target, records(), rows, "v32", 128, {})
    assert table["rows"][0]["num_splits"] == expected
    assert f"({SM_COUNT[target]} / {SM_COUNT[PROXY_TARGET]})" in table["provenance"]["rule"]


def test_batches_whose_scaled_choices_agree_merge_into_one_row():
    """5 and 6 splits on the proxy are both 8 on sm120: the two batch sizes become one open row."""
    rows = strings([measured(1, NEAR_CLEAN, 5, 50.0), measured(2, NEAR_CLEAN, 6, 60.0),
                    measured(4, NEAR_CLEAN, 12, 70.0)])
    table = proxy_derived_table("sm120", records(), rows, "v32", 128, {})
    assert choices(table) == [(2, NEAR_CLEAN, 8), (None, NEAR_CLEAN, 16)]


# ---------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("rows", [
    [],  # a header only
    [measured(1, PRUNED, 4, 10.0), measured(1, UNBUILT, 4, 10.0), measured(1, NEAR_CLEAN, 4, 10.0, "screen")],
])
def test_a_sweep_without_a_usable_row_is_refused_naming_its_shape(workspace, rows):
    write_sweep(workspace, "model1", 64, rows)
    with pytest.raises(ValueError, match=r"^the proxy sweep of model1 h_q 64 has no full measurement of a variant "
                                         r"shipped for sm120$"):
        write_proxy_derived_tables("sm120", workspace)
    assert not tables.table_path("sm120", "model1", 64).exists()


@pytest.mark.parametrize("target", ["sm90", PROXY_TARGET])
def test_only_mma_sync_targets_other_than_the_proxy_take_proxy_derived_tables(target, workspace):
    """sm90 has its own GPU to tune on, and the proxy would be derived from itself."""
    rows = strings([measured(1, NEAR_CLEAN, 4, 50.0)])
    message = rf"^proxy-derived tables are for \['sm120', 'sm121'\]; got '{target}'$"
    with pytest.raises(ValueError, match=message):
        proxy_derived_table(target, records(), rows, "v32", 128, {})
    # Refused on entry: with no build of the target and an empty sweep folder, nothing else could have said so.
    assert not (paths.build_dir() / target).exists() and not any(workspace.iterdir())
    with pytest.raises(ValueError, match=message):
        write_proxy_derived_tables(target, workspace)


# ---------------------------------------------------------------------------------------------- the files


@pytest.mark.parametrize("kind, replaced", [("tuned", False), ("heuristic", True), ("proxy-derived", True)])
def test_only_a_tuned_table_is_kept(workspace, kind, replaced):
    """A table measured on the target itself outranks the proxy; a rule's table or an older derivation does not."""
    existing = tables.table_path("sm120", "v32", 128)
    existing.parent.mkdir(parents=True)
    before = json.dumps({"target": "sm120", "provenance": {"kind": kind}, "rows": []})
    existing.write_text(before)
    write_sweep(workspace, "v32", 128, [measured(1, NEAR_CLEAN, 4, 50.0)])
    written = write_proxy_derived_tables("sm120", workspace)
    assert written == ([existing] if replaced else [])
    after = json.loads(existing.read_text())
    if replaced:
        assert after["provenance"]["kind"] == "proxy-derived" and choices(after) == [(None, NEAR_CLEAN, 4)]
    else:
        assert existing.read_text() == before


def test_files_that_are_not_a_sweep_of_a_table_shape_are_skipped(workspace):
    """Only <proxy>_<kv_format>_h<h_q>.csv is a sweep; anything else in the folder (even unreadable) is left."""
    garbage = "not,a,sweep\n1,2,3\n"
    for name in (f"{PROXY_TARGET}_notes.csv", f"{PROXY_TARGET}_v16_h64.csv", f"{PROXY_TARGET}_v32_hx.csv",
                 f"{PROXY_TARGET}_v32.csv", "sm90_v32_h64.csv", f"{PROXY_TARGET}_v32_h64.txt"):
        (workspace / name).write_text(garbage)
    good = write_sweep(workspace, "model1", 16, [measured(1, NEAR_CLEAN, 4, 50.0)])
    written = write_proxy_derived_tables("sm120", workspace)
    assert written == [tables.table_path("sm120", "model1", 16)]
    assert sorted(p.name for p in (paths.VARIANTS_DIR / "sm120").iterdir()) == ["model1_h16.json"]
    assert json.loads(written[0].read_text())["provenance"]["proxy_sweep"]["csv"] == f"sweep/{good.name}"


def test_provenance_names_the_sweep_and_the_proxy_table_it_came_with(workspace):
    """The derived table says which CSV and which proxy table (if the proxy has one for the shape) it rests on."""
    write_sweep(workspace, "v32", 128, [measured(1, NEAR_CLEAN, 4, 50.0)])
    write_sweep(workspace, "v32", 16, [measured(1, NEAR_CLEAN, 4, 50.0)])
    proxy_table = tables.table_path(PROXY_TARGET, "v32", 128)
    proxy_table.parent.mkdir(parents=True)
    proxy_provenance = {"kind": "tuned", "gpu": "NVIDIA H200", "date": "2026-12-04"}
    proxy_table.write_text(json.dumps({"provenance": proxy_provenance, "rows": []}))
    written = write_proxy_derived_tables("sm120", workspace)
    h128, h16 = tables.table_path("sm120", "v32", 128), tables.table_path("sm120", "v32", 16)
    assert sorted(written) == sorted([h128, h16])
    assert json.loads(h128.read_text())["provenance"]["proxy_sweep"] == {
        "csv": "sweep/sm89-proxy_v32_h128.csv", "proxy_table": proxy_provenance}
    assert json.loads(h16.read_text())["provenance"]["proxy_sweep"] == {
        "csv": "sweep/sm89-proxy_v32_h16.csv", "proxy_table": None}


def test_sm121_derives_from_sm120_s_build_with_its_own_sm_count(workspace):
    """sm121 runs sm120's cubins: its records come from build/sm120 (there is no build/sm121), its splits from
    48 multiprocessors."""
    write_sweep(workspace, "v32", 128, [measured(1, FAST_SPILLS, 32, 100.0), measured(1, NEAR_CLEAN, 32, 105.0)])
    assert not (paths.build_dir() / "sm121").exists()
    (path,) = write_proxy_derived_tables("sm121", workspace)
    assert path == paths.VARIANTS_DIR / "sm121" / "v32_h128.json"
    assert choices(json.loads(path.read_text())) == [(None, NEAR_CLEAN, 16)]


def test_a_second_run_on_the_same_sweep_leaves_the_file_as_it_was(workspace):
    """write_if_different: the same sweep gives the same bytes, and the file is not rewritten (mtime kept)."""
    write_sweep(workspace, "v32", 128, [measured(1, NEAR_CLEAN, 4, 50.0), measured(8, FAST_SPILLS, 2, 40.0)])
    (path,) = write_proxy_derived_tables("sm120", workspace)
    text, stat = path.read_text(), path.stat()
    assert write_proxy_derived_tables("sm120", workspace) == [path]
    again = path.stat()
    assert path.read_text() == text and (again.st_ino, again.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)


def test_a_table_without_a_provenance_kind_is_named_not_guessed_at(workspace):
    """A hand-edited table whose provenance lost its kind: neither kept nor replaced, but refused with its path."""
    write_sweep(workspace, "v32", 128, [measured(1, NEAR_CLEAN, 4, 50.0)])
    (path,) = write_proxy_derived_tables("sm120", workspace)
    table = json.loads(path.read_text())
    table["provenance"].pop("kind")
    path.write_text(json.dumps(table))
    with pytest.raises(ValueError, match=rf"^dispatch table {re.escape(str(path))}: provenance.kind must be one of "
                                         r"\('heuristic', 'tuned', 'proxy-derived'\); got provenance \{"):
        write_proxy_derived_tables("sm120", workspace)
