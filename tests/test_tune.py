"""The GPU-free parts of tune and ab: bucket merging, the force spec, the A/B verdict; and the tables built from
a build report or a proxy sweep."""
import json

import pytest

from build_tools.measurements import table_rows
from sparse_mla_aot.catalog import parse_table
from sparse_mla_aot.contract import Variant
from sparse_mla_aot.dispatch import force_spec
from tests.fakes import fake_record
from tuning.ab import parse_side, verdict


def _best(choices):
    """batch -> (variant, splits[, programmatic combine]) as best_per_batch returns them (CSV strings)."""
    return {b: {"variant": c[0], "num_splits": str(c[1]),
                "programmatic_combine": str(int(c[2] if len(c) > 2 else 0)), "median_us": "1"}
            for b, c in choices.items()}


def test_table_rows_merge_equal_neighbours_and_leave_the_last_row_open():
    rows = table_rows(_best({1: ("a", 64), 2: ("a", 64), 4: ("a", 32), 8: ("b", 8), 16: ("b", 8)}))
    assert rows == [{"max_batch_rows": 2, "variant": "a", "num_splits": 64, "programmatic_combine": False},
                    {"max_batch_rows": 4, "variant": "a", "num_splits": 32, "programmatic_combine": False},
                    {"max_batch_rows": None, "variant": "b", "num_splits": 8, "programmatic_combine": False}]
    table = {"target": "sm90", "kv_format": "v32", "h_q": 16, "provenance": {"kind": "tuned"}, "rows": rows}
    assert parse_table(table, "tuned").row_for(3) == 1


def test_single_choice_is_one_open_row():
    assert table_rows(_best({1: ("a", 1), 128: ("a", 1)})) == [{"max_batch_rows": None, "variant": "a",
                                                               "num_splits": 1, "programmatic_combine": False}]


def test_a_programmatic_combine_launch_is_part_of_a_row_s_choice():
    rows = table_rows(_best({1: ("a", 8, True), 2: ("a", 8, False), 4: ("a", 8, False)}))
    assert [(r["max_batch_rows"], r["programmatic_combine"]) for r in rows] == [(1, True), (None, False)]


def test_force_spec_round_trips_through_the_runtime_parser():
    spec = force_spec(Variant("model1", "fused", 16, 32, 8, 3), 4)
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


def _fake_build(tmp_path, monkeypatch, target, block_ts, warps, kept, stages=2):
    """A build report of shipped variants (block_h 16, 32, 64; `stages` tiles in flight) for target, and one
    committed table of kind kept[2] for (kv_format, h_q) = kept[:2]; returns that table's path."""
    from build_tools import paths, tables

    monkeypatch.setattr(paths, "VARIANTS_DIR", tmp_path / "variants")
    monkeypatch.setenv(paths.BUILD_DIR_ENV, str(tmp_path / "build"))
    records = [fake_record(Variant(f, "fused", bh, bt, w, stages).name, target=target).to_json()
               for f in ("v32", "model1") for bh in (16, 32, 64) for bt in block_ts for w in warps]
    (tmp_path / "build" / target).mkdir(parents=True)
    (tmp_path / "build" / target / "report.json").write_text(json.dumps({"artifacts": records}))
    table = tables.table_path(target, kept[0], kept[1])
    table.parent.mkdir(parents=True)
    table.write_text(json.dumps({"provenance": {"kind": kept[2]}, "rows": []}))
    return table


