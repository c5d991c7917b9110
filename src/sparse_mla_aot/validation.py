"""Argument checks of sparse_mla_decode (docs/design.md#the-operation). Dtype, shape, stride and option checks run
before the device check, so every rule is testable with CPU tensors; each failure names the argument, what was
expected and what came."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sparse_mla_aot.contract import BYTES_PER_TOKEN, D_QK, D_V, LAYOUTS, SUPPORTED_H_Q, TOKEN_GRANULE
from sparse_mla_aot.kv_cache import model1_page_bytes

KV_FORMAT_BY_D_QK = {d_qk: kv_format for kv_format, d_qk in D_QK.items()}
CACHE_DTYPES = (torch.uint8, torch.float8_e4m3fn, torch.int8)
MAX_TOPK = 16384
ALIGNMENT = 16


@dataclass(frozen=True)
class DecodeCall:
    """A validated call: the tensors plus every shape the launch plan depends on (never tensor values)."""

    q: torch.Tensor
    k_cache: torch.Tensor
    indices: torch.Tensor
    softmax_scale: float
    kv_format: str
    batch: int
    s_q: int
    h_q: int
    topk: int
    page_size: int
    block_stride: int
    attn_sink: torch.Tensor | None
    topk_length: torch.Tensor | None
    extra_k_cache: torch.Tensor | None
    extra_indices: torch.Tensor | None
    extra_topk_length: torch.Tensor | None
    extra_topk: int
    extra_page_size: int
    extra_block_stride: int
    out: torch.Tensor | None
    lse: torch.Tensor | None

    @property
    def batch_rows(self) -> int:
        return self.batch * self.s_q


def _describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"


def _require_tensor(name: str, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    return value


def _require(name: str, t: torch.Tensor, dtype: torch.dtype, shape: tuple, what: str) -> None:
    if t.dtype != dtype or tuple(t.shape) != shape:
        raise ValueError(f"{name} must be {what} = {str(dtype).removeprefix('torch.')} {list(shape)}; "
                         f"got {_describe(t)}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous; got strides {list(t.stride())} for shape {list(t.shape)}")
    if t.data_ptr() % ALIGNMENT:
        raise ValueError(f"{name} must start at a {ALIGNMENT}-byte aligned address (the kernels were compiled "
                         f"for it); got data_ptr % {ALIGNMENT} = {t.data_ptr() % ALIGNMENT}")


def _token_list(name: str, t: torch.Tensor, batch: int, s_q: int) -> int:
    if t.dtype != torch.int32 or t.dim() != 3 or tuple(t.shape[:2]) != (batch, s_q):
        raise ValueError(f"{name} must be int32 [b, s_q, topk] = int32 [{batch}, {s_q}, topk]; got {_describe(t)}")
    count = t.shape[2]
    if count < TOKEN_GRANULE or count % TOKEN_GRANULE or count > MAX_TOPK:
        raise ValueError(f"{name}: topk must be a multiple of {TOKEN_GRANULE} in [{TOKEN_GRANULE}, {MAX_TOPK}] "
                         f"(mask a shorter list with the length argument); got {count}")
    _require(name, t, torch.int32, tuple(t.shape), "int32 [b, s_q, topk]")
    return count


def _cache_geometry(name: str, cache: torch.Tensor, kv_format: str) -> tuple[int, int]:
    """Returns (page_size, block_stride in bytes) after checking the layout (docs/design.md#kv-cache-layouts)."""
    per_token = BYTES_PER_TOKEN[kv_format]
    if cache.dtype not in CACHE_DTYPES:
        raise ValueError(f"{name} must be a uint8, float8_e4m3fn or int8 view of the packed cache; got "
                         f"{_describe(cache)}")
    if cache.dim() != 4 or cache.shape[2] != 1 or cache.shape[3] != per_token:
        raise ValueError(f"{name} must be [num_blocks, page_size, 1, {per_token}] for kv_format {kv_format!r}; "
                         f"got {_describe(cache)}")
    num_blocks, page_size = cache.shape[0], cache.shape[1]
    if num_blocks < 1 or page_size < 1:
        raise ValueError(f"{name} must hold at least one page of one token; got {_describe(cache)}")
    block_stride = cache.stride(0)
    if cache.stride(3) != 1:
        raise ValueError(f"{name} must have unit stride in its last dimension; got strides {list(cache.stride())}")
    if kv_format == "v32":
        if cache.stride(1) != per_token or block_stride < page_size * per_token:
            raise ValueError(f"{name}: v32 tokens must be contiguous {per_token}-byte records inside a page "
                             f"(stride(1) = {per_token}, stride(0) >= page_size*{per_token} = "
                             f"{page_size * per_token}); got strides {list(cache.stride())}")
    else:
        page_bytes = model1_page_bytes(page_size)
        if block_stride != page_bytes:
            raise ValueError(f"{name}: a model1 page block of page_size {page_size} is {page_size}*{per_token} "
                             f"bytes padded to a multiple of {LAYOUTS[kv_format].page_align} = {page_bytes}, so "
                             f"stride(0) must be {page_bytes}; got {block_stride}")
    if block_stride % ALIGNMENT or cache.data_ptr() % ALIGNMENT:
        raise ValueError(f"{name}: page blocks must be {ALIGNMENT}-byte aligned; got stride(0) = {block_stride}, "
                         f"data_ptr % {ALIGNMENT} = {cache.data_ptr() % ALIGNMENT}")
    return page_size, block_stride


def _lengths(name: str, t, batch: int) -> torch.Tensor | None:
    if t is None:
        return None
    _require(name, _require_tensor(name, t), torch.int32, (batch,), "int32 [b]")
    return t


def check_arguments(q, k_cache, indices, softmax_scale, *, kv_format=None, attn_sink=None, topk_length=None,
                    extra_k_cache=None, extra_indices=None, extra_topk_length=None, out=None,
                    lse=None) -> DecodeCall:
    """Every dtype, shape, stride and option check of docs/design.md#the-operation (devices are check_devices')."""
    q = _require_tensor("q", q)
    if q.dtype != torch.bfloat16 or q.dim() != 4:
        raise ValueError(f"q must be bfloat16 [b, s_q, h_q, d_qk]; got {_describe(q)}")
    batch, s_q, h_q, d_qk = q.shape
    if d_qk not in KV_FORMAT_BY_D_QK:
        raise ValueError(f"q: d_qk must be {' or '.join(f'{d} ({f})' for f, d in D_QK.items())}; got {d_qk}")
    if kv_format is None:
        kv_format = KV_FORMAT_BY_D_QK[d_qk]
    elif not isinstance(kv_format, str) or kv_format not in BYTES_PER_TOKEN:
        raise ValueError(f"kv_format must be 'v32', 'model1' or None; got {kv_format!r}")
    elif KV_FORMAT_BY_D_QK[d_qk] != kv_format:
        raise ValueError(f"kv_format {kv_format!r} needs d_qk {D_QK[kv_format]}; q has d_qk {d_qk}")
    if h_q not in SUPPORTED_H_Q:
        raise ValueError(f"q: h_q must be one of {SUPPORTED_H_Q}; got {h_q}")
    if batch < 1 or s_q < 1:
        raise ValueError(f"q: b and s_q must be >= 1; got {_describe(q)}")
    _require("q", q, torch.bfloat16, tuple(q.shape), "bfloat16 [b, s_q, h_q, d_qk]")
    if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, (int, float)):
        raise TypeError(f"softmax_scale must be a float; got {type(softmax_scale).__name__}")
    try:
        scale = float(softmax_scale)
    except OverflowError:
        raise ValueError("softmax_scale must be finite and > 0; got an integer too large for a float") from None
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"softmax_scale must be finite and > 0; got {softmax_scale}")

    page_size, block_stride = _cache_geometry("k_cache", _require_tensor("k_cache", k_cache), kv_format)
    topk = _token_list("indices", _require_tensor("indices", indices), batch, s_q)
    topk_length = _lengths("topk_length", topk_length, batch)

    if (extra_k_cache is None) != (extra_indices is None):
        raise ValueError("extra_k_cache and extra_indices go together; got only "
                         + ("extra_k_cache" if extra_indices is None else "extra_indices"))
    if extra_topk_length is not None and extra_indices is None:
        raise ValueError("extra_topk_length needs extra_k_cache and extra_indices; got neither")
    extra_topk, extra_page_size, extra_block_stride = 0, 1, 0
    if extra_indices is not None:
        extra_page_size, extra_block_stride = _cache_geometry(
            "extra_k_cache", _require_tensor("extra_k_cache", extra_k_cache), kv_format)
        extra_topk = _token_list("extra_indices", _require_tensor("extra_indices", extra_indices), batch, s_q)
    extra_topk_length = _lengths("extra_topk_length", extra_topk_length, batch)

    if attn_sink is not None:
        _require("attn_sink", _require_tensor("attn_sink", attn_sink), torch.float32, (h_q,), "float32 [h_q]")
    if out is not None:
        _require("out", _require_tensor("out", out), torch.bfloat16, (batch, s_q, h_q, D_V),
                 f"bfloat16 [b, s_q, h_q, {D_V}]")
    if lse is not None:
        _require("lse", _require_tensor("lse", lse), torch.float32, (batch, s_q, h_q), "float32 [b, s_q, h_q]")
    return DecodeCall(q, k_cache, indices, scale, kv_format, batch, s_q, h_q, topk, page_size,
                      block_stride, attn_sink, topk_length, extra_k_cache, extra_indices, extra_topk_length,
                      extra_topk, extra_page_size, extra_block_stride, out, lse)


def check_devices(call: DecodeCall, device_type: str = "cuda") -> torch.device:
    """All tensors on one CUDA device; returns it. (device_type: tests run the op's path on "cpu" tensors.)"""
    device = call.q.device
    if device.type != device_type:
        raise ValueError(f"q must be a {device_type.upper()} tensor; got device {device}")
    for name in ("k_cache", "indices", "topk_length", "extra_k_cache", "extra_indices", "extra_topk_length",
                 "attn_sink", "out", "lse"):
        t = getattr(call, name)
        if t is not None and t.device != device:
            raise ValueError(f"{name} must be on q's device {device}; got {t.device}")
    return device
