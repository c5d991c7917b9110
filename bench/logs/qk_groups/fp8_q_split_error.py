"""How much q loses as two e4m3 parts (hi + lo / 16, max|q| per head scaled into [2^7, 2^8)) against today's f16 q
(max|q| per head in [2^14, 2^15)), for the logits of fp8_qk_probe.patch: CPU, torch's float8_e4m3fn.

    python bench/logs/qk_groups/fp8_q_split_error.py
"""
import torch

torch.manual_seed(0)
heads, dims, tokens = 16, 512, 2048
q = (torch.randn(heads, dims) * torch.logspace(-2, 1, heads)[:, None]).to(torch.bfloat16).double()
k = torch.randn(tokens, dims).to(torch.float8_e4m3fn).double()  # K's fp8 values (its scale multiplies the logits after)
exact = q @ k.T


def scaled(q: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q times a per-head power of two that puts max|q| in [2^top, 2^(top+1)), and that power."""
    exponent = torch.floor(torch.log2(q.abs().amax(1, keepdim=True)))
    factor = torch.exp2(top - exponent)
    return q * factor, factor


q16, f16_factor = scaled(q, 14)
f16_logits = (q16.to(torch.float16).double() @ k.T) / f16_factor
q8, e4m3_factor = scaled(q, 7)
hi = q8.to(torch.float8_e4m3fn).double()
lo = ((q8 - hi) * 16).to(torch.float8_e4m3fn).double()
split_logits = (hi @ k.T + (lo @ k.T) / 16) / e4m3_factor
hi_only_logits = (hi @ k.T) / e4m3_factor
scale = exact.abs().amax(1, keepdim=True)
for name, logits in (("f16 q (today)", f16_logits), ("e4m3 hi + lo/16", split_logits), ("e4m3 hi only", hi_only_logits)):
    error = ((logits - exact).abs() / scale).amax().item()
    print(f"{name:18s} max |logit error| / max |logit| per head: {error:.2e}")
