"""The inputs bench/sanitize.py runs every variant on (GPU-free): a partial last page, an index at its last filled
token, -1 indices, and nothing past the filled part; and how the parent runs a sanitizer process."""
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import sanitize  # noqa: E402
from sanitize import SHAPES, shape_inputs  # noqa: E402


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_indices_stay_in_the_filled_part_and_reach_its_last_token(shape, kv_format):
    b = sanitize.last_wave_batch(132, 16) if shape == sanitize.LAST_WAVE else None
    inputs, num_splits = shape_inputs(shape, kv_format, b=b, device="cpu")
    page_size = SHAPES[shape]["page_size"]
    caches = [("k_cache", "indices")] + ([("extra_k_cache", "extra_indices")] if kv_format == "model1" else [])
    for cache, indices in caches:
        filled = inputs[cache].shape[0] * page_size - page_size // 2
        ids = inputs[indices]
        assert int(ids.max()) == filled - 1
        assert bool((ids < 0).any()) and bool(((ids == -1) | ((ids >= 0) & (ids < filled))).all())
    assert num_splits == SHAPES[shape]["num_splits"]
    assert (inputs["extra_indices"] is None) == (kv_format == "v32")


@pytest.mark.parametrize("wave, block_h, b", [(132, 64, 198), (132, 16, 50), (264, 32, 198), (7, 16, 3)])
def test_the_last_wave_shape_runs_a_wave_and_a_half_of_programs(wave, block_h, b):
    """Its b, with h_q 64 in head blocks of block_h, gives about 1.5 waves of one-split programs: more than one
    wave, so make_plan leaves the first wave's rows unsplit and splits the rest."""
    assert sanitize.last_wave_batch(wave, block_h) == b
    assert wave < b * (64 // block_h) <= 3 * wave // 2 + 64 // block_h


def test_a_sanitizer_process_has_no_time_limit_without_a_deadline_and_is_not_started_past_one(monkeypatch):
    """The default (no --deadline-s) once passed a timeout of 1e9 s, which subprocess refuses (OverflowError)."""
    timeouts = []

    def run(command, timeout, **kwargs):
        timeouts.append(timeout)
        return subprocess.CompletedProcess(command, 0, "launched v shape A: ok\n========= ERROR SUMMARY: 0 errors\n", "")

    monkeypatch.setattr(subprocess, "run", run)
    ran = sanitize.sanitize("memcheck", ["v"], None)
    assert timeouts == [None] and ran["returncode"] == 0 and ran["errors"] == 0 and ran["launched_ok"] == 1
    passed = sanitize.sanitize("memcheck", ["v"], time.monotonic() - 1)
    assert timeouts == [None] and passed["returncode"] is None and passed["summary"] is None


HAZARD_RECORDS = """launched v shape A: ok
========= Error: Potential WAR hazard detected at __shared__ 0x1000 in block (0,0,0) :
=========     Read Thread (40,0,0) at sparse_mla_split_v+0x40f0
=========     Write Thread (161,0,0) at sparse_mla_split_v+0x9a40
=========     Current Value : 0, Incoming Value : 3
=========
========= Error: Potential WAR hazard detected at __shared__ 0x1008 in block (1,0,0) :
=========     Read Thread (63,0,0) at sparse_mla_split_v+0x40f0
=========     Write Thread (191,0,0) at sparse_mla_split_v+0x9a40
=========
========= Error: Potential RAW hazard detected at __shared__ 0xc720 in block (0,0,0) :
=========     Write Thread (63,0,0) at sparse_mla_split_v+0x8ed0
=========     Read Thread (128,0,0) at sparse_mla_split_v+0x8f90
========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)
"""


def test_racecheck_hazard_records_are_counted_per_pair_of_instructions(monkeypatch):
    """A hazard report's records (hundreds of thousands for the ws family) become counts per (kind, first access,
    second access), each access named by its warp and instruction offset; analysis reports are not parsed."""
    commands = []

    def run(command, timeout, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1, HAZARD_RECORDS, "")

    monkeypatch.setattr(subprocess, "run", run)
    ran = sanitize.sanitize("racecheck", ["v"], None, racecheck_report="hazard")
    assert ran["errors"] == 3 and ran["hazard_pairs"] == {
        ("WAR __shared__", "Read warp 1 +0x40f0", "Write warp 5 +0x9a40"): 2,
        ("RAW __shared__", "Write warp 1 +0x8ed0", "Read warp 4 +0x8f90"): 1}
    assert commands[0][commands[0].index("--print-limit") + 1] == str(sanitize.HAZARD_PRINT_LIMIT)
    assert "--show-backtrace" in commands[0]
    analysis = sanitize.sanitize("racecheck", ["v"], None)
    assert analysis["hazard_pairs"] == {} and commands[1][commands[1].index("--print-limit") + 1] == "20"
