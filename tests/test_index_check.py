"""The debug index check (docs/design.md#the-operation: env SPARSE_MLA_AOT_CHECK=1 verifies on the host that
indices address tokens inside their cache, and raises). ops.check_indices is exercised directly on CPU DecodeCalls,
and through sparse_mla_decode for its place in the call order: argument checks, then the device check, then (only
with SPARSE_MLA_AOT_CHECK=1) the index check, then kernel loading."""
from __future__ import annotations

import re

import pytest
import torch

from sparse_mla_aot import ops, paths
from sparse_mla_aot.reference import make_inputs
from sparse_mla_aot.validation import check_arguments

CHECK = paths.CHECK_ENV
B, S_Q, H_Q, TOPK, EXTRA_TOPK = 2, 3, 16, 128, 64
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def inputs(kv_format: str = "v32", *, extra: bool = True, seed: int = 0) -> dict:
    """Main set: page_size 64 and room for 2*topk tokens (256); extra set: page_size 16, 128 tokens. -1 entries
    (invalid_frac 0.1) are part of every index tensor."""
    return make_inputs(B, S_Q, H_Q, TOPK, kv_format, page_size=64, extra_topk=EXTRA_TOPK if extra else 0,
                       extra_page_size=16, seed=seed)


def tokens(cache: torch.Tensor) -> int:
    return cache.shape[0] * cache.shape[1]


def message(name: str, position, value: int, bound: int) -> str:
    return (rf"^{name}{re.escape(str(list(position)))} = {value} is outside the cache "
            rf"\[-1, {bound}\) \(num_blocks\*page_size = {bound}\)$")


def cache_of(name: str) -> str:
    return "k_cache" if name == "indices" else "extra_k_cache"


# ---------------------------------------------------------------------------------------------- passing


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
@pytest.mark.parametrize("extra", [False, True])
def test_valid_indices_pass(kv_format, extra):
    args = inputs(kv_format, extra=extra)
    call = check_arguments(**args)
    assert bool((call.indices == -1).any()), "the inputs must exercise -1 (no token)"
    assert tokens(call.k_cache) == 256
    if extra:
        assert bool((call.extra_indices == -1).any()) and tokens(call.extra_k_cache) == 128
    assert ops.check_indices(call) is None


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_bounds_inclusive(kv_format):
    """-1 and num_blocks*page_size - 1 are the extremes a valid index may take, in either set."""
    args = inputs(kv_format)
    args["indices"][0, 0, :2] = torch.tensor([-1, tokens(args["k_cache"]) - 1], dtype=torch.int32)
    args["extra_indices"][-1, -1, -2:] = torch.tensor([tokens(args["extra_k_cache"]) - 1, -1], dtype=torch.int32)
    ops.check_indices(check_arguments(**args))


# ---------------------------------------------------------------------------------------------- failing


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
@pytest.mark.parametrize("name", ["indices", "extra_indices"])
@pytest.mark.parametrize("value", ["num_tokens", -2, INT32_MIN, INT32_MAX])
@pytest.mark.parametrize("position", [(0, 0, 0), (1, 2, 63), (1, 1, 5)])
def test_out_of_range_index_is_named(kv_format, name, value, position):
    args = inputs(kv_format)
    bound = tokens(args[cache_of(name)])
    value = bound if value == "num_tokens" else value
    args[name][position] = value
    call = check_arguments(**args)
    with pytest.raises(ValueError, match=message(name, position, value, bound)):
        ops.check_indices(call)


@pytest.mark.parametrize("name", ["indices", "extra_indices"])
def test_first_bad_position_in_row_major_order(name):
    """Two bad entries: the one first in [b, s_q, k] order is reported, whichever value it holds."""
    args = inputs()
    bound = tokens(args[cache_of(name)])
    args[name][1, 2, 0] = -5          # later in row-major order
    args[name][1, 0, 40] = bound + 7  # earlier
    with pytest.raises(ValueError, match=message(name, (1, 0, 40), bound + 7, bound)):
        ops.check_indices(check_arguments(**args))


