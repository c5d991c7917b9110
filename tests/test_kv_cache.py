"""Byte layouts and round trips of the packed fp8 KV caches (docs/design.md#kv-cache-layouts)."""

from __future__ import annotations

import pytest
import torch

from sparse_mla_aot.kv_cache import (
    dequantize_model1,
    dequantize_v32,
    gather_tokens,
    model1_page_bytes,
    quantize_model1,
    quantize_v32,
)

PAGE_SIZES = [61, 64]


def _latent(num_blocks: int, page_size: int, dims: int, seed: int = 0) -> torch.Tensor:
    """bf16 latent whose tokens span magnitudes 1e-3..1e3, so scales differ per token."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((num_blocks, page_size, dims), generator=gen)
    magnitude = 10.0 ** torch.randint(-3, 4, (num_blocks, page_size, 1), generator=gen).float()
    return (x * magnitude).to(torch.bfloat16)


def _expected_exponent(tiles: torch.Tensor) -> torch.Tensor:
    """ceil(log2(amax/448)) by brute force: the smallest k with 448 * 2^k >= amax."""
    amax = tiles.abs().amax(dim=-1).double()
    k = torch.floor(torch.log2(amax / 448.0)).to(torch.int64) - 1
    while True:
        short = 448.0 * torch.pow(2.0, k.double()) < amax
        if not bool(short.any()):
            return k
        k = k + short.to(torch.int64)


def _assert_e4m3_close(got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor, tile: int) -> None:
    """e4m3 keeps 3 mantissa bits: error <= 2^-4 |x| for normals, <= 2^-10 * scale for subnormals."""
    per_elem_scale = scale.repeat_interleave(tile, dim=-1)
    bound = 2.0**-4 * want.abs() + 2.0**-10 * per_elem_scale
    assert bool(((got - want).abs() <= bound).all())


@pytest.mark.parametrize("page_size", PAGE_SIZES)
def test_v32_round_trip_and_layout(page_size: int) -> None:
    latent = _latent(3, page_size, 576)
    cache = quantize_v32(latent)
    assert cache.shape == (3, page_size, 1, 656) and cache.dtype == torch.uint8 and cache.is_contiguous()
    x = latent.float()
    tiles = x[..., :512].unflatten(-1, (4, 128))

    scale = cache[:, :, 0, 512:528].contiguous().view(torch.float32)  # [nb, ps, 4]
    mantissa, exponent = torch.frexp(scale)
    assert bool((mantissa == 0.5).all()), "scales must be powers of two"
    assert torch.equal(exponent.to(torch.int64) - 1, _expected_exponent(tiles))

    want_nope = (tiles / scale.unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8).flatten(-2)
    assert torch.equal(cache[:, :, 0, :512], want_nope)
    assert torch.equal(cache[:, :, 0, 528:], latent[..., 512:].contiguous().view(torch.uint8))

    deq = dequantize_v32(cache)
    assert deq.shape == (3, page_size, 1, 576) and deq.dtype == torch.float32
    assert torch.equal(deq[:, :, 0, 512:], x[..., 512:])
    _assert_e4m3_close(deq[:, :, 0, :512], x[..., :512], scale, 128)


def test_v32_scales_cover_amax_tightly() -> None:
    latent = _latent(2, 64, 576, seed=1)
    cache = quantize_v32(latent)
    scale = cache[..., 512:528].contiguous().view(torch.float32).squeeze(2)
    amax = latent.float()[..., :512].unflatten(-1, (4, 128)).abs().amax(-1)
    ratio = amax / scale
    assert bool((ratio <= 448).all()) and bool((ratio > 224).all())


def test_v32_accepts_views_and_byte_dtypes() -> None:
    cache = quantize_v32(_latent(4, 16, 576))
    full = dequantize_v32(cache)
    assert torch.equal(dequantize_v32(cache[1:3, ::2]), full[1:3, ::2])
    assert torch.equal(dequantize_v32(cache.view(torch.float8_e4m3fn)), full)
    assert torch.equal(dequantize_v32(cache.view(torch.int8)[:, 3, 0]), full[:, 3, 0])


@pytest.mark.parametrize("quantize,dequantize,dims", [(quantize_v32, dequantize_v32, 576),
                                                      (quantize_model1, dequantize_model1, 512)])
def test_all_zero_tokens_stay_zero(quantize, dequantize, dims: int) -> None:
    latent = torch.zeros((2, 8, dims), dtype=torch.bfloat16)
    latent[1, 3] = 1.0
    deq = dequantize(quantize(latent)).reshape(2, 8, dims)
    assert not bool(deq.isnan().any())
    assert torch.equal(deq, latent.float())


def test_model1_page_bytes() -> None:
    assert model1_page_bytes(64) == 65 * 576  # 37,376 -> 37,440
    assert model1_page_bytes(61) == 62 * 576  # 35,624 -> 35,712
    assert model1_page_bytes(72) == 72 * 584  # 42,048 is already a multiple of 576
    with pytest.raises(ValueError, match="page_size"):
        model1_page_bytes(0)


@pytest.mark.parametrize("page_size", PAGE_SIZES)
def test_model1_round_trip_and_layout(page_size: int) -> None:
    num_blocks = 3
    latent = _latent(num_blocks, page_size, 512)
    cache = quantize_model1(latent)
    page_bytes = model1_page_bytes(page_size)
    assert cache.shape == (num_blocks, page_size, 1, 584) and cache.dtype == torch.uint8
    assert cache.stride() == (page_bytes, 584, 584, 1)
    assert cache.untyped_storage().nbytes() == num_blocks * page_bytes
    assert not cache.is_contiguous()  # pages are padded: neither page size fills its block exactly

    raw = torch.frombuffer(bytearray(bytes(cache.untyped_storage())), dtype=torch.uint8)
    pages = raw.view(num_blocks, page_bytes)
    records = pages[:, : page_size * 576].view(num_blocks, page_size, 576)
    scale_records = pages[:, page_size * 576 : page_size * 584].view(num_blocks, page_size, 8)
    assert bool((pages[:, page_size * 584 :] == 0).all()), "page padding must be zero"
    assert bool((scale_records[..., 7] == 0).all()), "scale record pad byte must be zero"

    x = latent.float()
    tiles = x[..., :448].unflatten(-1, (7, 64))
    exponent = _expected_exponent(tiles)
    assert torch.equal(scale_records[..., :7].to(torch.int64), exponent + 127)
    scale = torch.pow(2.0, exponent.double()).float()
    want_nope = (tiles / scale.unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8).flatten(-2)
    assert torch.equal(records[..., :448], want_nope)
    assert torch.equal(records[..., 448:], latent[..., 448:].contiguous().view(torch.uint8))

    deq = dequantize_model1(cache)
    assert deq.shape == (num_blocks, page_size, 512) and deq.dtype == torch.float32
    assert torch.equal(deq[..., 448:], x[..., 448:])
    _assert_e4m3_close(deq[..., :448], x[..., :448], scale, 64)


def test_model1_view_rows_are_not_records() -> None:
    """Token 1's 584 view bytes are not its record: the reader must follow the page layout."""
    latent = _latent(1, 4, 512)
    cache = quantize_model1(latent)
    naive = cache[0, 1, 0, 448:576].contiguous().view(torch.bfloat16)
    assert not torch.equal(naive, latent[0, 1, 448:])
    assert torch.equal(dequantize_model1(cache)[0, 1, 448:], latent[0, 1, 448:].float())


