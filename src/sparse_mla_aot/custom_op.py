"""torch.library registration so torch.compile can trace the op; the plain function stays the fast path."""
from __future__ import annotations

from typing import Optional

import torch

from sparse_mla_aot.contract import D_V
from sparse_mla_aot.ops import sparse_mla_decode


@torch.library.custom_op("sparse_mla_aot::sparse_mla_decode", mutates_args=())
def sparse_mla_decode_op(q: torch.Tensor, k_cache: torch.Tensor, indices: torch.Tensor, softmax_scale: float,
                         kv_format: Optional[str] = None, attn_sink: Optional[torch.Tensor] = None,
                         topk_length: Optional[torch.Tensor] = None, extra_k_cache: Optional[torch.Tensor] = None,
                         extra_indices: Optional[torch.Tensor] = None,
                         extra_topk_length: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    return sparse_mla_decode(q, k_cache, indices, softmax_scale, kv_format=kv_format, attn_sink=attn_sink,
                             topk_length=topk_length, extra_k_cache=extra_k_cache, extra_indices=extra_indices,
                             extra_topk_length=extra_topk_length)


@sparse_mla_decode_op.register_fake
def _(q, k_cache, indices, softmax_scale, kv_format=None, attn_sink=None, topk_length=None, extra_k_cache=None,
      extra_indices=None, extra_topk_length=None):
    b, s_q, h_q, _ = q.shape
    return q.new_empty((b, s_q, h_q, D_V)), q.new_empty((b, s_q, h_q), dtype=torch.float32)
