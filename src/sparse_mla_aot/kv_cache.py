"""Pack a latent into the fp8 KV-cache layouts (docs/design.md#kv-cache-layouts), and unpack it again.

Two layouts, both one latent vector per token:

- ``v32`` (656 bytes/token, contiguous per token): 512 e4m3 values, 4 float32 scales (one per 128
  values), 64 bfloat16 rope values.
- ``model1`` (584 bytes/token, page-blocked): a page block holds ``page_size`` records of 576 bytes
  (448 e4m3 values, 64 bfloat16 values), then ``page_size`` records of 8 bytes (7 UE8M0 scales, one
  per 64 values, and a zero pad byte), padded up to a multiple of 576 bytes.

Scales are powers of two, ``2^ceil(log2(amax / 448))``, so dividing by them is exact and the only
rounding is the e4m3 conversion. The quantizers build test inputs and the dequantizers feed the
reference; neither is on the serving path.
"""

from __future__ import annotations

import torch

from sparse_mla_aot.contract import D_QK, LAYOUTS

E4M3_MAX = 448.0

# Byte offsets and widths come from the layouts the kernels are rendered from.
_V32 = LAYOUTS["v32"]
_MODEL1 = LAYOUTS["model1"]
UE8M0_BIAS = 127

# Smallest scale exponent used: 2^-126 is the smallest normal float32, and keeps an all-zero tile's
# scale positive (so nothing divides by zero) and its UE8M0 byte (1) valid.
MIN_SCALE_EXPONENT = -126

_BYTE_VIEW_DTYPES = (torch.uint8, torch.int8, torch.float8_e4m3fn)


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _check_latent(latent: torch.Tensor, dims: int, kv_format: str) -> None:
    if not isinstance(latent, torch.Tensor):
        raise ValueError(f"latent must be a torch.Tensor; got {type(latent).__name__}")
    if latent.dim() != 3 or latent.shape[-1] != dims:
        raise ValueError(
            f"latent must be [num_blocks, page_size, {dims}] for {kv_format}; got {_shape(latent)}"
        )
    if not latent.dtype.is_floating_point:
        raise ValueError(f"latent must be a floating-point tensor (bf16 or fp32); got {latent.dtype}")
    if not bool(torch.isfinite(latent).all()):
        raise ValueError("latent must be finite; got inf or NaN values (they have no fp8 encoding)")


def _as_bytes(cache: torch.Tensor, name: str) -> torch.Tensor:
    """Reinterpret a 1-byte cache view (uint8 / int8 / float8_e4m3fn) as uint8 without copying."""
    if not isinstance(cache, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(cache).__name__}")
    if cache.dtype not in _BYTE_VIEW_DTYPES:
        raise ValueError(f"{name} must be a uint8, int8 or float8_e4m3fn byte view; got {cache.dtype}")
    return cache.view(torch.uint8)


def _scale_exponent(tiles: torch.Tensor) -> torch.Tensor:
    """Per-tile exponent k with 2^k the smallest power of two >= amax/448 (floored at 2^-126).

    Computed in float64 with frexp so it is exact: float32 division and log2 could round amax/448
    down onto a power of two and leave a scaled value just above 448.
    """
    amax = tiles.abs().amax(dim=-1).double()
    amax = amax.clamp_min(E4M3_MAX * 2.0**MIN_SCALE_EXPONENT)
    mantissa, exponent = torch.frexp(amax / E4M3_MAX)  # amax/448 = mantissa * 2^exponent, mantissa in [0.5, 1)
    return (exponent - (mantissa == 0.5).to(exponent.dtype)).to(torch.int32)


def _pow2(exponent: torch.Tensor) -> torch.Tensor:
    return torch.ldexp(torch.ones_like(exponent, dtype=torch.float32), exponent)


