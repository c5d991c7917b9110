"""Argument checks of sparse_mla_decode (docs/design.md#the-operation): every rule is exercised with CPU tensors,
and each failure must be the right exception type with a message naming the argument, what was expected and what
came. A call that passes every check on CPU tensors must then fail on the device check
(docs/design.md#runtime-rules), before any driver or native-launcher use."""
from __future__ import annotations

import dataclasses
import math
import re
import sys
import types

import pytest
import torch

import sparse_mla_aot
from sparse_mla_aot.reference import make_inputs
from sparse_mla_aot.validation import check_arguments, check_devices

B, S_Q, H_Q, TOPK = 2, 1, 16, 128


def inputs(kv_format: str = "v32", **kw) -> dict:
    kw.setdefault("page_size", 64)
    return make_inputs(B, S_Q, H_Q, TOPK, kv_format, **kw)


def full_inputs(kv_format: str) -> dict:
    """Every option present: sink, topk_length, the extra set with its lengths, out and lse."""
    args = make_inputs(B, S_Q, H_Q, TOPK, kv_format, page_size=64, extra_topk=64, extra_page_size=16,
                       with_sink=True, with_topk_length=True)
    args["out"] = torch.empty((B, S_Q, H_Q, 512), dtype=torch.bfloat16)
    args["lse"] = torch.empty((B, S_Q, H_Q), dtype=torch.float32)
    return args


def call(args: dict, **overrides):
    merged = {**args, **overrides}
    return check_arguments(**merged)


def raises(exc, message):
    return pytest.raises(exc, match=message)


# ---------------------------------------------------------------------------------------------- sanity


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_valid_inputs_pass_check_arguments(kv_format):
    c = call(full_inputs(kv_format))
    assert c.kv_format == kv_format
    assert (c.batch, c.s_q, c.h_q, c.topk, c.extra_topk) == (B, S_Q, H_Q, TOPK, 64)


# ---------------------------------------------------------------------------------------------- q


def test_q_not_a_tensor_is_type_error():
    args = inputs()
    with raises(TypeError, r"q must be a torch\.Tensor; got list"):
        call(args, q=[[1.0]])


def test_q_wrong_dtype():
    args = inputs()
    with raises(ValueError, r"q must be bfloat16 \[b, s_q, h_q, d_qk\]; got float32 \[2, 1, 16, 576\]"):
        call(args, q=args["q"].float())


def test_q_wrong_rank():
    args = inputs()
    with raises(ValueError, r"q must be bfloat16 \[b, s_q, h_q, d_qk\]; got bfloat16 \[2, 16, 576\]"):
        call(args, q=args["q"][:, 0])


def test_q_wrong_d_qk():
    args = inputs()
    with raises(ValueError, r"q: d_qk must be 576 \(v32\) or 512 \(model1\); got 128"):
        call(args, q=args["q"][..., :128].contiguous())


def test_q_unsupported_h_q():
    args = inputs()
    q = torch.zeros((B, S_Q, 12, 576), dtype=torch.bfloat16)  # only the shape is checked
    with raises(ValueError, r"q: h_q must be one of \(8, 16, 32, 64, 128\); got 12"):
        call(args, q=q)


def test_q_empty_batch():
    args = inputs()
    q = torch.empty((0, S_Q, H_Q, 576), dtype=torch.bfloat16)
    with raises(ValueError, r"q: b and s_q must be >= 1; got bfloat16 \[0, 1, 16, 576\]"):
        call(args, q=q)


def test_q_non_contiguous():
    args = inputs()
    q = torch.empty((B, S_Q, H_Q, 2 * 576), dtype=torch.bfloat16)[..., :576]
    assert not q.is_contiguous()
    with raises(ValueError, r"q must be contiguous; got strides \[18432, 18432, 1152, 1\]"):
        call(args, q=q)


def test_q_misaligned():
    args = inputs()
    flat = torch.empty(B * S_Q * H_Q * 576 + 1, dtype=torch.bfloat16)[1:]
    q = flat.view(B, S_Q, H_Q, 576)
    assert q.is_contiguous() and q.data_ptr() % 16 != 0
    with raises(ValueError, r"q must start at a 16-byte aligned address .*got data_ptr % 16 = \d+"):
        call(args, q=q)


# ---------------------------------------------------------------------------------------------- kv_format


