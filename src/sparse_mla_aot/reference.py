"""The PyTorch reference for sparse MLA decode (docs/design.md#the-operation), its pass rule
(docs/design.md#numerics), and inputs.

The reference dequantizes the gathered tokens and computes attention in float64 (CPU or GPU), so
its own error is far below the tolerance and it cannot be spoiled by TF32 matmul settings.
Semantics follow FlashMLA's sparse decode: -1 indices and positions past ``topk_length`` are
skipped, the optional extra token set joins the same softmax, a row with no token gives out 0 and
lse +inf, and the attention sink scales out by sigmoid(lse - sink) without changing lse.
"""

from __future__ import annotations

import math

import torch

from sparse_mla_aot.contract import D_QK, D_V
from sparse_mla_aot.kv_cache import gather_tokens, quantize_model1, quantize_v32

# The numerics rule's tolerances (docs/design.md#numerics).
MAX_COS_DIFF = 1e-5
MAX_REL_ERR = 5e-3
ELEM_ABS_TOL = 0.02  # times max|ref|
ELEM_REL_TOL = 2.0 / 128.0  # times |ref|
LSE_ABS_TOL = 1e-5
LSE_REL_TOL = 1e-4


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def resolve_kv_format(d_qk: int, kv_format: str | None) -> str:
    """The kv_format for a query head dim: the given one (checked against d_qk) or inferred from it."""
    if kv_format is None:
        for name, dims in D_QK.items():
            if dims == d_qk:
                return name
        raise ValueError(
            f"q's last dim (d_qk) must be 576 (v32) or 512 (model1) to infer kv_format; got {d_qk}"
        )
    if kv_format not in D_QK:
        raise ValueError(f"kv_format must be 'v32', 'model1' or None; got {kv_format!r}")
    if D_QK[kv_format] != d_qk:
        raise ValueError(
            f"q's last dim (d_qk) must be {D_QK[kv_format]} for kv_format {kv_format!r}; got {d_qk}"
        )
    return kv_format


def _describe(t: object) -> str:
    return f"{_shape(t)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__


def _check_index_tensor(t: object, name: str, leading: tuple[int, ...], what: str) -> None:
    """t must be an integer tensor whose shape starts with `leading` and has len(what) dims."""
    dims = what.count(",") + 1
    ok = (
        isinstance(t, torch.Tensor)
        and not t.dtype.is_floating_point
        and t.dtype != torch.bool
        and t.dim() == dims
        and tuple(t.shape[: len(leading)]) == leading
    )
    if not ok:
        raise ValueError(f"{name} must be an integer tensor {what} with leading dims {list(leading)}; "
                         f"got {_describe(t)}")


def _token_set(
    cache: torch.Tensor,
    kv_format: str,
    indices: torch.Tensor,
    lengths: torch.Tensor | None,
    lengths_name: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dequantized tokens float64 [b, s_q, topk, d] and their validity mask [b, s_q, topk]."""
    b, s_q, topk = indices.shape
    idx = indices.to(device=cache.device, dtype=torch.int64)
    valid = idx >= 0
    if lengths is not None:
        _check_index_tensor(lengths, lengths_name, (b,), "[b]")
        position = torch.arange(topk, device=idx.device)
        valid &= position < lengths.to(device=idx.device, dtype=torch.int64).view(b, 1, 1)
    tokens = gather_tokens(cache, kv_format, torch.where(valid, idx, 0)).double()
    return tokens, valid


def reference_sparse_mla_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    indices: torch.Tensor,
    softmax_scale: float,
    *,
    kv_format: str | None = None,
    attn_sink: torch.Tensor | None = None,
    topk_length: torch.Tensor | None = None,
    extra_k_cache: torch.Tensor | None = None,
    extra_indices: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MLA decode in float64: returns out float32 [b, s_q, h_q, 512] and lse float32 [b, s_q, h_q].

    The ground truth every kernel variant is checked against (with check_close).
    """
    if not isinstance(q, torch.Tensor) or q.dim() != 4 or not q.dtype.is_floating_point:
        raise ValueError(f"q must be a floating-point tensor [b, s_q, h_q, d_qk]; got {_describe(q)}")
    b, s_q, h_q, d_qk = q.shape
    kv_format = resolve_kv_format(d_qk, kv_format)
    if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, (int, float)):
        raise ValueError(f"softmax_scale must be a float (no default: models differ); got {softmax_scale!r}")
    _check_index_tensor(indices, "indices", (b, s_q), "[b, s_q, topk]")
    if (extra_k_cache is None) != (extra_indices is None):
        raise ValueError("extra_k_cache and extra_indices must be given together; got only one of them")
    if extra_indices is None and extra_topk_length is not None:
        raise ValueError("extra_topk_length needs extra_indices and extra_k_cache; got only extra_topk_length")

    tokens, valid = _token_set(k_cache, kv_format, indices, topk_length, "topk_length")
    if extra_indices is not None:
        _check_index_tensor(extra_indices, "extra_indices", (b, s_q), "[b, s_q, extra_topk]")
        extra_tokens, extra_valid = _token_set(
            extra_k_cache, kv_format, extra_indices, extra_topk_length, "extra_topk_length"
        )
        tokens = torch.cat([tokens, extra_tokens.to(tokens.device)], dim=2)
        valid = torch.cat([valid, extra_valid.to(valid.device)], dim=2)

    qd = q.to(device=tokens.device, dtype=torch.float64)
    logits = torch.einsum("bshd,bstd->bsht", qd, tokens) * float(softmax_scale)
    mask = valid.unsqueeze(2)  # [b, s_q, 1, t]
    logits = logits.masked_fill(~mask, -math.inf)
    has_token = mask.any(dim=-1)  # [b, s_q, 1]
    row_max = torch.where(has_token, logits.amax(dim=-1), 0.0)
    weights = torch.exp(logits - row_max.unsqueeze(-1))  # masked logits give exactly 0
    denom = weights.sum(dim=-1)
    out = torch.einsum("bsht,bstd->bshd", weights, tokens[..., :D_V])
    out = out / torch.where(has_token, denom, 1.0).unsqueeze(-1)
    lse = torch.where(has_token, row_max + torch.log(denom), math.inf)

    if attn_sink is not None:
        if not isinstance(attn_sink, torch.Tensor) or tuple(attn_sink.shape) != (h_q,):
            raise ValueError(f"attn_sink must be a float tensor [h_q] = [{h_q}]; got {_describe(attn_sink)}")
        sink = attn_sink.to(device=lse.device, dtype=torch.float64)
        # sigmoid(lse - sink) = exp(lse) / (exp(lse) + exp(sink)); rows without tokens stay 0
        # (their lse is +inf, which with sink = +inf would make NaN).
        gate = torch.where(has_token, torch.sigmoid(torch.where(has_token, lse, 0.0) - sink), 0.0)
        out = out * gate.unsqueeze(-1)
    return out.float(), lse.float()


