"""The GPU-free parts of tune and ab: bucket merging, the force spec, the A/B verdict."""
import pytest

from build_tools.ab import parse_side, verdict
from build_tools.tune import force_spec, table_rows
from sparse_mla_aot.catalog import parse_table


def _best(choices):
    return {b: {"variant": v, "num_splits": str(s), "median_us": "1"} for b, (v, s) in choices.items()}


def test_table_rows_merge_equal_neighbours_and_leave_the_last_row_open():
    rows = table_rows(_best({1: ("a", 64), 2: ("a", 64), 4: ("a", 32), 8: ("b", 8), 16: ("b", 8)}))
    assert rows == [{"max_batch_rows": 2, "variant": "a", "num_splits": 64},
                    {"max_batch_rows": 4, "variant": "a", "num_splits": 32},
                    {"max_batch_rows": None, "variant": "b", "num_splits": 8}]
    table = {"target": "sm90", "kv_format": "v32", "h_q": 16, "provenance": {"kind": "tuned"}, "rows": rows}
    assert parse_table(table, "tuned").row_for(3) == 1


def test_single_choice_is_one_open_row():
    assert table_rows(_best({1: ("a", 1), 128: ("a", 1)})) == [{"max_batch_rows": None, "variant": "a",
                                                               "num_splits": 1}]


def test_force_spec_round_trips_through_the_runtime_parser():
    spec = force_spec({"block_h": 16, "block_t": 32, "num_warps": 8, "num_stages": 3}, 4)
    assert parse_side(spec) == spec
    assert parse_side("table") is None
    with pytest.raises(ValueError, match="SPARSE_MLA_AOT_FORCE"):
        parse_side("block_h=16")


def _stats(median, p10, p90):
    return {"median_us": median, "p10_us": p10, "p90_us": p90}


def test_verdict_only_beyond_the_spread():
    assert verdict(_stats(100, 98, 103), _stats(102, 99, 104)).startswith("no verdict")
    assert verdict(_stats(100, 98, 103), _stats(120, 118, 121)) == "A faster by 16.7%"
    assert verdict(_stats(120, 118, 121), _stats(100, 98, 103)) == "B faster by 16.7%"


def test_heuristic_tables_never_replace_a_tuned_table(tmp_path, monkeypatch):
    import json

    from build_tools import paths, tables

    monkeypatch.setattr(paths, "VARIANTS_DIR", tmp_path / "variants")
    monkeypatch.setenv(paths.BUILD_DIR_ENV, str(tmp_path / "build"))
    records = [{"name": f"{f}_bh{bh}_bt16_w4_s2", "kind": "split", "status": "shipped",
                "variant": {"kv_format": f, "block_h": bh, "block_t": 16, "num_warps": 4, "num_stages": 2},
                "resources": {"stack_bytes": 0 if bh == 16 else 64, "local_bytes": 0}}
               for f in ("v32", "model1") for bh in (16, 32, 64)]
    (tmp_path / "build" / "sm90").mkdir(parents=True)
    (tmp_path / "build" / "sm90" / "report.json").write_text(json.dumps({"artifacts": records}))
    tuned = tables.table_path("sm90", "model1", 64)
    tuned.parent.mkdir(parents=True)
    tuned.write_text(json.dumps({"provenance": {"kind": "tuned"}, "rows": []}))
    tables.write_heuristic_tables("sm90")
    assert json.loads(tuned.read_text()) == {"provenance": {"kind": "tuned"}, "rows": []}
    heuristic = json.loads(tables.table_path("sm90", "model1", 128).read_text())
    assert heuristic["provenance"]["kind"] == "heuristic"
    rows = [(r["max_batch_rows"], r["variant"], r["num_splits"]) for r in heuristic["rows"]]
    # 132 SMs: block_h 16 (8 head blocks) while bound * 8 < 132, then block_h 64 (2 head blocks)
    assert rows[:5] == [(1, "model1_bh16_bt16_w4_s2", 32), (2, "model1_bh16_bt16_w4_s2", 16),
                        (4, "model1_bh16_bt16_w4_s2", 8), (8, "model1_bh16_bt16_w4_s2", 4),
                        (16, "model1_bh16_bt16_w4_s2", 2)]
    assert rows[5:] == [(32, "model1_bh64_bt16_w4_s2", 4), (64, "model1_bh64_bt16_w4_s2", 2),
                        (128, "model1_bh64_bt16_w4_s2", 1), (None, "model1_bh64_bt16_w4_s2", 1)]
