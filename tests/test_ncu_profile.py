"""bench/ncu_profile.py's parsing of Nsight Compute's raw page and its exit status (GPU-free: ncu is replaced)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import ncu_profile  # noqa: E402
from ncu_profile import PIPE_PREFIX, PIPE_SUFFIX, STALL_PREFIX, STALL_SUFFIX, raw_group  # noqa: E402


def test_raw_group_keeps_one_family_of_metrics_largest_first():
    names = [f"{STALL_PREFIX}wait{STALL_SUFFIX}", f"{PIPE_PREFIX}xu{PIPE_SUFFIX}",
             f"{STALL_PREFIX}barrier{STALL_SUFFIX}",
             f"{PIPE_PREFIX}alu{PIPE_SUFFIX}", f"{PIPE_PREFIX}tensor{PIPE_SUFFIX}", "gpu__time_duration.sum"]
    raw = [names, ["ratio", "%", "ratio", "%", "%", "us"], ["0.91", "11.7", "1,234.5", "32.2", "n/a", "30.9"]]
    assert raw_group(raw, STALL_PREFIX, STALL_SUFFIX) == [("barrier", 1234.5), ("wait", 0.91)]
    assert raw_group(raw, PIPE_PREFIX, PIPE_SUFFIX) == [("alu", 32.2), ("xu", 11.7)]  # "n/a" is left out
    assert raw_group(raw, PIPE_PREFIX, PIPE_SUFFIX, count=1) == [("alu", 32.2)]


def test_a_point_ncu_could_not_profile_fails_the_run(monkeypatch, tmp_path, capsys):
    def profile(point, out, top):
        if point.startswith("v32"):
            return {"point": point, "error": ["==ERROR== option '--metrics' cannot be specified more than once."]}
        return {"point": point, "choice": "ws_bh16_bt64_w8_s2x1", "stalls": [("wait", 0.9)], "pipes": [("alu", 32.0)],
                "opcodes": [(10.0, "BRA")], "hot": [(8.8, "@!P1 BRA 0x10")]}

    monkeypatch.setattr(ncu_profile, "profile", profile)
    argv = ["ncu_profile.py", "--out", str(tmp_path), "--point", "model1/h16/topk512+128:128",
            "--point", "v32/h16/topk2048:128"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="ncu did not profile v32/h16/topk2048:128"):
        ncu_profile.main()
    assert "pipe issue, % of peak: alu 32.0" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", argv[:-2])
    ncu_profile.main()  # every point profiled: no exit


def test_the_documented_point_forces_its_variant_and_split_count():
    """The usage line's --point (shape:batch:<family>_bh.._bt.._w.._s..x<splits>) parses and forces that variant, so
    a profile of a variant the tables do not choose runs as written."""
    shape, batch, choice = ncu_profile.parse_point("model1/h16/topk512:128:fused_bh16_bt64_w4_s1x2")
    assert (shape, batch) == ("model1/h16/topk512", 128)
    assert ncu_profile.force_for("model1", choice) == ("family=fused,block_h=16,block_t=64,num_warps=4,num_stages=1,"
                                                       "num_splits=2")
    assert "fused_bh16_bt64_w4_s1x2" in ncu_profile.__doc__
