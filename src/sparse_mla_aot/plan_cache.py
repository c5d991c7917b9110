"""The per-call plan cache: a call's signature -> everything derived from it (validated layout, dispatch choice,
grids, argument buffers, workspace size). The full checks run on a miss; a hit only reads pointers and the stream.
The signature holds everything the checks read (never a value inside a tensor), so two calls with equal
signatures pass or fail the checks alike and get the same plan: a cache hit never accepts a call the full check
would refuse."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch

from sparse_mla_aot.launch import DeviceKernels, LoadedKernel, Pointer
from sparse_mla_aot.plan import (LaunchPlan, as_is, combine_arguments, combined_offsets, split_arguments,
                                 workspace_elements)
from sparse_mla_aot.contract import D_V
from sparse_mla_aot.validation import ALIGNMENT, DecodeCall

# launch()'s pointer arguments, in this order: the call's tensors (0 when absent), then the buffers it allocates.
TENSOR_SOURCES = ("q", "k_cache", "indices", "topk_length", "extra_k_cache", "extra_indices", "extra_topk_length",
                  "attn_sink")
WORKSPACE, OUT, LSE = range(len(TENSOR_SOURCES), len(TENSOR_SOURCES) + 3)
MAX_PLANS = 4096  # distinct signatures kept; beyond, the cache starts over (a serving engine sees a few dozen)
FP32_BYTES, BF16_BYTES = 4, 2


@dataclass(frozen=True)
class CachedPlan:
    spec: bytes  # both kernels with every scalar argument in place (launch.DeviceKernels.launch_spec)
    launch: Callable  # the native launcher's launch(spec, stream, *pointers)
    device_index: int
    workspace_bytes: int  # 0: one split, no workspace
    out_shape: tuple[int, int, int, int]
    lse_shape: tuple[int, int, int]


def _plain_key(t) -> tuple | None:
    """What the checks read of a plain tensor argument: type, dtype, shape, contiguity (any contiguous layout
    passes), device, address modulo ALIGNMENT. AttributeError for something that is not a tensor."""
    if t is None:
        return None
    return type(t), t.dtype, t.shape, t.is_contiguous(), t.device, t.data_ptr() % ALIGNMENT


def _cache_key(t) -> tuple | None:
    """What the checks read of a cache: as a plain tensor, with its strides (they are its page layout)."""
    if t is None:
        return None
    return type(t), t.dtype, t.shape, t.stride(), t.device, t.data_ptr() % ALIGNMENT


def signature(tensors: tuple, softmax_scale, kv_format, out, lse, force) -> tuple:
    """The cache key of a call: each tensor argument's key (TENSOR_SOURCES order, then out and lse), None when
    absent; the scale and kv_format with their types; the SPARSE_MLA_AOT_FORCE setting. Raises AttributeError (a
    non-tensor) or TypeError (unhashable) for arguments the full check refuses anyway."""
    q, k_cache, indices, topk_length, extra_k_cache, extra_indices, extra_topk_length, attn_sink = tensors
    return (_plain_key(q), _cache_key(k_cache), _plain_key(indices), _plain_key(topk_length),
            _cache_key(extra_k_cache), _plain_key(extra_indices), _plain_key(extra_topk_length),
            _plain_key(attn_sink), _plain_key(out), _plain_key(lse), type(softmax_scale), softmax_scale,
            type(kv_format), kv_format, force)


def build(call: DecodeCall, plan: LaunchPlan, kernels: DeviceKernels, split: LoadedKernel, device: torch.device,
          programmatic_combine: bool = False) -> CachedPlan:
    """The plan of a validated call: its arguments with each tensor replaced by its pointer source."""
    sources = {name: Pointer(i) for i, name in enumerate(TENSOR_SOURCES) if getattr(call, name) is not None}
    symbolic = dataclasses.replace(call, **sources)
    total, lse_start = workspace_elements(plan)
    partial_out, partial_lse = Pointer(WORKSPACE), Pointer(WORKSPACE, lse_start * FP32_BYTES)
    split_values = split_arguments(symbolic, plan, partial_out, partial_lse, Pointer(OUT), Pointer(LSE),
                                   pointer=as_is)
    combine = None
    if plan.combine_grid is not None:
        out_offset, lse_offset = combined_offsets(call, plan)
        combine = plan.combine_grid, combine_arguments(symbolic, plan, partial_out, partial_lse,
                                                       Pointer(OUT, out_offset * BF16_BYTES),
                                                       Pointer(LSE, lse_offset * FP32_BYTES), pointer=as_is)
    spec = kernels.launch_spec(split, plan.split_grid, split_values, combine, programmatic_combine)
    return CachedPlan(spec, kernels.launcher.launch, device.index, total * FP32_BYTES,
                      (call.batch, call.s_q, call.h_q, D_V), (call.batch, call.s_q, call.h_q))
