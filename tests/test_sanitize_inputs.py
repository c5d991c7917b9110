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
    inputs, num_splits = shape_inputs(shape, kv_format, device="cpu")
    page_size = SHAPES[shape]["page_size"]
    caches = [("k_cache", "indices")] + ([("extra_k_cache", "extra_indices")] if kv_format == "model1" else [])
    for cache, indices in caches:
        filled = inputs[cache].shape[0] * page_size - page_size // 2
        ids = inputs[indices]
        assert int(ids.max()) == filled - 1
        assert bool((ids < 0).any()) and bool(((ids == -1) | ((ids >= 0) & (ids < filled))).all())
    assert num_splits == SHAPES[shape]["num_splits"]
    assert (inputs["extra_indices"] is None) == (kv_format == "v32")


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
