"""Run rendered kernels under the Triton interpreter (TRITON_INTERPRET=1) with the runtime's own launch plan
and argument packing, on CPU tensors: how CI checks kernel logic without a GPU
(docs/design.md#verifying-sm120-without-an-sm120)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from build_tools.compile import load_jit_function
from build_tools.render import AutotunedBlocks, RenderedKernel, render_combine, render_split
from sparse_mla_aot.contract import D_V, Variant
from sparse_mla_aot.plan import (allocate_partials, as_is, combine_arguments, combined_offsets, make_plan,
                                 split_arguments)
from sparse_mla_aot.validation import check_arguments



def _interpreted(rendered: RenderedKernel, directory: Path):
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("set TRITON_INTERPRET=1 before importing triton to use interpret_decode "
                           "(Triton picks interpreter or compiler for its library functions at import)")
    path = directory / f"{rendered.name}_interp.py"
    path.write_text(rendered.source)
    return load_jit_function(path, rendered.kernel_name)


def interpret_decode(variant: Variant, num_splits: int, q, k_cache, indices, softmax_scale, *,
                     block_sizes_as_constexprs: bool = False, wgmma: bool = False, wave: int = 0,
                     **options) -> tuple[torch.Tensor, torch.Tensor]:
    """sparse_mla_decode on CPU tensors through the interpreter, float32 dot operands; returns (out, lse).
    block_sizes_as_constexprs: run the JIT peer's rendering (AutotunedBlocks) with the variant's block sizes.
    wgmma: the variant as rendered for a warpgroup-MMA target (sm90). wave: make_plan's, as if a GPU ran that
    many programs at once (0: every row split)."""
    call = check_arguments(q, k_cache, indices, softmax_scale, **options)
    if call.kv_format != variant.kv_format:
        raise ValueError(f"variant {variant.name} is for {variant.kv_format}; inputs are {call.kv_format}")
    plan = make_plan(call, variant.name, variant.block_h, variant.block_t, num_splits, wave)
    partial_out, partial_lse = allocate_partials(plan, q.device)
    partial_out.fill_(float("nan"))
    partial_lse.fill_(float("nan"))
    out = torch.full((call.batch, call.s_q, call.h_q, D_V), float("nan"), dtype=torch.bfloat16)
    lse = torch.full((call.batch, call.s_q, call.h_q), float("nan"), dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        if block_sizes_as_constexprs:
            split = _interpreted(render_split(AutotunedBlocks(variant.kv_format), dot_dtype="float32"), Path(tmp))
            constexprs = {"BLOCK_H": variant.block_h, "BLOCK_T": variant.block_t}
        else:
            split = _interpreted(render_split(variant, dot_dtype="float32", wgmma=wgmma), Path(tmp))
            constexprs = {}
        combine = _interpreted(render_combine(), Path(tmp))
        split[plan.split_grid](*split_arguments(call, plan, partial_out, partial_lse, out, lse, pointer=as_is),
                               **constexprs)
        if plan.combine_grid is not None:
            out_offset, lse_offset = combined_offsets(call, plan)
            combine[plan.combine_grid](*combine_arguments(call, plan, partial_out, partial_lse,
                                                           out.view(-1)[out_offset:], lse.view(-1)[lse_offset:],
                                                           pointer=as_is))
    return out, lse