def test_heuristic_tables_never_replace_a_tuned_table(tmp_path, monkeypatch):
    from build_tools import tables

    tuned = _fake_build(tmp_path, monkeypatch, "sm90", block_ts=(64,), warps=(4, 8), kept=("model1", 64, "tuned"),
                        stages=1)
    tables.write_heuristic_tables("sm90")
    assert json.loads(tuned.read_text()) == {"provenance": {"kind": "tuned"}, "rows": []}
    heuristic = json.loads(tables.table_path("sm90", "model1", 128).read_text())
    assert heuristic["provenance"]["kind"] == "heuristic"
    rows = [(r["max_batch_rows"], r["variant"], r["num_splits"]) for r in heuristic["rows"]]
    # 132 SMs: block_h 16 (8 head blocks) while bound * 8 < 132, then the family's largest, block_h 32 (4 blocks)
    assert rows[:5] == [(1, "model1_fused_bh16_bt64_w4_s1", 32), (2, "model1_fused_bh16_bt64_w4_s1", 16),
                        (4, "model1_fused_bh16_bt64_w4_s1", 8), (8, "model1_fused_bh16_bt64_w4_s1", 4),
                        (16, "model1_fused_bh16_bt64_w4_s1", 2)]
    assert rows[5:] == [(32, "model1_fused_bh32_bt64_w4_s1", 2), (64, "model1_fused_bh32_bt64_w4_s1", 1),
                        (128, "model1_fused_bh32_bt64_w4_s1", 1), (None, "model1_fused_bh32_bt64_w4_s1", 1)]


def test_screening_keeps_every_point_within_the_margin():
    from tuning.tune import contenders

    screened = {("a", 1): 100.0, ("a", 2): 129.0, ("b", 1): 131.0, ("b", 8): 400.0}
    assert contenders(screened, margin=1.3) == [("a", 1), ("a", 2)]
    assert contenders({("a", 1): 5.0}) == [("a", 1)]


def test_split_counts_beyond_the_tile_count_are_measured_as_the_tile_count():
    """640 tokens are 10 tiles of 64 and 40 of 16: 16 and 64 splits run as 10 at block_t 64 (measured once, and
    not skipped: 10 splits is neither 8 nor a launch the runtime refuses), 64 as 40 at block_t 16."""
    from tuning.gpu_timing import Shape
    from tuning.tune import points

    names = [Variant("model1", "fused", 16, bt, 4, 2).name for bt in (64, 16)]
    records = {name: fake_record(name) for name in names}
    got = points(Shape("model1", 16, 512, 128), records, (1, 8, 16, 64))
    assert got == [(names[0], 1), (names[0], 8), (names[0], 10), (names[1], 1), (names[1], 8), (names[1], 16),
                   (names[1], 40)]


def test_rows_from_before_screening_read_as_full_and_only_full_rows_enter_the_table(tmp_path):
    from build_tools.measurements import best_per_batch, read_rows, write_rows

    old = tmp_path / "old.csv"
    old.write_text("batch_rows,variant,num_splits,median_us,p10_us,p90_us,n,calls_per_replay\n"
                   "1,a,4,10.0,9.0,11.0,50,32\n")
    rows = read_rows(old)
    assert list(rows) == [(1, "a", 4, 0, "full")]  # and an ordinary combine launch
    screen = {"batch_rows": "1", "variant": "b", "num_splits": "2", "programmatic_combine": "0", "stage": "screen",
              "median_us": "5.0", "p10_us": "5", "p90_us": "5", "n": "5", "calls_per_replay": "32"}
    write_rows(old, [*rows.values(), screen])
    again = read_rows(old)
    assert set(again) == {(1, "a", 4, 0, "full"), (1, "b", 2, 0, "screen")}
    assert best_per_batch(list(again.values()), [1])[1]["variant"] == "a"  # the faster screen row is not a result


def _record(name, stack, status="shipped"):
    return fake_record(name, status, stack_bytes=stack, reason="over the limit" if status == "pruned" else None)


def _measured(batch, variant, splits, median, stage="full"):
    return {"batch_rows": str(batch), "variant": variant, "num_splits": str(splits), "programmatic_combine": "0",
            "stage": stage, "median_us": str(median)}


