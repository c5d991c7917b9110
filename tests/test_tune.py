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