def check_close(
    out: torch.Tensor, lse: torch.Tensor, ref_out: torch.Tensor, ref_lse: torch.Tensor
) -> dict:
    """Apply the numerics rule (docs/design.md#numerics); returns the figures and the reasons for any failure.

    Keys: ok, cos_diff, rel_err, max_abs_err, lse_max_err (measured on finite entries), failures.
    """
    failures: list[str] = []
    for name, got, ref in (("out", out, ref_out), ("lse", lse, ref_lse)):
        if tuple(got.shape) != tuple(ref.shape):
            failures.append(f"{name} shape {_shape(got)} != reference shape {_shape(ref)}")
    if failures:
        nan = float("nan")
        return {"ok": False, "cos_diff": nan, "rel_err": nan, "max_abs_err": nan, "lse_max_err": nan,
                "failures": failures}

    a = out.detach().to(device="cpu", dtype=torch.float64)
    r = ref_out.detach().to(device="cpu", dtype=torch.float64)
    la = lse.detach().to(device="cpu", dtype=torch.float64)
    lr = ref_lse.detach().to(device="cpu", dtype=torch.float64)

    for name, got, ref in (("out", a, r), ("lse", la, lr)):
        nan_count = int(torch.isnan(got).sum())
        if nan_count:
            failures.append(f"{name} has {nan_count} NaN values")
        if bool(torch.isnan(ref).any()):
            failures.append(f"reference {name} has NaN values")
        for inf_name, test in (("+inf", torch.isposinf), ("-inf", torch.isneginf)):
            mismatched = int((test(got) != test(ref)).sum())
            if mismatched:
                failures.append(f"{name} {inf_name} positions differ from the reference at {mismatched} entries")

    finite = torch.isfinite(a) & torch.isfinite(r)
    af, rf = a[finite], r[finite]
    diff = (af - rf).abs()
    denom = float((af * af + rf * rf).sum())
    cos_diff = 1.0 - 2.0 * float((af * rf).sum()) / denom if denom > 0 else 0.0
    ref_norm = float(rf.norm())
    err_norm = float((af - rf).norm())
    rel_err = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    max_abs_err = float(diff.max()) if diff.numel() else 0.0
    if cos_diff > MAX_COS_DIFF:
        failures.append(f"out cosine difference {cos_diff:.3e} > {MAX_COS_DIFF:.0e}")
    if rel_err > MAX_REL_ERR:
        failures.append(f"out relative error {rel_err:.3e} > {MAX_REL_ERR:.0e}")
    if diff.numel():
        bound = ELEM_ABS_TOL * float(rf.abs().max()) + ELEM_REL_TOL * rf.abs()
        over = diff > bound
        if bool(over.any()):
            worst = int(torch.argmax(diff - bound))
            failures.append(
                f"out: {int(over.sum())} elements off by more than 0.02*max|ref| + 2/128*|ref| "
                f"(worst: got {float(af[worst]):.6g}, ref {float(rf[worst]):.6g})"
            )

    lse_finite = torch.isfinite(la) & torch.isfinite(lr)
    lse_diff = (la[lse_finite] - lr[lse_finite]).abs()
    lse_max_err = float(lse_diff.max()) if lse_diff.numel() else 0.0
    lse_over = lse_diff > LSE_ABS_TOL + LSE_REL_TOL * lr[lse_finite].abs()
    if bool(lse_over.any()):
        failures.append(
            f"lse: {int(lse_over.sum())} entries off by more than 1e-5 + 1e-4*|ref| (max error {lse_max_err:.3e})"
        )
    return {"ok": not failures, "cos_diff": cos_diff, "rel_err": rel_err, "max_abs_err": max_abs_err,
            "lse_max_err": lse_max_err, "failures": failures}


