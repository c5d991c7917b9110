"""torch.ops.sparse_mla_aot.sparse_mla_decode: the op torch.compile traces (through its fake implementation).
Defined with torch.library.Library rather than @custom_op: an eager call then costs the dispatcher's few us, not
custom_op's per-call wrappers and aliasing checks (~20 us); the plain function stays the fastest eager path."""
from __future__ import annotations

import torch

from sparse_mla_aot.contract import D_V
from sparse_mla_aot.ops import sparse_mla_decode

SCHEMA = ("sparse_mla_decode(Tensor q, Tensor k_cache, Tensor indices, float softmax_scale, str? kv_format=None, "
          "Tensor? attn_sink=None, Tensor? topk_length=None, Tensor? extra_k_cache=None, Tensor? extra_indices=None, "
          "Tensor? extra_topk_length=None) -> (Tensor, Tensor)")

_library = torch.library.Library("sparse_mla_aot", "DEF")
_library.define(SCHEMA)


def _decode(q, k_cache, indices, softmax_scale, kv_format=None, attn_sink=None, topk_length=None,
            extra_k_cache=None, extra_indices=None, extra_topk_length=None):
    return sparse_mla_decode(q, k_cache, indices, softmax_scale, kv_format=kv_format, attn_sink=attn_sink,
                             topk_length=topk_length, extra_k_cache=extra_k_cache, extra_indices=extra_indices,
                             extra_topk_length=extra_topk_length)


# Every backend: tensors elsewhere than CUDA reach the function's checks and get its errors.
_library.impl("sparse_mla_decode", _decode, "CompositeExplicitAutograd")


@torch.library.register_fake("sparse_mla_aot::sparse_mla_decode", lib=_library)
def _fake(q, k_cache, indices, softmax_scale, kv_format=None, attn_sink=None, topk_length=None, extra_k_cache=None,
          extra_indices=None, extra_topk_length=None):
    b, s_q, h_q, _ = q.shape
    return q.new_empty((b, s_q, h_q, D_V)), q.new_empty((b, s_q, h_q), dtype=torch.float32)


sparse_mla_decode_op = torch.ops.sparse_mla_aot.sparse_mla_decode