def _to_e4m3_bytes(tiles: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """tiles [..., n_tiles, tile] / scale [..., n_tiles] -> e4m3 bytes [..., n_tiles * tile]."""
    scaled = tiles / scale.unsqueeze(-1)
    return scaled.to(torch.float8_e4m3fn).view(torch.uint8).flatten(-2)


def _from_e4m3_bytes(nope_bytes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """e4m3 bytes [..., n_tiles * tile] * scale [..., n_tiles] -> float32 [..., n_tiles * tile]."""
    values = nope_bytes.view(torch.float8_e4m3fn).float()
    tiles = values.unflatten(-1, (scale.shape[-1], -1))
    return (tiles * scale.unsqueeze(-1)).flatten(-2)


def _bf16_bytes(values: torch.Tensor) -> torch.Tensor:
    return values.to(torch.bfloat16).contiguous().view(torch.uint8)


def _from_bf16_bytes(raw: torch.Tensor) -> torch.Tensor:
    return raw.contiguous().view(torch.bfloat16).float()


def quantize_v32(latent: torch.Tensor) -> torch.Tensor:
    """Pack a latent [num_blocks, page_size, 576] into the v32 cache [num_blocks, page_size, 1, 656] uint8.

    Builds the cache bytes a DeepSeek-V3.2 engine would hold, so kernels can be tested on them.
    """
    _check_latent(latent, _V32.d_qk, "v32")
    x = latent.float()
    tiles = x[..., :_V32.nope_dims].unflatten(-1, (len(_V32.scaled_chunks), _V32.tile))
    scale = _pow2(_scale_exponent(tiles))
    packed = torch.cat(
        [
            _to_e4m3_bytes(tiles, scale),
            scale.contiguous().view(torch.uint8),
            _bf16_bytes(x[..., _V32.nope_dims:]),
        ],
        dim=-1,
    )
    return packed.unsqueeze(2)


def dequantize_v32(cache: torch.Tensor) -> torch.Tensor:
    """Unpack v32 token bytes [..., 656] (any leading shape, any view) into float32 [..., 576]."""
    raw = _as_bytes(cache, "cache")
    if raw.dim() < 1 or raw.shape[-1] != _V32.bytes_per_token:
        raise ValueError(f"cache must be [..., {_V32.bytes_per_token}] for v32; got {_shape(cache)}")
    scale = raw[..., _V32.scaled_chunks[0].scale_byte:_V32.rope.byte].contiguous().view(torch.float32)
    nope = _from_e4m3_bytes(raw[..., :_V32.nope_dims], scale)
    rope = _from_bf16_bytes(raw[..., _V32.rope.byte:])
    return torch.cat([nope, rope], dim=-1)


def model1_page_bytes(page_size: int) -> int:
    """Bytes of one model1 page block: page_size * 584 rounded up to a multiple of 576."""
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"page_size must be a positive int; got {page_size!r}")
    raw = page_size * _MODEL1.bytes_per_token
    return -(-raw // _MODEL1.page_align) * _MODEL1.page_align


def quantize_model1(latent: torch.Tensor) -> torch.Tensor:
    """Pack a latent [num_blocks, page_size, 512] into a model1 cache.

    Returns the view FlashMLA-style APIs pass around: uint8 [num_blocks, page_size, 1, 584] with
    strides (page_bytes, 584, 584, 1) over a flat buffer of num_blocks * page_bytes bytes. Its
    584-byte rows are not token records (the page is blocked); only shape and block stride matter.
    Do not `.contiguous()`, `.clone()` or `.to(device)` it: those copy the rows and lose the layout.
    """
    _check_latent(latent, _MODEL1.d_qk, "model1")
    num_blocks, page_size, _ = latent.shape
    page_bytes = model1_page_bytes(page_size)
    x = latent.float()
    tiles = x[..., :_MODEL1.nope_dims].unflatten(-1, (len(_MODEL1.scaled_chunks), _MODEL1.tile))
    exponent = _scale_exponent(tiles)
    records = torch.cat(
        [_to_e4m3_bytes(tiles, _pow2(exponent)), _bf16_bytes(x[..., _MODEL1.nope_dims:])], dim=-1
    )
    scale_records = torch.zeros(
        (num_blocks, page_size, _MODEL1.scale_record_bytes), dtype=torch.uint8, device=latent.device
    )
    scale_records[..., :len(_MODEL1.scaled_chunks)] = (exponent + UE8M0_BIAS).to(torch.uint8)

    buffer = torch.zeros((num_blocks, page_bytes), dtype=torch.uint8, device=latent.device)
    scales_at = page_size * _MODEL1.record_bytes
    buffer[:, :scales_at] = records.flatten(1)
    buffer[:, scales_at : scales_at + page_size * _MODEL1.scale_record_bytes] = scale_records.flatten(1)
    return torch.as_strided(
        buffer.flatten(),
        (num_blocks, page_size, 1, _MODEL1.bytes_per_token),
        (page_bytes, _MODEL1.bytes_per_token, _MODEL1.bytes_per_token, 1),
    )


def _model1_records(cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Byte views of a model1 cache: records [nb, ps, 576] and scale bytes [nb, ps, 7].

    Reads the page blocks from the cache's storage at its storage_offset with block stride
    stride(0), the way a kernel would; the view's own 584-byte rows are not used.
    """
    raw = _as_bytes(cache, "k_cache")
    if raw.dim() != 4 or raw.shape[2] != 1 or raw.shape[3] != _MODEL1.bytes_per_token:
        raise ValueError(
            f"k_cache must be [num_blocks, page_size, 1, {_MODEL1.bytes_per_token}] for model1; "
            f"got {_shape(cache)}"
        )
    num_blocks, page_size = raw.shape[0], raw.shape[1]
    block_stride = raw.stride(0)
    page_used = page_size * _MODEL1.bytes_per_token
    if num_blocks > 1 and block_stride < page_used:
        raise ValueError(
            f"k_cache block stride must be >= page_size*{_MODEL1.bytes_per_token} = {page_used} bytes for model1; "
            f"got stride(0) = {block_stride}"
        )
    # The view spans offset + (num_blocks-1)*stride(0) + page_size*584 bytes, exactly the bytes
    # read here, so torch's own bounds check on the view covers this read.
    pages = torch.as_strided(raw, (num_blocks, page_used), (block_stride, 1), raw.storage_offset())
    scales_at = page_size * _MODEL1.record_bytes
    records = pages[:, :scales_at].unflatten(1, (page_size, _MODEL1.record_bytes))
    scale_bytes = pages[:, scales_at:].unflatten(1, (page_size, _MODEL1.scale_record_bytes))
    return records, scale_bytes[..., :len(_MODEL1.scaled_chunks)]


def _dequantize_model1_records(records: torch.Tensor, scale_bytes: torch.Tensor) -> torch.Tensor:
    """records [..., 576] + UE8M0 bytes [..., 7] -> float32 latent [..., 512]."""
    scale = _pow2(scale_bytes.to(torch.int32) - UE8M0_BIAS)
    nope = _from_e4m3_bytes(records[..., :_MODEL1.nope_dims], scale)
    rope = _from_bf16_bytes(records[..., _MODEL1.nope_dims:])
    return torch.cat([nope, rope], dim=-1)


def dequantize_model1(cache: torch.Tensor) -> torch.Tensor:
    """Unpack a model1 cache view (as made by quantize_model1) into float32 [num_blocks, page_size, 512]."""
    return _dequantize_model1_records(*_model1_records(cache))


def gather_tokens(cache: torch.Tensor, kv_format: str, flat_indices: torch.Tensor) -> torch.Tensor:
    """Dequantized latents float32 [..., d] of the tokens at flat_indices (page_block * page_size + offset).

    Only the requested tokens are unpacked, so the reference stays cheap on large caches.
    d = 576 for v32, 512 for model1. Every index must lie in the cache (mask -1 before calling).
    """
    if kv_format not in D_QK:
        raise ValueError(f"kv_format must be one of {sorted(D_QK)}; got {kv_format!r}")
    if not isinstance(flat_indices, torch.Tensor) or flat_indices.dtype.is_floating_point:
        raise ValueError("flat_indices must be an integer torch.Tensor")
    if kv_format == "v32":
        raw = _as_bytes(cache, "k_cache")
        if raw.dim() != 4 or raw.shape[2] != 1 or raw.shape[3] != _V32.bytes_per_token:
            raise ValueError(
                f"k_cache must be [num_blocks, page_size, 1, {_V32.bytes_per_token}] for v32; got {_shape(cache)}"
            )
        num_blocks, page_size = raw.shape[0], raw.shape[1]
    else:
        records, scale_bytes = _model1_records(cache)
        num_blocks, page_size = records.shape[0], records.shape[1]
    num_tokens = num_blocks * page_size
    idx = flat_indices.to(device=cache.device, dtype=torch.int64)
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= num_tokens):
        raise ValueError(
            f"flat_indices must lie in [0, {num_tokens}) (num_blocks {num_blocks} * page_size "
            f"{page_size}); got values in [{int(idx.min())}, {int(idx.max())}]"
        )
    block, offset = idx // page_size, idx % page_size
    if kv_format == "v32":
        return dequantize_v32(raw[block, offset, 0])
    return _dequantize_model1_records(records[block, offset], scale_bytes[block, offset])