def test_model1_reads_offset_and_block_stride() -> None:
    page_size = 61
    cache = quantize_model1(_latent(4, page_size, 512))
    full = dequantize_model1(cache)
    # A slice starts at a storage offset of one page block.
    assert cache[1:3].storage_offset() == model1_page_bytes(page_size)
    assert torch.equal(dequantize_model1(cache[1:3]), full[1:3])
    assert torch.equal(dequantize_model1(cache.view(torch.float8_e4m3fn)), full)
    # Every other block: block stride of two page blocks.
    assert torch.equal(dequantize_model1(cache[::2]), full[::2])

    # A cache whose blocks sit in a larger pool (extra bytes between pages).
    page_bytes = model1_page_bytes(page_size)
    pool_stride = page_bytes + 1000
    pool = torch.full((4 * pool_stride,), 0xAB, dtype=torch.uint8)
    src = torch.as_strided(cache, (4, page_bytes), (page_bytes, 1), 0)
    pool.view(4, pool_stride)[:, :page_bytes] = src
    wide = torch.as_strided(pool, (4, page_size, 1, 584), (pool_stride, 584, 584, 1))
    assert torch.equal(dequantize_model1(wide), full)


def test_model1_rejects_overlapping_blocks() -> None:
    cache = quantize_model1(_latent(2, 64, 512))
    overlapping = torch.as_strided(cache, (2, 64, 1, 584), (584, 584, 584, 1))
    with pytest.raises(ValueError, match=r"block stride must be >= page_size\*584"):
        dequantize_model1(overlapping)