def test_kv_format_mismatching_d_qk():
    args = inputs("v32")
    with raises(ValueError, r"kv_format 'model1' needs d_qk 512; q has d_qk 576"):
        call(args, kv_format="model1")
    args = inputs("model1")
    with raises(ValueError, r"kv_format 'v32' needs d_qk 576; q has d_qk 512"):
        call(args, kv_format="v32")


def test_kv_format_unknown():
    args = inputs()
    with raises(ValueError, r"kv_format must be 'v32', 'model1' or None; got 'fp8'"):
        call(args, kv_format="fp8")


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_kv_format_inferred_from_d_qk(kv_format):
    args = inputs(kv_format)
    assert call(args, kv_format=None).kv_format == kv_format


# ---------------------------------------------------------------------------------------------- softmax_scale


@pytest.mark.parametrize("scale, got", [(True, "bool"), ("0.1", "str"), (None, "NoneType"),
                                        (torch.tensor(0.1), "Tensor")])
def test_softmax_scale_wrong_type(scale, got):
    args = inputs()
    with raises(TypeError, rf"softmax_scale must be a float; got {got}"):
        call(args, softmax_scale=scale)


@pytest.mark.parametrize("scale, shown", [(0, "0"), (0.0, "0.0"), (-1, "-1"), (math.inf, "inf"),
                                          (-math.inf, "-inf"), (math.nan, "nan")])
def test_softmax_scale_bad_value(scale, shown):
    args = inputs()
    with raises(ValueError, rf"softmax_scale must be finite and > 0; got {re.escape(shown)}$"):
        call(args, softmax_scale=scale)


def test_softmax_scale_int_accepted_as_float():
    c = call(inputs(), softmax_scale=1)
    assert c.softmax_scale == 1.0 and isinstance(c.softmax_scale, float)


# ---------------------------------------------------------------------------------------------- k_cache


def test_k_cache_not_a_tensor():
    with raises(TypeError, r"k_cache must be a torch\.Tensor; got NoneType"):
        call(inputs(), k_cache=None)


def test_k_cache_wrong_dtype():
    args = inputs()
    cache = torch.zeros((4, 64, 1, 656), dtype=torch.float32)
    with raises(ValueError, r"k_cache must be a uint8, float8_e4m3fn or int8 view of the packed cache; "
                            r"got float32 \[4, 64, 1, 656\]"):
        call(args, k_cache=cache)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.float8_e4m3fn])
def test_k_cache_byte_views_accepted(dtype):
    args = inputs()
    assert call(args, k_cache=args["k_cache"].view(dtype)).page_size == 64


def test_k_cache_wrong_last_dim():
    args = inputs("v32")
    cache = torch.zeros((4, 64, 1, 584), dtype=torch.uint8)
    with raises(ValueError, r"k_cache must be \[num_blocks, page_size, 1, 656\] for kv_format 'v32'; "
                            r"got uint8 \[4, 64, 1, 584\]"):
        call(args, k_cache=cache)
    args = inputs("model1")
    cache = torch.zeros((4, 64, 1, 656), dtype=torch.uint8)
    with raises(ValueError, r"k_cache must be \[num_blocks, page_size, 1, 584\] for kv_format 'model1'; "
                            r"got uint8 \[4, 64, 1, 656\]"):
        call(args, k_cache=cache)


def test_k_cache_wrong_rank():
    args = inputs("v32")
    cache = args["k_cache"][:, :, 0]
    with raises(ValueError, r"k_cache must be \[num_blocks, page_size, 1, 656\] for kv_format 'v32'; "
                            r"got uint8 \[4, 64, 656\]"):
        call(args, k_cache=cache)


def test_k_cache_v32_padded_token_stride():
    args = inputs("v32")
    cache = torch.zeros((4, 64, 1, 672), dtype=torch.uint8)[..., :656]
    assert cache.stride(1) == 672
    with raises(ValueError, r"k_cache: v32 tokens must be contiguous 656-byte records inside a page "
                            r"\(stride\(1\) = 656, .*got strides \[43008, 672, 672, 1\]"):
        call(args, k_cache=cache)


def test_k_cache_v32_padded_page_stride_is_accepted():
    """v32 pages may sit further apart than page_size*656 bytes (any 16-byte multiple)."""
    args = inputs("v32")
    stride = 64 * 656 + 64
    buffer = torch.zeros(4 * stride, dtype=torch.uint8)
    cache = torch.as_strided(buffer, (4, 64, 1, 656), (stride, 656, 656, 1))
    assert call(args, k_cache=cache).block_stride == stride


