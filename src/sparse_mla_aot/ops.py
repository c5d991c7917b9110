"""The public op: signature -> cached plan (or validate -> dispatch -> plan on a miss) -> one native call that
launches split and combine (or, with one split, the split kernel alone) on the current stream."""
from __future__ import annotations

import os
import threading

import torch

from sparse_mla_aot import dispatch, paths, plan_cache
from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import D_V
from sparse_mla_aot.launch import DeviceKernels
from sparse_mla_aot.plan import make_plan
from sparse_mla_aot.validation import DecodeCall, check_arguments, check_devices

_catalog: Catalog | None = None
_devices: dict[int, DeviceKernels] = {}
_plans: dict[tuple, plan_cache.CachedPlan] = {}
_lock = threading.Lock()
CHECK_ENV = os.fsencode(paths.CHECK_ENV)


def catalog() -> Catalog:
    global _catalog
    if _catalog is None:
        _catalog = Catalog()
    return _catalog


def _device_index(device) -> int:
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"device must be a CUDA device; got {device}")
    return device.index if device.index is not None else torch.cuda.current_device()


def prepare(device=None) -> str:
    """Load the device's kernels (every variant its tables name) before CUDA-graph capture; returns the target."""
    index = _device_index(device)
    with _lock:
        kernels = _devices.get(index)
        if kernels is None:
            target = catalog().target_for_capability(torch.cuda.get_device_capability(index))
            kernels = DeviceKernels(catalog(), index, target)
            kernels.load_tables()
            _devices[index] = kernels
    return kernels.target


def _kernels_for(index: int) -> DeviceKernels:
    kernels = _devices.get(index)
    if kernels is None:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("sparse_mla_decode was first called under CUDA-graph capture: loading kernels is "
                               "not allowed there. Call sparse_mla_aot.prepare(device) (or one eager call) "
                               "before capturing.")
        prepare(index)
        kernels = _devices[index]
    return kernels


def check_indices(call: DecodeCall) -> None:
    """SPARSE_MLA_AOT_CHECK=1: indices must address tokens inside their cache (synchronizes; debug only)."""
    for name, indices, cache in (("indices", call.indices, call.k_cache),
                                 ("extra_indices", call.extra_indices, call.extra_k_cache)):
        if indices is None:
            continue
        tokens = cache.shape[0] * cache.shape[1]
        bad = (indices < -1) | (indices >= tokens)
        if bool(bad.any()):
            position = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(f"{name}{list(position)} = {int(indices[position])} is outside the cache "
                             f"[-1, {tokens}) (num_blocks*page_size = {tokens})")


def sparse_mla_decode(q, k_cache, indices, softmax_scale, *, kv_format=None, attn_sink=None, topk_length=None,
                      extra_k_cache=None, extra_indices=None, extra_topk_length=None, out=None, lse=None):
    """Sparse MLA decode (docs/design.md#the-operation). Returns (out [b, s_q, h_q, 512] bf16, lse [b, s_q, h_q]
    fp32).
    A call whose signature was seen before skips every check and derivation (plan_cache); a new one runs them."""
    tensors = (q, k_cache, indices, topk_length, extra_k_cache, extra_indices, extra_topk_length, attn_sink)
    key = None
    try:
        key = plan_cache.signature(tensors, softmax_scale, kv_format, out, lse, dispatch.forcing_in_effect())
        plan = _plans[key] if dispatch.ENVIRON.get(CHECK_ENV) != b"1" else None
    except (AttributeError, TypeError, KeyError):  # a new signature, or arguments the checks will refuse
        plan = None
    if plan is None:
        plan = _plan_call(q, k_cache, indices, softmax_scale, kv_format=kv_format, attn_sink=attn_sink,
                          topk_length=topk_length, extra_k_cache=extra_k_cache, extra_indices=extra_indices,
                          extra_topk_length=extra_topk_length, out=out, lse=lse)
        if key is not None:
            if len(_plans) >= plan_cache.MAX_PLANS:
                _plans.clear()
            _plans[key] = plan
    stream = torch._C._cuda_getCurrentRawStream(plan.device_index)  # current_stream().cuda_stream without a Stream
    if out is None:
        out = q.new_empty(plan.out_shape)  # q's device and dtype (bf16): cheaper to parse than torch.empty
    if lse is None:
        lse = q.new_empty(plan.lse_shape, dtype=torch.float32)
    workspace = _allocate_workspace(plan, stream) if plan.workspace_bytes else 0
    try:
        plan.launch(plan.spec, stream, *[0 if t is None else t.data_ptr() for t in tensors], workspace,
                    out.data_ptr(), lse.data_ptr())
    finally:
        if workspace:
            torch._C._cuda_cudaCachingAllocator_raw_delete(workspace)
    return out, lse