def test_proxy_derived_table_prefers_a_near_tie_that_spills_less_and_scales_splits():
    from build_tools.tables import proxy_derived_table

    records = {"fast_spills": _record("fast_spills", 1328), "near_clean": _record("near_clean", 0),
               "slow_clean": _record("slow_clean", 0), "pruned": _record("pruned", 0, status="pruned")}
    rows = [_measured(1, "fast_spills", 32, 100.0), _measured(1, "near_clean", 32, 108.0),
            _measured(1, "slow_clean", 32, 111.0), _measured(1, "pruned", 32, 90.0),
            _measured(1, "slow_clean", 8, 50.0, stage="screen"),  # screening rows never enter a table
            _measured(8, "fast_spills", 4, 100.0), _measured(8, "near_clean", 4, 120.0)]
    table = proxy_derived_table("sm120", records, rows, "v32", 128, {"csv": "x.csv"})
    assert table["provenance"]["kind"] == "proxy-derived"
    assert table["rows"] == [{"max_batch_rows": 1, "variant": "near_clean", "num_splits": 32,
                              "programmatic_combine": False},
                             {"max_batch_rows": None, "variant": "fast_spills", "num_splits": 4,
                              "programmatic_combine": False}]
    sm121 = proxy_derived_table("sm121", records, rows, "v32", 128, {"csv": "x.csv"})  # 48 SMs: 32 -> 16
    assert sm121["rows"][0]["num_splits"] == 16
    with pytest.raises(ValueError, match="proxy-derived tables are for"):
        proxy_derived_table("sm90", records, rows, "v32", 128, {})


def test_mma_sync_targets_take_their_family_and_keep_proxy_derived_tables(tmp_path, monkeypatch):
    from build_tools import tables

    derived = _fake_build(tmp_path, monkeypatch, "sm120", block_ts=(16, 32, 64), warps=(4, 8),
                          kept=("v32", 128, "proxy-derived"), stages=1)
    tables.write_heuristic_tables("sm120")
    assert json.loads(derived.read_text())["rows"] == []
    model1 = json.loads(tables.table_path("sm120", "model1", 128).read_text())
    assert {r["variant"] for r in model1["rows"]} == {"model1_fused_bh16_bt64_w4_s1", "model1_fused_bh32_bt64_w4_s1"}
    v32 = json.loads(tables.table_path("sm120", "v32", 64).read_text())
    assert {r["variant"] for r in v32["rows"]} == {"v32_fused_bh16_bt32_w4_s1", "v32_fused_bh32_bt32_w4_s1"}


def test_measure_screens_all_points_cuts_slow_ones_measures_contenders_in_full_and_resumes(tmp_path, monkeypatch):
    """The tune loop with the GPU parts replaced: graph = the forced spec, replay time = a fixed figure per spec."""
    import io
    import os

    from build_tools.measurements import read_rows
    from sparse_mla_aot import paths
    from sparse_mla_aot.dispatch import forced_spec
    from tuning import gpu_timing, tune
    from tuning.gpu_timing import Shape

    monkeypatch.delenv(paths.FORCE_ENV, raising=False)
    bt16, bt64 = (Variant("model1", "fused", 16, bt, 4, 2).name for bt in (16, 64))
    records = {name: fake_record(name) for name in (bt16, bt64)}
    speed = {16: {1: 100.0, 2: 60.0, 4: 40.0}, 64: {1: 45.0, 2: 300.0, 4: 500.0}}  # [block_t][splits] -> us
    captures = []

    class FakeInputs:
        def __init__(self, shape):
            pass

        def sets_for(self, batch):
            return [{}, {}]

    def fake_capture(sets, warmups):
        assert paths.FORCE_ENV not in os.environ  # tune pins each point with dispatch.forcing, not the environment
        captures.append(forced_spec())
        return forced_spec()

    def fake_replays(graph, calls, count):  # a programmatic combine launch saves 2 us
        fields = dict(item.split("=") for item in graph.split(","))
        return [speed[int(fields["block_t"])][int(fields["num_splits"])]
                - 2.0 * int(fields.get("programmatic_combine", 0))] * count

    monkeypatch.setattr(tune, "InputSets", FakeInputs)
    monkeypatch.setattr(tune, "capture", fake_capture)
    monkeypatch.setattr(tune, "replay_times_us", fake_replays)
    monkeypatch.setattr(gpu_timing, "replay_times_us", fake_replays)  # the full measurements' turns
    shape, path = Shape("model1", 16, 512, 0), tmp_path / "t.csv"
    rows = tune.measure(shape, records, [1], (1, 2, 4), 50, path, {}, io.StringIO())
    full = sorted((r["variant"], r["num_splits"]) for r in rows if r["stage"] == "full")
    assert full == [(bt16, 4), (bt64, 1)]  # 40 and 45 us; 60 us is beyond 1.3 x 40
    screens = {(r["variant"], r["num_splits"]): r["n"] for r in rows if r["stage"] == "screen"}
    assert len(screens) == 6
    # 300 and 500 us are beyond PROBE_CUT x the best so far (40 us): one replay each, the rest 5
    assert screens == {(bt16, 1): 5, (bt16, 2): 5, (bt16, 4): 5, (bt64, 1): 5, (bt64, 2): 1, (bt64, 4): 1}
    assert len(captures) == 8
    again = tune.measure(shape, records, [1], (1, 2, 4), 50, path, read_rows(path), io.StringIO())
    assert len(captures) == 8 and len(again) == 8  # resumed: nothing measured twice
    assert tune.best_per_batch(again, [1])[1]["variant"] == bt16
    # where the combine kernel can wait for the split grid, each contender that splits (4 splits) is also timed as
    # a programmatic launch, and that measurement wins the batch
    more = tune.measure(shape, records, [1], (1, 2, 4), 50, path, read_rows(path), io.StringIO(),
                        programmatic_combine=True)
    assert len(captures) == 9 and captures[-1].endswith(",num_splits=4,programmatic_combine=1")
    best = tune.best_per_batch(more, [1])[1]
    assert (best["variant"], best["num_splits"], best["programmatic_combine"], best["median_us"]) == (bt16, 4, 1, 38.0)