def test_k_cache_v32_unaligned_page_stride():
    args = inputs("v32")
    stride = 64 * 656 + 8
    buffer = torch.zeros(4 * stride, dtype=torch.uint8)
    cache = torch.as_strided(buffer, (4, 64, 1, 656), (stride, 656, 656, 1))
    with raises(ValueError, rf"k_cache: page blocks must be 16-byte aligned; got stride\(0\) = {stride}"):
        call(args, k_cache=cache)


def test_k_cache_misaligned_start():
    args = inputs("v32")
    cache = torch.zeros(4 * 64 * 656 + 1, dtype=torch.uint8)[1:].view(4, 64, 1, 656)
    with raises(ValueError, r"k_cache: page blocks must be 16-byte aligned; got stride\(0\) = 41984, "
                            r"data_ptr % 16 = \d+"):
        call(args, k_cache=cache)


def test_k_cache_model1_unpadded_block_stride():
    """The realistic mistake: .contiguous() on a model1 view packs pages at page_size*584 bytes."""
    args = inputs("model1")
    cache = args["k_cache"].contiguous()
    assert cache.stride(0) == 64 * 584
    with raises(ValueError, r"k_cache: a model1 page block of page_size 64 is 64\*584 bytes padded to a "
                            r"multiple of 576 = 37440, so stride\(0\) must be 37440; got 37376"):
        call(args, k_cache=cache)


def test_k_cache_model1_over_padded_block_stride():
    args = inputs("model1")
    stride = 37440 + 576
    buffer = torch.zeros(4 * stride, dtype=torch.uint8)
    cache = torch.as_strided(buffer, (4, 64, 1, 584), (stride, 584, 584, 1))
    with raises(ValueError, rf"stride\(0\) must be 37440; got {stride}"):
        call(args, k_cache=cache)


# ---------------------------------------------------------------------------------------------- indices


def test_indices_not_a_tensor():
    with raises(TypeError, r"indices must be a torch\.Tensor; got list"):
        call(inputs(), indices=[0, 1])


def test_indices_int64():
    args = inputs()
    with raises(ValueError, r"indices must be int32 \[b, s_q, topk\] = int32 \[2, 1, topk\]; "
                            r"got int64 \[2, 1, 128\]"):
        call(args, indices=args["indices"].long())


def test_indices_wrong_batch():
    args = inputs()
    with raises(ValueError, r"indices must be int32 \[b, s_q, topk\] = int32 \[2, 1, topk\]; "
                            r"got int32 \[1, 1, 128\]"):
        call(args, indices=args["indices"][:1].contiguous())


def test_indices_wrong_rank():
    args = inputs()
    with raises(ValueError, r"indices must be int32 \[b, s_q, topk\] = int32 \[2, 1, topk\]; got int32 \[2, 128\]"):
        call(args, indices=args["indices"][:, 0].contiguous())


@pytest.mark.parametrize("topk", [0, 32, 100, 16384 + 64, 32768])
def test_indices_bad_topk(topk):
    args = inputs()
    indices = torch.zeros((B, S_Q, topk), dtype=torch.int32)
    with raises(ValueError, rf"indices: topk must be a multiple of 64 in \[64, 16384\] .*got {topk}$"):
        call(args, indices=indices)


def test_indices_max_topk_accepted():
    args = inputs()
    assert call(args, indices=torch.zeros((B, S_Q, 16384), dtype=torch.int32)).topk == 16384


def test_indices_non_contiguous():
    args = inputs()
    indices = torch.zeros((B, S_Q, 2 * TOPK), dtype=torch.int32)[..., :TOPK]
    with raises(ValueError, r"indices must be contiguous; got strides \[256, 256, 1\]"):
        call(args, indices=indices)


# ---------------------------------------------------------------------------------------------- lengths


def test_topk_length_wrong_dtype():
    args = inputs()
    with raises(ValueError, r"topk_length must be int32 \[b\] = int32 \[2\]; got int64 \[2\]"):
        call(args, topk_length=torch.full((B,), 64, dtype=torch.int64))


def test_topk_length_wrong_shape():
    args = inputs()
    with raises(ValueError, r"topk_length must be int32 \[b\] = int32 \[2\]; got int32 \[2, 1\]"):
        call(args, topk_length=torch.full((B, 1), 64, dtype=torch.int32))
    with raises(ValueError, r"topk_length must be int32 \[b\] = int32 \[2\]; got int32 \[3\]"):
        call(args, topk_length=torch.full((3,), 64, dtype=torch.int32))


