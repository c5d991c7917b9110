"""The sparse MLA decode reference (docs/design.md#the-operation) and the pass rule (docs/design.md#numerics)."""

from __future__ import annotations

import math

import pytest
import torch

from sparse_mla_aot.kv_cache import dequantize_model1, dequantize_v32
from sparse_mla_aot.reference import assert_close, check_close, make_inputs, reference_sparse_mla_decode


def _all_tokens(cache: torch.Tensor, kv_format: str) -> torch.Tensor:
    if kv_format == "v32":
        return dequantize_v32(cache).reshape(-1, 576).double()
    return dequantize_model1(cache).reshape(-1, 512).double()


def _naive(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-by-row, head-by-head softmax over the explicitly listed valid tokens, in float64."""
    q = inputs["q"].double()
    b, s_q, h_q, _ = q.shape
    fmt = inputs["kv_format"]
    sets = [(inputs["k_cache"], inputs["indices"], inputs["topk_length"])]
    if inputs["extra_indices"] is not None:
        sets.append((inputs["extra_k_cache"], inputs["extra_indices"], inputs["extra_topk_length"]))
    sets = [(_all_tokens(cache, fmt), idx, lengths) for cache, idx, lengths in sets]
    out = torch.zeros(b, s_q, h_q, 512, dtype=torch.float64)
    lse = torch.full((b, s_q, h_q), math.inf, dtype=torch.float64)
    for i in range(b):
        for s in range(s_q):
            rows = []
            for tokens, idx, lengths in sets:
                count = idx.shape[-1] if lengths is None else int(lengths[i])
                rows += [tokens[int(t)] for t in idx[i, s, :count] if int(t) != -1]
            if not rows:
                continue
            k = torch.stack(rows)
            for h in range(h_q):
                logits = inputs["softmax_scale"] * (k @ q[i, s, h])
                row_lse = torch.logsumexp(logits, dim=0)
                o = torch.softmax(logits, dim=0) @ k[:, :512]
                if inputs["attn_sink"] is not None:
                    sink = float(inputs["attn_sink"][h])
                    o = o * math.exp(row_lse) / (math.exp(row_lse) + math.exp(sink))
                out[i, s, h], lse[i, s, h] = o, row_lse
    return out.float(), lse.float()


def _assert_matches_naive(inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    out, lse = reference_sparse_mla_decode(**inputs)
    ref_out, ref_lse = _naive(inputs)
    assert out.dtype == torch.float32 and lse.dtype == torch.float32
    assert not bool(out.isnan().any()) and not bool(lse.isnan().any())
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-6, atol=1e-6)
    return out, lse


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"s_q": 2, "with_topk_length": True},
        {"with_sink": True, "invalid_frac": 0.5},
        {"extra_topk": 64, "extra_page_size": 61, "with_topk_length": True, "with_sink": True},
    ],
    ids=["plain", "sq2_lengths", "sink_half_invalid", "extra_set"],
)
def test_matches_naive_loop(kv_format: str, options: dict) -> None:
    options = {"s_q": 1, **options}
    inputs = make_inputs(2, options.pop("s_q"), 8, 64, kv_format, page_size=61, seed=3, **options)
    _assert_matches_naive(inputs)


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_invalid_indices_are_ignored(kv_format: str) -> None:
    inputs = make_inputs(1, 1, 8, 64, kv_format, invalid_frac=0.0, seed=1)
    out, lse = reference_sparse_mla_decode(**inputs)
    dropped = inputs["indices"].clone()
    dropped[..., 32:] = -1
    kept = inputs["indices"][..., :32]
    out_dropped, lse_dropped = reference_sparse_mla_decode(**{**inputs, "indices": dropped})
    out_kept, lse_kept = reference_sparse_mla_decode(**{**inputs, "indices": kept})
    assert torch.allclose(out_dropped, out_kept, rtol=1e-6, atol=1e-7)
    assert torch.allclose(lse_dropped, lse_kept, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(out_dropped, out, rtol=1e-3, atol=1e-4)


def test_topk_length_masks_the_tail() -> None:
    inputs = make_inputs(2, 2, 8, 64, "model1", invalid_frac=0.0, seed=2)
    lengths = torch.tensor([10, 64], dtype=torch.int32)
    # Beyond the length the index values are garbage (even out of the cache); they must not count.
    garbage = inputs["indices"].clone()
    garbage[0, :, 10:] = 10**9
    out, lse = reference_sparse_mla_decode(**{**inputs, "indices": garbage, "topk_length": lengths})
    short = {**inputs, "q": inputs["q"][:1], "indices": inputs["indices"][:1, :, :10]}
    out_short, lse_short = reference_sparse_mla_decode(**short)
    assert torch.allclose(out[:1], out_short, rtol=1e-6, atol=1e-7)
    assert torch.allclose(lse[:1], lse_short, rtol=1e-6, atol=1e-7)
    out_full, lse_full = reference_sparse_mla_decode(**inputs)
    assert torch.equal(out[1], out_full[1]) and torch.equal(lse[1], lse_full[1])


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_row_without_tokens_gives_zero_and_inf(kv_format: str) -> None:
    inputs = make_inputs(3, 2, 8, 64, kv_format, extra_topk=64, with_sink=True, seed=4)
    inputs["indices"][0, 1] = -1  # row (0, 1): both sets empty
    inputs["extra_indices"][0, 1] = -1
    inputs["topk_length"] = torch.tensor([64, 0, 64], dtype=torch.int32)  # batch 1: main set empty
    inputs["extra_topk_length"] = torch.tensor([64, 0, 64], dtype=torch.int32)  # ... and extra set
    inputs["attn_sink"][0] = math.inf
    out, lse = _assert_matches_naive({**inputs, "attn_sink": None})
    for o, l in ((out, lse), reference_sparse_mla_decode(**inputs)):
        assert not bool(o.isnan().any()) and not bool(l.isnan().any())
        assert bool((o[0, 1] == 0).all()) and bool(torch.isposinf(l[0, 1]).all())
        assert bool((o[1] == 0).all()) and bool(torch.isposinf(l[1]).all())
        assert bool(torch.isfinite(l[0, 0]).all()) and bool(torch.isfinite(l[2]).all())


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_sink_scales_out_and_keeps_lse(kv_format: str) -> None:
    inputs = make_inputs(2, 1, 8, 64, kv_format, seed=5)
    out, lse = reference_sparse_mla_decode(**inputs)
    sink = torch.randn(8, generator=torch.Generator().manual_seed(5))
    sink[1] = math.inf
    sink[2] = -math.inf
    sink[3] = float(lse[0, 0, 3])  # equal weights: the sink takes half
    out_sink, lse_sink = reference_sparse_mla_decode(**{**inputs, "attn_sink": sink})
    assert torch.equal(lse_sink, lse)
    gate = torch.sigmoid(lse.double() - sink.double()).float()
    torch.testing.assert_close(out_sink, out * gate.unsqueeze(-1), rtol=1e-6, atol=1e-7)
    assert bool((out_sink[:, :, 1] == 0).all())
    assert torch.equal(out_sink[:, :, 2], out[:, :, 2])
    torch.testing.assert_close(out_sink[0, 0, 3], out[0, 0, 3] / 2, rtol=1e-6, atol=1e-7)
    assert not bool(out_sink.isnan().any())


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_extra_set_equals_concatenated_indices(kv_format: str) -> None:
    inputs = make_inputs(2, 2, 8, 64, kv_format, seed=6)
    extra = torch.randint(0, inputs["k_cache"].shape[0] * inputs["k_cache"].shape[1], (2, 2, 64),
                          dtype=torch.int32, generator=torch.Generator().manual_seed(6))
    extra[..., ::5] = -1
    out, lse = reference_sparse_mla_decode(**{**inputs, "extra_k_cache": inputs["k_cache"], "extra_indices": extra})
    joined = torch.cat([inputs["indices"], extra], dim=-1)
    out_cat, lse_cat = reference_sparse_mla_decode(**{**inputs, "indices": joined})
    torch.testing.assert_close(out, out_cat, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(lse, lse_cat, rtol=1e-6, atol=1e-7)


def test_s_q_rows_are_independent() -> None:
    inputs = make_inputs(2, 2, 8, 64, "v32", seed=7)
    out, lse = reference_sparse_mla_decode(**inputs)
    for s in range(2):
        single = {**inputs, "q": inputs["q"][:, s : s + 1], "indices": inputs["indices"][:, s : s + 1]}
        out_s, lse_s = reference_sparse_mla_decode(**single)
        torch.testing.assert_close(out[:, s : s + 1], out_s, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(lse[:, s : s + 1], lse_s, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(out[:, 0], out[:, 1])


def test_make_inputs_keys_and_shapes() -> None:
    inputs = make_inputs(2, 3, 16, 128, "model1", page_size=61, extra_topk=64, extra_page_size=64,
                         with_sink=True, with_topk_length=True)
    assert set(inputs) == {"q", "k_cache", "indices", "softmax_scale", "kv_format", "attn_sink", "topk_length",
                           "extra_k_cache", "extra_indices", "extra_topk_length"}
    assert inputs["q"].shape == (2, 3, 16, 512) and inputs["q"].dtype == torch.bfloat16
    assert inputs["indices"].shape == (2, 3, 128) and inputs["indices"].dtype == torch.int32
    assert inputs["extra_indices"].shape == (2, 3, 64) and inputs["extra_k_cache"].shape[1] == 64
    assert inputs["k_cache"].shape[1:] == (61, 1, 584)
    assert inputs["topk_length"].shape == (2,) and inputs["extra_topk_length"].shape == (2,)
    assert inputs["attn_sink"].shape == (16,) and inputs["attn_sink"].dtype == torch.float32
    assert inputs["softmax_scale"] == pytest.approx(1 / math.sqrt(512))
    assert bool((inputs["indices"] == -1).any())
    v32 = make_inputs(1, 1, 8, 64, "v32", seed=9)
    assert v32["q"].shape[-1] == 576 and v32["attn_sink"] is None and v32["extra_indices"] is None
    assert torch.equal(make_inputs(1, 1, 8, 64, "v32", seed=9)["indices"], v32["indices"])


def test_kv_format_inferred_and_checked() -> None:
    inputs = make_inputs(1, 1, 8, 64, "model1", seed=8)
    out, lse = reference_sparse_mla_decode(**{**inputs, "kv_format": None})
    assert torch.equal(out, reference_sparse_mla_decode(**inputs)[0])
    with pytest.raises(ValueError, match="d_qk"):
        reference_sparse_mla_decode(**{**inputs, "kv_format": "v32"})
    with pytest.raises(ValueError, match=r"indices must be an integer tensor \[b, s_q, topk\] with leading dims \[1, 1\]; got \[1, 64\]"):
        reference_sparse_mla_decode(**{**inputs, "indices": inputs["indices"][0]})
    with pytest.raises(ValueError, match="extra_k_cache and extra_indices"):
        reference_sparse_mla_decode(**{**inputs, "extra_indices": inputs["indices"]})
    out_of_cache = inputs["indices"].clone()
    out_of_cache[0, 0, 0] = inputs["k_cache"].shape[0] * inputs["k_cache"].shape[1]
    with pytest.raises(ValueError, match="must lie in"):
        reference_sparse_mla_decode(**{**inputs, "indices": out_of_cache})
    with pytest.raises(ValueError, match="softmax_scale"):
        reference_sparse_mla_decode(**{**inputs, "softmax_scale": None})


def _outputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = make_inputs(2, 1, 8, 64, "v32", seed=seed)
    inputs["indices"][1, 0] = -1  # an empty row: lse +inf there
    return reference_sparse_mla_decode(**inputs)


def test_check_close_accepts_reference_and_bf16_rounding() -> None:
    ref_out, ref_lse = _outputs()
    same = check_close(ref_out, ref_lse, ref_out, ref_lse)
    assert same["ok"] and same["failures"] == [] and same["rel_err"] == 0.0 and same["lse_max_err"] == 0.0
    rounded = assert_close(ref_out.bfloat16().float(), ref_lse, ref_out, ref_lse)
    assert 0 < rounded["rel_err"] < 5e-3 and 0 < rounded["cos_diff"] < 1e-5


def test_check_close_rejects_nan() -> None:
    ref_out, ref_lse = _outputs()
    out = ref_out.clone()
    out[0, 0, 0, 0] = math.nan
    result = check_close(out, ref_lse, ref_out, ref_lse)
    assert not result["ok"] and any("NaN" in f for f in result["failures"])
    lse = ref_lse.clone()
    lse[0, 0, 0] = math.nan
    assert not check_close(ref_out, lse, ref_out, ref_lse)["ok"]
    with pytest.raises(AssertionError, match="NaN"):
        assert_close(out, ref_lse, ref_out, ref_lse)


def test_check_close_rejects_wrong_inf_position() -> None:
    ref_out, ref_lse = _outputs()
    assert bool(torch.isposinf(ref_lse[1]).all())
    lse = ref_lse.clone()
    lse[1, 0, 0] = 0.0  # empty row reported as finite
    result = check_close(ref_out, lse, ref_out, ref_lse)
    assert not result["ok"] and any("+inf positions" in f for f in result["failures"])
    lse = ref_lse.clone()
    lse[0, 0, 0] = math.inf  # non-empty row reported as empty
    assert not check_close(ref_out, lse, ref_out, ref_lse)["ok"]
    lse = ref_lse.clone()
    lse[1, 0, 0] = -math.inf
    assert not check_close(ref_out, lse, ref_out, ref_lse)["ok"]


def test_check_close_rejects_one_percent_perturbation() -> None:
    ref_out, ref_lse = _outputs()
    noise = torch.randn(ref_out.shape, generator=torch.Generator().manual_seed(0))
    out = ref_out + 0.01 * ref_out.norm() / math.sqrt(ref_out.numel()) * noise
    result = check_close(out, ref_lse, ref_out, ref_lse)
    assert not result["ok"] and 0.008 < result["rel_err"] < 0.012
    assert any("relative error" in f for f in result["failures"])
    lse = ref_lse * 1.01
    result = check_close(ref_out, lse, ref_out, ref_lse)
    assert not result["ok"] and any(f.startswith("lse") for f in result["failures"])


def test_check_close_rejects_single_outlier() -> None:
    ref_out, ref_lse = _outputs()
    out = ref_out.clone()
    out[0, 0, 0, 0] += 0.05 * float(ref_out.abs().max())
    result = check_close(out, ref_lse, ref_out, ref_lse)
    assert not result["ok"] and any("elements off" in f for f in result["failures"])


def test_check_close_rejects_shape_mismatch() -> None:
    ref_out, ref_lse = _outputs()
    result = check_close(ref_out[:1], ref_lse, ref_out, ref_lse)
    assert not result["ok"] and "shape" in result["failures"][0]
