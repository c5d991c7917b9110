"""The wgf8 kernel's arithmetic, tile by tile in torch on the CPU (a model of bench/logs/wg23/wgf8.patch's template,
not the kernel), against the float64 reference with the numerics rule: does its precision scheme pass before a GPU
runs it? Per (row, head block): q as two e4m3 parts after a per-head power of two; per 64-token tile the producer's
running 2^E, the tokens' group scales over it (kp) and the rescale factor; S^T per scale group from the e4m3 values
(fp32 sums), times kp, times 2^E and q's power of two, plus the bf16 rope; the fp32 online softmax in base 2; P^T
times each group's kp rounded to f16 against V in f16 (exact), model1's rope dims with P^T in bf16; the end as the
kernel's (out = acc / l times 2^E, lse = (m + log2 l) ln 2). Run from the repository root, no GPU:

    python3 bench/logs/wg23/numerics_model.py
"""
import math
import sys

import torch

sys.path[:0] = ["src", "."]
from sparse_mla_aot.contract import LAYOUTS  # noqa: E402
from sparse_mla_aot.kv_cache import _as_bytes, _model1_records, quantize_model1, quantize_v32  # noqa: E402
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode  # noqa: E402

TILE = 64
E4M3 = torch.float8_e4m3fn


def raw_tokens(cache: torch.Tensor, kv_format: str, idx: torch.Tensor):
    """The gathered records as the ring holds them: fp8 values [T, 512] (model1's last 64 zero), the group scales
    [T, G] float32 and the bf16 rope [T, 64] (index -1: token 0's bytes, masked by the caller)."""
    layout = LAYOUTS[kv_format]
    idx = torch.where(idx >= 0, idx, 0)
    if kv_format == "v32":
        raw = _as_bytes(cache, "k_cache")
        page_size = raw.shape[1]
        rec = raw[idx // page_size, idx % page_size, 0]
        scales = rec[:, 512:528].contiguous().view(torch.float32)
    else:
        records, scale_bytes = _model1_records(cache)
        page_size = records.shape[1]
        rec = records[idx // page_size, idx % page_size]
        byte = scale_bytes[idx // page_size, idx % page_size].to(torch.int32)
        scales = (byte << 23).view(torch.float32)  # UE8M0 as the kernel reads it: 2^(byte - 127), 0 for byte 0
    fp8 = torch.zeros(len(idx), 512, dtype=torch.uint8)
    fp8[:, :layout.nope_dims] = rec[:, :layout.nope_dims]
    rope = rec[:, layout.rope.byte:layout.rope.byte + 128].contiguous().view(torch.bfloat16).float()
    return fp8.view(E4M3).float(), scales.float(), rope


def exponent_field(x: torch.Tensor) -> torch.Tensor:
    return (x.view(torch.int32) >> 23) & 255


def pow2(e: torch.Tensor | int) -> torch.Tensor:
    return torch.ldexp(torch.tensor(1.0), torch.as_tensor(e, dtype=torch.int32) - 127)


def model_row(q: torch.Tensor, fp8, scales, rope, valid, kv_format: str, sm_scale: float):
    """One row's heads through the wgf8 arithmetic: out [H, 512] float32 and lse [H]."""
    layout = LAYOUTS[kv_format]
    C, G = layout.tile, layout.nope_dims // layout.tile
    q = q.float()
    q_nope = torch.zeros(q.shape[0], 512)
    q_nope[:, :layout.nope_dims] = q[:, :layout.nope_dims]
    q_rope = q[:, layout.rope.dim:layout.rope.dim + 64].to(torch.bfloat16).float()
    q_max = q_nope.abs().amax(1)
    shift = torch.where(q_max == 0, 0, (7 - (exponent_field(q_max) - 127)).clamp(-126, 126))
    q_scaled = q_nope * torch.ldexp(torch.ones_like(q_max), shift)[:, None]
    hi = q_scaled.to(E4M3).float()
    q8 = hi + (q_scaled - hi).to(E4M3).float()  # the two parts' products are summed in the same fp32 accumulator
    logit_scale = torch.ldexp(torch.ones_like(q_max), -shift) * sm_scale / math.log(2)
    H = q.shape[0]
    m = torch.full((H,), -math.inf)
    l_sum = torch.zeros(H)
    acc = torch.zeros(G, C, H)  # O^T per group, over 2^E
    acc_rope = torch.zeros(64, H)
    e_run = torch.tensor(1)
    unit = pow2(e_run)
    for first in range(0, fp8.shape[0], TILE):
        t = slice(first, first + TILE)
        k8, sc, kr, ok = fp8[t], scales[t], rope[t], valid[t]
        sc = torch.where(ok[:, None], sc, 0.0)
        e_new = torch.maximum(e_run, exponent_field(sc).max())
        unit, rescale = pow2(e_new), pow2(127 + e_run - e_new)
        e_run = e_new
        kp = sc * pow2(254 - e_new)  # scale / 2^(E - 127)
        s8 = sum(kp[:, g, None] * (k8[:, g * C:(g + 1) * C] @ q8[:, g * C:(g + 1) * C].T) for g in range(G))
        s = s8 * (logit_scale * unit)[None, :] + (kr.to(torch.bfloat16).float() @ q_rope.T) * (sm_scale / math.log(2))
        s = torch.where(ok[:, None], s.float(), -math.inf)
        m_new = torch.maximum(m, s.amax(0))
        m_safe = torch.where(m_new == -math.inf, 0.0, m_new)
        alpha = torch.exp2(m - m_safe)
        p = torch.exp2(s - m_safe[None, :])
        l_sum = l_sum * alpha + p.sum(0)
        m = m_new
        for g in range(G):
            p_g = (p * kp[:, g, None]).to(torch.float16).float()
            acc[g] = acc[g] * (alpha * rescale)[None, :] + k8[:, g * C:(g + 1) * C].T.half().float() @ p_g
        if layout.rope.in_v:
            acc_rope = acc_rope * alpha[None, :] + kr.T @ p.to(torch.bfloat16).float()
    empty = l_sum == 0
    inv_l = 1.0 / torch.where(empty, 1.0, l_sum)
    out = torch.zeros(H, 512)
    for g in range(G):
        out[:, g * C:(g + 1) * C] = (acc[g] * (inv_l * unit)[None, :]).T
    if layout.rope.in_v:
        out[:, layout.rope.dim:layout.rope.dim + 64] = (acc_rope * inv_l[None, :]).T
    lse = torch.where(empty, math.inf, (m + torch.log2(torch.where(empty, 1.0, l_sum))) * math.log(2))
    return out.to(torch.bfloat16).float(), lse


def spread_cache(cache: torch.Tensor, kv_format: str, seed: int) -> torch.Tensor:
    """A cache of the same geometry whose tokens' magnitudes span 2^-8 .. 2^8 (so the running 2^E grows from tile to
    tile and the rescale factor is exercised), the larger ones more likely late in the cache."""
    gen = torch.Generator().manual_seed(seed)
    num_blocks, page_size = cache.shape[0], cache.shape[1]
    d = 576 if kv_format == "v32" else 512
    position = torch.linspace(0, 1, num_blocks * page_size).view(num_blocks, page_size, 1)
    exponent = (torch.rand((num_blocks, page_size, 1), generator=gen) * 8 + position * 8 - 8).round()
    latent = (torch.randn((num_blocks, page_size, d), generator=gen) * torch.exp2(exponent)).to(torch.bfloat16)
    return quantize_v32(latent) if kv_format == "v32" else quantize_model1(latent)


def main() -> None:
    print(f"{'shape':<42} {'ok':<5} {'cos_diff':>9} {'rel_err':>9} {'max_abs_err':>11} {'lse_max_err':>11}")
    cases = [("v32", dict(topk=2048)), ("model1", dict(topk=512, extra_topk=128)),
             ("v32", dict(topk=2048, with_topk_length=True)), ("model1", dict(topk=512, extra_topk=128, seed=3)),
             ("v32", dict(topk=2048, spread=True)), ("model1", dict(topk=512, extra_topk=128, spread=True))]
    for kv_format, shape in cases:
        inputs = make_inputs(2, 1, 16, kv_format=kv_format, **{k: v for k, v in shape.items() if k != "spread"})
        if shape.get("spread"):
            inputs["k_cache"] = spread_cache(inputs["k_cache"], kv_format, 1)
            inputs["indices"] = inputs["indices"].sort(dim=-1).values  # low positions first: E grows along the tiles
            if inputs.get("extra_k_cache") is not None:
                inputs["extra_k_cache"] = spread_cache(inputs["extra_k_cache"], kv_format, 2)
        sm_scale = 1 / math.sqrt(576 if kv_format == "v32" else 512)
        ref_out, ref_lse = reference_sparse_mla_decode(
            inputs["q"], inputs["k_cache"], inputs["indices"], sm_scale, kv_format=kv_format,
            topk_length=inputs.get("topk_length"), extra_k_cache=inputs.get("extra_k_cache"),
            extra_indices=inputs.get("extra_indices"), extra_topk_length=inputs.get("extra_topk_length"))
        out = torch.zeros_like(ref_out)
        lse = torch.zeros_like(ref_lse)
        for b in range(inputs["q"].shape[0]):
            sets = [(inputs["k_cache"], inputs["indices"][b, 0], inputs.get("topk_length"))]
            if inputs.get("extra_indices") is not None:
                sets.append((inputs["extra_k_cache"], inputs["extra_indices"][b, 0], inputs.get("extra_topk_length")))
            parts = []
            for cache, idx, lengths in sets:
                ok = idx >= 0
                if lengths is not None:
                    ok &= torch.arange(len(idx)) < int(lengths[b])
                parts.append((*raw_tokens(cache, kv_format, idx), ok))
            fp8, scales, rope, valid = (torch.cat([p[i] for p in parts]) for i in range(4))
            out[b, 0], lse[b, 0] = model_row(inputs["q"][b, 0], fp8, scales, rope, valid, kv_format, sm_scale)
        r = check_close(out, lse, ref_out, ref_lse)
        label = f"{kv_format} h16 " + ",".join(f"{k}={v}" for k, v in shape.items())
        print(f"{label:<42} {str(r['ok']):<5} {r['cos_diff']:9.2e} {r['rel_err']:9.2e} {r['max_abs_err']:11.2e} "
              f"{r['lse_max_err']:11.2e}" + ("" if r["ok"] else f"  {r['failures']}"))


if __name__ == "__main__":
    main()