def test_topk_length_not_a_tensor():
    with raises(TypeError, r"topk_length must be a torch\.Tensor; got list"):
        call(inputs(), topk_length=[64, 64])


# ---------------------------------------------------------------------------------------------- extra set


def test_extra_k_cache_without_extra_indices():
    args = full_inputs("model1")
    with raises(ValueError, r"extra_k_cache and extra_indices go together; got only extra_k_cache"):
        call(args, extra_indices=None, extra_topk_length=None)


def test_extra_indices_without_extra_k_cache():
    args = full_inputs("model1")
    with raises(ValueError, r"extra_k_cache and extra_indices go together; got only extra_indices"):
        call(args, extra_k_cache=None, extra_topk_length=None)


def test_extra_topk_length_without_extra_set():
    args = inputs("model1")
    with raises(ValueError, r"extra_topk_length needs extra_k_cache and extra_indices"):
        call(args, extra_topk_length=torch.full((B,), 64, dtype=torch.int32))


def test_extra_indices_topk_not_multiple_of_64():
    args = full_inputs("model1")
    with raises(ValueError, r"extra_indices: topk must be a multiple of 64 in \[64, 16384\] .*got 96$"):
        call(args, extra_indices=torch.zeros((B, S_Q, 96), dtype=torch.int32))


def test_extra_indices_wrong_dtype():
    args = full_inputs("model1")
    with raises(ValueError, r"extra_indices must be int32 \[b, s_q, topk\] = int32 \[2, 1, topk\]; got int64"):
        call(args, extra_indices=args["extra_indices"].long())


def test_extra_k_cache_layout_named():
    args = full_inputs("model1")
    with raises(ValueError, r"extra_k_cache: a model1 page block of page_size 16 is 16\*584 bytes padded to a "
                            r"multiple of 576 = 9792, so stride\(0\) must be 9792; got 9344"):
        call(args, extra_k_cache=args["extra_k_cache"].contiguous())


def test_extra_topk_length_wrong_dtype():
    args = full_inputs("model1")
    with raises(ValueError, r"extra_topk_length must be int32 \[b\] = int32 \[2\]; got int64 \[2\]"):
        call(args, extra_topk_length=args["extra_topk_length"].long())


# ---------------------------------------------------------------------------------------------- sink, out, lse


def test_attn_sink_wrong_shape():
    args = inputs()
    with raises(ValueError, r"attn_sink must be float32 \[h_q\] = float32 \[16\]; got float32 \[8\]"):
        call(args, attn_sink=torch.zeros(8))


def test_attn_sink_wrong_dtype():
    args = inputs()
    with raises(ValueError, r"attn_sink must be float32 \[h_q\] = float32 \[16\]; got bfloat16 \[16\]"):
        call(args, attn_sink=torch.zeros(16, dtype=torch.bfloat16))


def test_out_wrong_shape():
    args = inputs()
    with raises(ValueError, r"out must be bfloat16 \[b, s_q, h_q, 512\] = bfloat16 \[2, 1, 16, 512\]; "
                            r"got bfloat16 \[2, 1, 16, 576\]"):
        call(args, out=torch.empty((B, S_Q, H_Q, 576), dtype=torch.bfloat16))


def test_out_wrong_dtype():
    args = inputs()
    with raises(ValueError, r"out must be bfloat16 \[b, s_q, h_q, 512\] = bfloat16 \[2, 1, 16, 512\]; "
                            r"got float32 \[2, 1, 16, 512\]"):
        call(args, out=torch.empty((B, S_Q, H_Q, 512), dtype=torch.float32))


def test_out_non_contiguous():
    args = inputs()
    out = torch.empty((B, S_Q, H_Q, 1024), dtype=torch.bfloat16)[..., :512]
    with raises(ValueError, r"out must be contiguous"):
        call(args, out=out)


def test_lse_wrong_shape():
    """FlashMLA's lse layout [b, h_q, s_q] is not this API's [b, s_q, h_q]."""
    args = make_inputs(B, 2, H_Q, TOPK, "v32")
    with raises(ValueError, r"lse must be float32 \[b, s_q, h_q\] = float32 \[2, 2, 16\]; got float32 \[2, 16, 2\]"):
        call(args, lse=torch.empty((B, H_Q, 2)))