def _allocate_workspace(plan: plan_cache.CachedPlan, stream: int) -> int:
    """The split workspace: a block of PyTorch's caching allocator on the call's stream, as an address (a
    torch.empty of it took 1.4-2.3 us more on the H200's host, bench/RESULTS.md). Under CUDA-graph capture, and in
    torch.compile's cudagraph-tree warm-up, the allocator routes it to the graph's pool by stream. The caller frees
    it right after the launch: like a dropped tensor's, the block is reused only by work ordered after it on that
    stream, and nothing outlives the call (a per-stream cached workspace was allocated in a cudagraph-tree pool
    during warm-up, which those trees refuse); two threads on two streams each get their own."""
    if torch._C._cuda_getDevice() == plan.device_index:  # raw_alloc allocates on the current device
        return torch._C._cuda_cudaCachingAllocator_raw_alloc(plan.workspace_bytes, stream)
    with torch.cuda.device(plan.device_index):
        return torch._C._cuda_cudaCachingAllocator_raw_alloc(plan.workspace_bytes, stream)


def _plan_call(q, k_cache, indices, softmax_scale, **options) -> plan_cache.CachedPlan:
    """The full path: every argument check, the index check if asked, kernel loading, dispatch, the plan."""
    call = check_arguments(q, k_cache, indices, softmax_scale, **options)
    device = check_devices(call)
    if os.environ.get(paths.CHECK_ENV) == "1":
        check_indices(call)
    kernels = _kernels_for(device.index)
    choice = dispatch.choose(kernels.catalog, kernels.target, call.kv_format, call.h_q, call.batch_rows)
    split = kernels.kernels.get(choice.variant)
    if split is None:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"variant {choice.variant} ({choice.why}) is not loaded and cannot be loaded under "
                               f"CUDA-graph capture; make one eager call with the same setting before capturing")
        kernels.load([choice.variant])
        split = kernels.kernels[choice.variant]
    plan = make_plan(call, choice.variant, split.block_h, split.block_t, choice.num_splits, split.wave)
    return plan_cache.build(call, plan, kernels, split, device, choice.programmatic_combine)


def explain(batch: int, s_q: int, h_q: int, kv_format: str, *, target: str | None = None) -> str:
    """Which variant and split count a call of this shape would use, and why. target None: the current GPU's."""
    if target is None:
        target = catalog().target_for_capability(torch.cuda.get_device_capability())
    return dispatch.explain(batch * s_q, h_q, kv_format, target=target, catalog=catalog())


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata=None,
                           num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=True, indices=None,
                           attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                           extra_topk_length=None):
    """FlashMLA's sparse-decode signature: lse comes back [b, h_q, s_q]. block_table, cache_seqlens and the
    scheduler arguments are accepted for drop-in use and ignored (sparse decode addresses tokens by indices); the cache
    must be fp8 (is_fp8_kvcache=True)."""
    if indices is None:
        raise ValueError("indices is required: sparse_mla_aot implements FlashMLA's sparse decode only")
    if head_dim_v != D_V:
        raise ValueError(f"head_dim_v must be {D_V}; got {head_dim_v}")
    if causal:
        raise ValueError("causal=True has no meaning for sparse decode; pass causal=False")
    if not is_fp8_kvcache:
        raise ValueError(f"is_fp8_kvcache must be True: sparse_mla_aot reads fp8 KV caches only; "
                         f"got {is_fp8_kvcache!r}")
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** -0.5
    out, lse = sparse_mla_decode(q, k_cache, indices, softmax_scale, attn_sink=attn_sink, topk_length=topk_length,
                                 extra_k_cache=extra_k_cache, extra_indices=extra_indices_in_kvcache,
                                 extra_topk_length=extra_topk_length)
    return out, lse.transpose(1, 2)