def assert_close(out: torch.Tensor, lse: torch.Tensor, ref_out: torch.Tensor, ref_lse: torch.Tensor) -> dict:
    """check_close, raising AssertionError listing the failures; returns the figures when it passes."""
    result = check_close(out, lse, ref_out, ref_lse)
    if not result["ok"]:
        raise AssertionError("result outside the numerics tolerance (docs/design.md#numerics):\n  "
                             + "\n  ".join(result["failures"]))
    return result


def _random_cache(
    num_blocks: int, page_size: int, kv_format: str, gen: torch.Generator, device: str | torch.device
) -> torch.Tensor:
    latent = torch.randn((num_blocks, page_size, D_QK[kv_format]), generator=gen)
    # Quantize on the target device: moving a model1 view with .to() would copy its rows and lose
    # the page-blocked layout.
    latent = latent.to(torch.bfloat16).to(device)
    return quantize_v32(latent) if kv_format == "v32" else quantize_model1(latent)


def _random_indices(
    b: int, s_q: int, topk: int, num_tokens: int, invalid_frac: float, gen: torch.Generator
) -> torch.Tensor:
    """Token ids per row, distinct when the cache has enough tokens, with about invalid_frac of them -1."""
    rows = b * s_q
    if topk <= num_tokens:
        idx = torch.rand((rows, num_tokens), generator=gen).argsort(dim=-1)[:, :topk]
    else:
        idx = torch.randint(0, num_tokens, (rows, topk), generator=gen)
    idx = torch.where(torch.rand((rows, topk), generator=gen) < invalid_frac, -1, idx)
    return idx.view(b, s_q, topk).to(torch.int32)


def make_inputs(
    b: int,
    s_q: int,
    h_q: int,
    topk: int,
    kv_format: str,
    *,
    page_size: int = 64,
    num_blocks: int | None = None,
    extra_topk: int = 0,
    extra_page_size: int | None = None,
    with_sink: bool = False,
    with_topk_length: bool = False,
    invalid_frac: float = 0.1,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> dict:
    """Random (never zero) inputs, keyed like reference_sparse_mla_decode's arguments.

    Deterministic for a seed on any device (drawn on the CPU). num_blocks defaults to room for
    2*topk tokens, so the top-k ids of a row are distinct. lengths are uniform in [0, topk].
    """
    if kv_format not in D_QK:
        raise ValueError(f"kv_format must be 'v32' or 'model1'; got {kv_format!r}")
    for name, value in (("b", b), ("s_q", s_q), ("h_q", h_q), ("topk", topk), ("page_size", page_size)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1; got {value}")
    if extra_topk < 0:
        raise ValueError(f"extra_topk must be >= 0; got {extra_topk}")
    d_qk = D_QK[kv_format]
    gen = torch.Generator().manual_seed(seed)

    def blocks_for(n_tokens: int, ps: int) -> int:
        return max(1, -(-2 * n_tokens // ps))

    num_blocks = blocks_for(topk, page_size) if num_blocks is None else num_blocks
    q = torch.randn((b, s_q, h_q, d_qk), generator=gen).to(torch.bfloat16)
    k_cache = _random_cache(num_blocks, page_size, kv_format, gen, device)
    indices = _random_indices(b, s_q, topk, num_blocks * page_size, invalid_frac, gen)
    topk_length = (
        torch.randint(0, topk + 1, (b,), generator=gen, dtype=torch.int32) if with_topk_length else None
    )
    extra_k_cache = extra_indices = extra_topk_length = None
    if extra_topk:
        extra_ps = page_size if extra_page_size is None else extra_page_size
        extra_blocks = blocks_for(extra_topk, extra_ps)
        extra_k_cache = _random_cache(extra_blocks, extra_ps, kv_format, gen, device)
        extra_indices = _random_indices(b, s_q, extra_topk, extra_blocks * extra_ps, invalid_frac, gen)
        if with_topk_length:
            extra_topk_length = torch.randint(0, extra_topk + 1, (b,), generator=gen, dtype=torch.int32)
    attn_sink = torch.randn((h_q,), generator=gen) if with_sink else None

    def on_device(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.to(device)

    return {
        "q": q.to(device),
        "k_cache": k_cache,
        "indices": indices.to(device),
        "softmax_scale": 1.0 / math.sqrt(d_qk),
        "kv_format": kv_format,
        "attn_sink": on_device(attn_sink),
        "topk_length": on_device(topk_length),
        "extra_k_cache": extra_k_cache,
        "extra_indices": on_device(extra_indices),
        "extra_topk_length": on_device(extra_topk_length),
    }