@pytest.mark.parametrize("kv_format,page_size", [("v32", 61), ("v32", 64), ("model1", 61), ("model1", 64)])
def test_gather_tokens_matches_full_dequantize(kv_format: str, page_size: int) -> None:
    num_blocks = 3
    if kv_format == "v32":
        latent = _latent(num_blocks, page_size, 576)
        cache = quantize_v32(latent)
        full = dequantize_v32(cache).reshape(-1, 576)
    else:
        latent = _latent(num_blocks, page_size, 512)
        cache = quantize_model1(latent)
        full = dequantize_model1(cache).reshape(-1, 512)
    idx = torch.randint(0, num_blocks * page_size, (2, 3, 17), dtype=torch.int32,
                        generator=torch.Generator().manual_seed(7))
    idx[0, 0, 0] = num_blocks * page_size - 1
    got = gather_tokens(cache, kv_format, idx)
    assert got.shape == (2, 3, 17, full.shape[-1])
    assert torch.equal(got, full[idx.long()])
    with pytest.raises(ValueError, match="flat_indices"):
        gather_tokens(cache, kv_format, torch.tensor([num_blocks * page_size]))
    with pytest.raises(ValueError, match="flat_indices"):
        gather_tokens(cache, kv_format, torch.tensor([-1]))


def test_errors_name_argument_expected_and_got() -> None:
    with pytest.raises(ValueError, match=r"latent must be \[num_blocks, page_size, 576\] for v32; got \[4, 64, 512\]"):
        quantize_v32(torch.zeros(4, 64, 512))
    with pytest.raises(ValueError, match=r"latent must be \[num_blocks, page_size, 512\] for model1; got \[2, 576\]"):
        quantize_model1(torch.zeros(2, 576))
    with pytest.raises(ValueError, match="finite"):
        quantize_v32(torch.full((1, 1, 576), float("inf")))
    with pytest.raises(ValueError, match=r"cache must be \[\.\.\., 656\] for v32; got \[2, 584\]"):
        dequantize_v32(torch.zeros(2, 584, dtype=torch.uint8))
    with pytest.raises(ValueError, match="byte view"):
        dequantize_v32(torch.zeros(2, 656))
    with pytest.raises(ValueError, match=r"k_cache must be \[num_blocks, page_size, 1, 584\]"):
        dequantize_model1(torch.zeros(2, 64, 1, 656, dtype=torch.uint8))
    with pytest.raises(ValueError, match="kv_format"):
        gather_tokens(torch.zeros(1, 1, 1, 656, dtype=torch.uint8), "v4", torch.tensor([0]))