@pytest.mark.parametrize("label", ["model1/h16/topk512+128", "model1/h64/topk512+128", "v32/h16/topk2048",
                                   "v32/h128/topk2048"])
def test_every_timed_replay_reads_twice_the_l2_from_dram(label):
    """The rotating input sets are sized so that one replay is expected to read ROTATION_BYTES = 2 x L2 of distinct
    cache bytes at every batch size (the small batches most: model1 at one row needs hundreds of sets), and no
    more sets than that takes: a replay measures DRAM gathers, not L2 hits."""
    from tuning.gpu_timing import L2_BYTES, ROTATION_BYTES, Shape, distinct_bytes, set_count
    from tuning.tune import BATCHES

    shape = Shape.parse(label)
    assert ROTATION_BYTES == 2 * L2_BYTES
    for batch in BATCHES:
        sets = set_count(shape, batch)
        assert distinct_bytes(shape, batch, sets) >= ROTATION_BYTES, (batch, sets)
        assert sets == 2 or distinct_bytes(shape, batch, sets - 1) < ROTATION_BYTES, (batch, sets)
    assert set_count(shape, 1) > 32  # what the old cap of 32 sets left in L2


def test_distinct_bytes_counts_each_set_of_the_extra_cache_too():
    from tuning.gpu_timing import BYTES_PER_TOKEN, CACHE_TOKENS, Shape, distinct_bytes

    main_only, both = Shape("model1", 16, 512, 0), Shape("model1", 16, 512, 128)
    assert distinct_bytes(both, 4, 3) > distinct_bytes(main_only, 4, 3)
    # few draws over a large cache are nearly all distinct; many saturate at the two caches' size
    assert distinct_bytes(main_only, 1, 1) == pytest.approx(512 * BYTES_PER_TOKEN["model1"], rel=1e-3)
    assert distinct_bytes(both, 10**6, 10) == pytest.approx(2 * CACHE_TOKENS * BYTES_PER_TOKEN["model1"])


def test_full_measurements_take_turns_so_drift_hits_every_launch_alike(monkeypatch):
    """replay_in_turns (tune's full measurements, ab's sides): per_round replays of each graph in turn, rounds times;
    each graph's times are its own."""
    from tuning import gpu_timing

    order = []

    def fake_replays(graph, calls_per_replay, replays):
        order.append((graph, replays))
        return [float(len(order))] * replays

    monkeypatch.setattr(gpu_timing, "replay_times_us", fake_replays)
    times = gpu_timing.replay_in_turns(["a", "b", "c"], 2, rounds=3, per_round=5)
    assert order == [("a", 5), ("b", 5), ("c", 5)] * 3
    assert times == [[1.0] * 5 + [4.0] * 5 + [7.0] * 5, [2.0] * 5 + [5.0] * 5 + [8.0] * 5,
                     [3.0] * 5 + [6.0] * 5 + [9.0] * 5]
