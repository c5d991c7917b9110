"""The registered custom op (torch.ops.sparse_mla_aot.sparse_mla_decode), which torch.compile traces. Its real
implementation needs a GPU, so on CPU the reference (float64 PyTorch, same contract) stands in as its CPU kernel:
torch.library.opcheck then checks the schema, the autograd registration, the fake (meta) implementation against
a real run, and AOT dispatch with static and dynamic shapes. The H200 side (torch.compile with CUDA graphs, no
graph break, same result as eager) is bench/compile_check.py."""
from __future__ import annotations


import pytest
import torch

from sparse_mla_aot.custom_op import sparse_mla_decode_op
from sparse_mla_aot.reference import make_inputs, reference_sparse_mla_decode

OPCHECK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static",
                 "test_aot_dispatch_dynamic")


def _reference(q, k_cache, indices, softmax_scale, kv_format=None, attn_sink=None, topk_length=None,
               extra_k_cache=None, extra_indices=None, extra_topk_length=None):
    out, lse = reference_sparse_mla_decode(q, k_cache, indices, softmax_scale, kv_format=kv_format,
                                           attn_sink=attn_sink, topk_length=topk_length, extra_k_cache=extra_k_cache,
                                           extra_indices=extra_indices, extra_topk_length=extra_topk_length)
    return out.to(torch.bfloat16), lse


@pytest.fixture
def reference_on_cpu():
    """The reference as the op's CPU kernel, for one test (the registration goes with its library)."""
    library = torch.library.Library("sparse_mla_aot", "FRAGMENT")
    torch.library.register_kernel("sparse_mla_aot::sparse_mla_decode", "cpu", _reference, lib=library)
    yield
    library._destroy()


def _args(kv_format: str, **options) -> tuple[tuple, dict]:
    inputs = make_inputs(2, 1, 16, 64, kv_format, page_size=16, **options)
    positional = tuple(inputs.pop(name) for name in ("q", "k_cache", "indices", "softmax_scale"))
    return positional, inputs


@pytest.mark.parametrize("kv_format, options", [
    ("v32", {}), ("model1", {"with_sink": True, "with_topk_length": True, "extra_topk": 64})])
def test_opcheck(reference_on_cpu, kv_format, options):
    args, kwargs = _args(kv_format, **options)
    results = torch.library.opcheck(sparse_mla_decode_op, args, kwargs, test_utils=OPCHECK_UTILS)
    assert results == {name: "SUCCESS" for name in OPCHECK_UTILS}


def test_fake_implementation_matches_the_contract():
    args, kwargs = _args("model1", with_sink=True, extra_topk=64)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake_args = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        fake_kwargs = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        out, lse = torch.ops.sparse_mla_aot.sparse_mla_decode(*fake_args, **fake_kwargs)
    assert (tuple(out.shape), out.dtype) == ((2, 1, 16, 512), torch.bfloat16)
    assert (tuple(lse.shape), lse.dtype) == ((2, 1, 16), torch.float32)


def test_on_cpu_tensors_the_op_refuses_like_the_function():
    args, kwargs = _args("v32")
    with pytest.raises(ValueError, match=r"^q must be a CUDA tensor; got device cpu$"):
        torch.ops.sparse_mla_aot.sparse_mla_decode(*args, **kwargs)