def test_lse_wrong_dtype():
    args = inputs()
    with raises(ValueError, r"lse must be float32 \[b, s_q, h_q\] = float32 \[2, 1, 16\]; got bfloat16 \[2, 1, 16\]"):
        call(args, lse=torch.empty((B, S_Q, H_Q), dtype=torch.bfloat16))


# ---------------------------------------------------------------------------------------------- shapes


def test_check_arguments_model1_page_size_61_shapes():
    args = make_inputs(3, 2, 16, 192, "model1", page_size=61, extra_topk=64, extra_page_size=3)
    c = call(args)
    assert c.batch_rows == 6
    assert (c.batch, c.s_q, c.h_q) == (3, 2, 16)
    assert c.topk == 192 and c.extra_topk == 64
    assert c.page_size == 61
    assert c.block_stride == 35712  # 61*584 = 35624 padded up to 62*576
    assert c.extra_page_size == 3 and c.extra_block_stride == 2304  # 3*584 = 1752 -> 4*576
    assert c.softmax_scale == pytest.approx(1 / math.sqrt(512))
    assert c.kv_format == "model1"


def test_check_arguments_v32_shapes_without_extra():
    c = call(inputs("v32"))
    assert c.page_size == 64 and c.block_stride == 64 * 656
    assert (c.extra_topk, c.extra_page_size, c.extra_block_stride) == (0, 1, 0)
    assert c.attn_sink is None and c.topk_length is None and c.out is None and c.lse is None


# ---------------------------------------------------------------------------------------------- devices


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_cpu_call_fails_device_check(kv_format):
    c = call(full_inputs(kv_format))
    with raises(ValueError, r"q must be a CUDA tensor; got device cpu"):
        check_devices(c)


@pytest.mark.parametrize("name", ["k_cache", "indices", "topk_length", "extra_k_cache", "extra_indices",
                                  "extra_topk_length", "attn_sink", "out", "lse"])
def test_device_mismatch_names_the_argument(name):
    """Without a GPU: a stand-in q that reports cuda:0; every other (CPU) tensor must then be named."""
    c = call(full_inputs("model1"))

    class OnCuda:
        device = torch.device("cuda", 0)

    others = {n: OnCuda() for n in ("k_cache", "indices", "topk_length", "extra_k_cache", "extra_indices",
                                    "extra_topk_length", "attn_sink", "out", "lse") if n != name}
    c = dataclasses.replace(c, q=OnCuda(), **others)
    with raises(ValueError, rf"{name} must be on q's device cuda:0; got cpu"):
        check_devices(c)


def test_all_on_one_cuda_device_passes_device_check():
    c = call(inputs("v32"))

    class OnCuda:
        device = torch.device("cuda", 0)

    c = dataclasses.replace(c, q=OnCuda(), k_cache=OnCuda(), indices=OnCuda())
    assert check_devices(c) == torch.device("cuda", 0)


class _UntouchableLauncher(types.ModuleType):
    """Stands in for the native launcher: records every attribute read (any use of the driver starts with one)."""

    def __init__(self):
        super().__init__("sparse_mla_aot._launcher")
        self.read: list[str] = []

    def __getattr__(self, name):
        if name.startswith("__"):  # the import system probes module dunders; those are not uses
            raise AttributeError(name)
        self.read.append(name)
        raise AssertionError(f"the native launcher was used ({name}) before the arguments were checked")


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_sparse_mla_decode_rejects_cpu_tensors_before_any_driver_use(kv_format, monkeypatch, tmp_path):
    # No kernels anywhere: reaching the catalog would fail differently; the launcher is a stand-in that records use.
    monkeypatch.setenv("SPARSE_MLA_AOT_KERNEL_DIR", str(tmp_path / "no-kernels"))
    launcher = _UntouchableLauncher()
    monkeypatch.setitem(sys.modules, "sparse_mla_aot._launcher", launcher)
    args = full_inputs(kv_format)
    with raises(ValueError, r"q must be a CUDA tensor; got device cpu"):
        sparse_mla_aot.sparse_mla_decode(**args)
    assert launcher.read == []


def test_sparse_mla_decode_validates_before_device_check():
    args = inputs()
    with raises(ValueError, r"indices must be int32"):
        sparse_mla_aot.sparse_mla_decode(**{**args, "indices": args["indices"].long()})
    with raises(TypeError, r"softmax_scale must be a float; got NoneType"):
        sparse_mla_aot.sparse_mla_decode(**{**args, "softmax_scale": None})
