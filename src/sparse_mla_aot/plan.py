"""The launch plan of one call: split variant, split count, grids, workspace. It depends only on shapes and
the batch bucket (docs/design.md#runtime-rules), so a CUDA graph captured with it stays right for any tensor values."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from sparse_mla_aot.contract import D_V, MAX_SPLITS
from sparse_mla_aot.validation import DecodeCall

LOG2_E = 1.4426950408889634


@dataclass(frozen=True)
class LaunchPlan:
    variant: str
    block_h: int
    block_t: int
    num_splits: int  # of the split rows; 1: no row is split
    unsplit_rows: int  # the rows before it run one program per head block and write out and lse themselves
    split_grid: tuple[int, int, int]
    combine_grid: tuple[int, int, int] | None  # None: one split writes out and lse itself
    partial_shape: tuple[int, int, int]  # (split rows, h_q, num_splits)


def make_plan(call: DecodeCall, variant: str, block_h: int, block_t: int, num_splits: int,
              wave: int = 0) -> LaunchPlan:
    """More splits than tiles would only add empty splits: clamp to the tile count and to MAX_SPLITS. The split
    grid is one axis: the unsplit rows' programs, then the split rows' (rows x splits x head blocks, head block
    fastest, as the kernel decodes it). wave: how many programs of the variant the GPU runs at once (its SMs times
    the programs one SM holds), 0 if unknown. With more programs of one split per head block than a wave, the rows
    that fill whole waves are not split, only the rest (docs/design.md#splitting-only-the-last-wave)."""
    tiles = (call.topk + call.extra_topk) // block_t
    splits = max(1, min(num_splits, tiles, MAX_SPLITS))
    rows = call.batch_rows
    head_blocks = math.ceil(call.h_q / block_h)
    unsplit_rows = 0
    if splits > 1 and wave > 0:
        unsplit_rows = (rows * head_blocks) // wave * wave // head_blocks
        if unsplit_rows == rows:
            splits = 1
    if splits == 1:
        unsplit_rows = rows
    split_rows = rows - unsplit_rows
    return LaunchPlan(
        variant=variant, block_h=block_h, block_t=block_t, num_splits=splits, unsplit_rows=unsplit_rows,
        split_grid=((unsplit_rows + split_rows * splits) * head_blocks, 1, 1),
        combine_grid=None if splits == 1 else (split_rows, call.h_q, 1),
        partial_shape=(split_rows, call.h_q, splits),
    )


def combined_offsets(call: DecodeCall, plan: LaunchPlan) -> tuple[int, int]:
    """Where the combine kernel's rows start in out and in lse, in elements: it writes the split rows only."""
    return plan.unsplit_rows * call.h_q * D_V, plan.unsplit_rows * call.h_q


def workspace_elements(plan: LaunchPlan) -> tuple[int, int]:
    """The split workspace, flat fp32: partial out [rows, h_q, splits, 512] then partial lse [rows, h_q, splits];
    none for one split. Returns (total elements, where partial lse starts)."""
    if plan.combine_grid is None:
        return 0, 0
    count = plan.partial_shape[0] * plan.partial_shape[1] * plan.partial_shape[2]
    return count * (D_V + 1), count * D_V


def allocate_partials(plan: LaunchPlan, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Split workspaces from PyTorch's allocator (graph-pool memory under capture), one allocation for both."""
    total, lse_start = workspace_elements(plan)
    workspace = torch.empty(total, dtype=torch.float32, device=device)
    return workspace[:lse_start], workspace[lse_start:]


def as_is(value):
    """The `pointer` mapping that passes tensors (the interpreter) or symbolic sources (the plan cache) through."""
    return value


def _result_arguments(call: DecodeCall, partial_out, partial_lse, out, lse, pointer: Callable, stand_in) -> tuple:
    """contract.RESULT_PARAMS, which both kernels take: an absent attn_sink is `stand_in` (never dereferenced)."""
    return (pointer(partial_out), pointer(partial_lse), stand_in if call.attn_sink is None else pointer(call.attn_sink),
            pointer(out), pointer(lse))


def split_arguments(call: DecodeCall, plan: LaunchPlan, partial_out: torch.Tensor, partial_lse: torch.Tensor,
                    out: torch.Tensor, lse: torch.Tensor, pointer: Callable = torch.Tensor.data_ptr) -> tuple:
    """Arguments in contract.SPLIT_ARG_NAMES order; absent optional tensors are replaced by q (never dereferenced).
    `pointer` maps a tensor to what the launcher takes: its address (native), or itself (interpreter). The split
    kernel writes out and lse (and reads attn_sink) only when it is the only split."""
    q = pointer(call.q)
    has_extra = call.extra_indices is not None
    return (
        q, pointer(call.k_cache), pointer(call.indices),
        q if call.topk_length is None else pointer(call.topk_length),
        pointer(call.extra_k_cache) if has_extra else q,
        pointer(call.extra_indices) if has_extra else q,
        q if call.extra_topk_length is None else pointer(call.extra_topk_length),
        *_result_arguments(call, partial_out, partial_lse, out, lse, pointer, stand_in=q),
        call.softmax_scale * LOG2_E, call.s_q, call.h_q, call.topk, call.extra_topk, plan.num_splits, plan.unsplit_rows,
        int(call.topk_length is not None), int(call.extra_topk_length is not None), int(call.attn_sink is not None),
        call.page_size, call.block_stride, call.extra_page_size, call.extra_block_stride,
    )


def combine_arguments(call: DecodeCall, plan: LaunchPlan, partial_out: torch.Tensor, partial_lse: torch.Tensor,
                      out: torch.Tensor, lse: torch.Tensor, pointer: Callable = torch.Tensor.data_ptr) -> tuple:
    """Arguments in contract.COMBINE_ARG_NAMES order; out and lse where the split rows start (combined_offsets)."""
    results = _result_arguments(call, partial_out, partial_lse, out, lse, pointer, stand_in=pointer(partial_lse))
    return (*results, call.h_q, plan.num_splits, int(call.attn_sink is not None))