def test_each_set_is_checked_against_its_own_cache():
    """200 addresses a token of the main cache (256 tokens) but not of the extra one (128 tokens)."""
    args = inputs()
    assert tokens(args["extra_k_cache"]) < 200 < tokens(args["k_cache"])
    args["indices"][0, 1, 3] = 200
    ops.check_indices(check_arguments(**args))
    args["extra_indices"][0, 1, 3] = 200
    with pytest.raises(ValueError, match=message("extra_indices", (0, 1, 3), 200, 128)):
        ops.check_indices(check_arguments(**args))


def test_indices_are_checked_before_extra_indices():
    args = inputs()
    args["extra_indices"][0, 0, 0] = -2
    args["indices"][1, 2, 127] = -2
    with pytest.raises(ValueError, match=message("indices", (1, 2, 127), -2, 256)):
        ops.check_indices(check_arguments(**args))


# ---------------------------------------------------------------------------------------------- call order


def bad_index_inputs(kv_format: str = "v32") -> dict:
    args = inputs(kv_format)
    args["indices"][0, 0, 0] = tokens(args["k_cache"])
    return args


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_cpu_call_fails_the_device_check_before_the_index_check(monkeypatch, kv_format):
    """On CPU tensors the device check comes first: SPARSE_MLA_AOT_CHECK=1 does not turn it into an index error."""
    monkeypatch.setenv(CHECK, "1")
    with pytest.raises(ValueError, match=r"^q must be a CUDA tensor; got device cpu$"):
        ops.sparse_mla_decode(**bad_index_inputs(kv_format))


def test_argument_errors_come_before_both(monkeypatch):
    monkeypatch.setenv(CHECK, "1")
    with pytest.raises(ValueError, match=r"^softmax_scale must be finite and > 0; got 0$"):
        ops.sparse_mla_decode(**{**bad_index_inputs(), "softmax_scale": 0})


class KernelsReached(Exception):
    """Raised by the stand-in for kernel loading: the call got past every check."""


@pytest.fixture
def past_device_check(monkeypatch):
    """No GPU here: a device check that reports cuda:0 and kernel loading that raises KernelsReached, so the
    order of what runs after the device check is observable."""
    seen = []

    def check_devices(call):
        seen.append("device")
        return torch.device("cuda", 0)

    def kernels_for(index):
        seen.append("kernels")
        raise KernelsReached(index)

    monkeypatch.setattr(ops, "check_devices", check_devices)
    monkeypatch.setattr(ops, "_kernels_for", kernels_for)
    return seen


def test_index_check_runs_after_the_device_check_and_before_kernels(monkeypatch, past_device_check):
    monkeypatch.setenv(CHECK, "1")
    with pytest.raises(ValueError, match=message("indices", (0, 0, 0), 256, 256)):
        ops.sparse_mla_decode(**bad_index_inputs())
    assert past_device_check == ["device"]


def test_valid_indices_reach_the_kernels_with_the_check_on(monkeypatch, past_device_check):
    monkeypatch.setenv(CHECK, "1")
    with pytest.raises(KernelsReached):
        ops.sparse_mla_decode(**inputs())
    assert past_device_check == ["device", "kernels"]


@pytest.mark.parametrize("setting", [None, "0"])
def test_index_check_is_off_by_default(monkeypatch, past_device_check, setting):
    """Without SPARSE_MLA_AOT_CHECK=1 the host never reads the indices (no synchronization): bad ones go on."""
    if setting is None:
        monkeypatch.delenv(CHECK, raising=False)
    else:
        monkeypatch.setenv(CHECK, setting)
    with pytest.raises(KernelsReached):
        ops.sparse_mla_decode(**bad_index_inputs())
    assert past_device_check == ["device", "kernels"]
