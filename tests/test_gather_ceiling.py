"""bench/gather_ceiling.py's gather kernel, run by the interpreter: each program's fold is the wrapped sum of the
records it gathers, for both record sizes and the step shapes the sweep uses (its GPU run checks the same before
timing)."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import gather_ceiling  # noqa: E402


@pytest.mark.parametrize("record_bytes", [656, 584])
@pytest.mark.parametrize("programs,step", [(4, 16), (2, 64)])
def test_each_program_folds_exactly_the_records_it_gathers(record_bytes, programs, step):
    generator = torch.Generator().manual_seed(record_bytes + step)
    cache = torch.randint(-2**31, 2**31 - 1, (500, record_bytes // 4), dtype=torch.int32, generator=generator)
    indices = torch.randint(0, 500, (256,), dtype=torch.int32, generator=generator)
    folds = torch.empty(programs, dtype=torch.int32)
    gather_ceiling.launch_fold(cache, indices, folds, programs, step, num_warps=4)
    expected = gather_ceiling.expected_folds(cache, indices, programs)
    assert torch.equal(folds, expected)
    indices[0] = (indices[0] + 1) % 500  # another record in program 0's first step changes its fold alone
    gather_ceiling.launch_fold(cache, indices, folds, programs, step, num_warps=4)
    assert folds[0] != expected[0] and torch.equal(folds[1:], expected[1:])


def test_word_split_covers_the_record_with_three_powers_of_two():
    assert gather_ceiling.word_split(164) == (128, 32, 4) and gather_ceiling.word_split(146) == (128, 16, 2)
    with pytest.raises(ValueError, match="165 words is not a sum of three powers of two"):
        gather_ceiling.word_split(165)


def test_program_counts_that_do_not_divide_the_records_are_refused_before_any_gpu_work(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["gather_ceiling.py", "--programs", "128,264,512,2112"])
    with pytest.raises(SystemExit) as exit_info:
        gather_ceiling.main()
    assert exit_info.value.code == 2
    assert "--programs must divide the 128 x 2048 = 262144 records evenly; 264,2112 do not" in capsys.readouterr().err


def test_steps_that_do_not_divide_a_programs_records_are_refused_before_any_gpu_work(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["gather_ceiling.py", "--topk", "640", "--programs", "128,2048",
                                      "--steps", "8,64"])
    with pytest.raises(SystemExit) as exit_info:
        gather_ceiling.main()
    assert exit_info.value.code == 2
    assert ("--steps must divide every program's records; 64 (programs 2048: 40 records each) do not"
            in capsys.readouterr().err)
