"""The public entry points beside sparse_mla_decode, on CPU through tests/fake_runtime.py: flash_mla_with_kvcache
(FlashMLA's sparse-decode signature over sparse_mla_decode), prepare() (the target for the GPU's compute
capability, its tables' kernels loaded once) and explain() (the current GPU's target when none is named)."""
from __future__ import annotations

import json
import struct

import pytest
import torch

from sparse_mla_aot import dispatch, ops, paths, plan_cache
from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import COMBINE_NAME, D_QK, D_V
from sparse_mla_aot.launch import DeviceKernels
from sparse_mla_aot.plan import LOG2_E
from sparse_mla_aot.reference import make_inputs
from tests.fake_runtime import (FakeCachingAllocator, FakeLauncher, decode_spec, use_cpu_runtime,
                                write_runtime_kernel_dir)

# A second target (12.0) that runs sm90's binaries, as sm121 runs sm120's, with its own tables: so a test can tell
# which target the capability picked.
OTHER_TARGET, OTHER_CAPABILITY = "sm120", (12, 0)
OTHER_TABLE_ROWS = {"v32": [{"max_batch_rows": 2, "variant": "v32_fused_bh16_bt16_w8_s2", "num_splits": 3},
                            {"max_batch_rows": None, "variant": "v32_ws_bh16_bt32_w8_s2", "num_splits": 1}],
                    "model1": [{"max_batch_rows": None, "variant": "model1_fused_bh16_bt16_w8_s2", "num_splits": 5}]}
CAPABILITY = {"sm90": (9, 0), OTHER_TARGET: OTHER_CAPABILITY}


@pytest.fixture(scope="module")
def kernel_root(tmp_path_factory):
    root = write_runtime_kernel_dir(tmp_path_factory.mktemp("entry_points") / "kernels")
    manifest = json.loads((root / paths.MANIFEST_NAME).read_text())
    manifest["targets"][OTHER_TARGET] = {"capability": list(OTHER_CAPABILITY), "sm_count": 188, "binaries": "sm90",
                                         "artifacts": {}, "pruned": []}
    (root / paths.MANIFEST_NAME).write_text(json.dumps(manifest))
    (root / "tables" / OTHER_TARGET).mkdir()
    for kv_format, rows in OTHER_TABLE_ROWS.items():
        table = {"target": OTHER_TARGET, "kv_format": kv_format, "h_q": 16,
                 "provenance": {"kind": "heuristic", "rule": "entry-point tests"}, "rows": rows}
        (root / "tables" / OTHER_TARGET / f"{kv_format}_h16.json").write_text(json.dumps(table))
    return root


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


# ---------------------------------------------------------------------------------------------- flash_mla_with_kvcache


@pytest.fixture
def runtime(monkeypatch, kernel_root):
    """The CPU runtime (sm90), with ops.sparse_mla_decode wrapped to record each call's arguments and results.
    No kernel runs on CPU, so the wrapper fills lse with a function of q alone (distinct per position): equal
    inputs give equal lse, and a transposition shows in the values."""
    launcher = FakeLauncher()
    kernels = use_cpu_runtime(monkeypatch, kernel_root, launcher, FakeCachingAllocator())
    calls = []
    real = ops.sparse_mla_decode

    def recording(*args, **kwargs):
        out, lse = real(*args, **kwargs)
        lse.copy_(args[0].float().sum(-1))
        calls.append((args, kwargs, out, lse))
        return out, lse

    monkeypatch.setattr(ops, "sparse_mla_decode", recording)
    return launcher, kernels, calls


def inputs(kv_format: str = "v32", b: int = 2, s_q: int = 3, **options) -> dict:
    return make_inputs(b, s_q, 16, 64, kv_format, page_size=16, seed=3, **options)


def flash(args: dict, **overrides):
    """flash_mla_with_kvcache as FlashMLA's callers spell it, on make_inputs' tensors."""
    kwargs = dict(q=args["q"], k_cache=args["k_cache"], block_table=None, cache_seqlens=None, head_dim_v=D_V,
                  indices=args["indices"], attn_sink=args["attn_sink"], topk_length=args["topk_length"],
                  extra_k_cache=args["extra_k_cache"], extra_indices_in_kvcache=args["extra_indices"],
                  extra_topk_length=args["extra_topk_length"])
    return ops.flash_mla_with_kvcache(**{**kwargs, **overrides})


@pytest.mark.parametrize("override, message", [
    ({"indices": None}, r"^indices is required: sparse_mla_aot implements FlashMLA's sparse decode only$"),
    ({"head_dim_v": 576}, r"^head_dim_v must be 512; got 576$"),
    ({"causal": True}, r"^causal=True has no meaning for sparse decode; pass causal=False$"),
    ({"is_fp8_kvcache": False}, r"^is_fp8_kvcache must be True: sparse_mla_aot reads fp8 KV caches only; got False$"),
])
def test_flash_refuses_settings_sparse_decode_cannot_honour(runtime, override, message):
    launcher, _, calls = runtime
    args = inputs()
    with pytest.raises(ValueError, match=message):
        flash(args, **override)
    assert not calls and not launcher.launches  # refused before anything was planned or launched
    flash(args)  # the same call without the override goes through
    assert len(calls) == 1 and len(launcher.launches) == 1


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_flash_default_scale_is_q_width_to_the_minus_half(runtime, kv_format):
    """softmax_scale None means 1/sqrt(d_qk) of q's width (576 for v32, 512 for model1), as in FlashMLA; the
    kernel receives it as scale * log2(e) in fp32."""
    launcher, kernels, calls = runtime
    args = inputs(kv_format)
    flash(args, softmax_scale=None)
    expected = D_QK[kv_format] ** -0.5
    assert calls[-1][0][3] == expected
    spec, _, pointers = launcher.launches[-1]
    assert decode_spec(spec, pointers, kernels)["split"]["args"]["sm_scale_log2"] == _float32(expected * LOG2_E)
    flash(args, softmax_scale=0.25)  # an explicit scale is passed through, not replaced
    spec, _, pointers = launcher.launches[-1]
    assert decode_spec(spec, pointers, kernels)["split"]["args"]["sm_scale_log2"] == _float32(0.25 * LOG2_E)


def test_flash_forwards_every_tensor_to_the_launch(runtime):
    """FlashMLA's extra_indices_in_kvcache is sparse_mla_decode's extra_indices; every optional tensor reaches the
    kernel in its slot."""
    launcher, _, _ = runtime
    args = inputs(with_sink=True, with_topk_length=True, extra_topk=64)
    flash(args)
    pointers = launcher.launches[-1][2]
    assert pointers[:len(plan_cache.TENSOR_SOURCES)] == tuple(args[name].data_ptr()
                                                               for name in plan_cache.TENSOR_SOURCES)


def test_flash_returns_lse_as_b_hq_sq_the_transpose_of_sparse_decode(runtime):
    _, _, calls = runtime
    args = inputs(b=2, s_q=3)
    out, lse = flash(args)
    b, s_q, h_q = args["q"].shape[:3]
    assert out.shape == (b, s_q, h_q, D_V) and lse.shape == (b, h_q, s_q)
    assert out is calls[-1][2]  # out is sparse_mla_decode's, unchanged
    direct_out, direct_lse = ops.sparse_mla_decode(args["q"], args["k_cache"], args["indices"], D_QK["v32"] ** -0.5)
    assert direct_lse.shape == (b, s_q, h_q)
    assert torch.equal(lse, direct_lse.transpose(1, 2))
    assert not torch.equal(lse.reshape(b, s_q, h_q), direct_lse)  # a reshape instead of a transpose would show


def same(x, y) -> bool:
    """The very tensor (or None); equal for anything else (the default scale is a fresh float per call)."""
    return x is y if x is None or isinstance(x, torch.Tensor) else type(x) is type(y) and x == y


def test_flash_ignores_paged_and_scheduler_arguments(runtime):
    """block_table, cache_seqlens, tile_scheduler_metadata and num_splits are accepted for drop-in use and change
    nothing: the same arguments reach sparse_mla_decode, the same plan (a cache hit) and the same launch."""
    launcher, _, calls = runtime
    args = inputs()
    b = args["q"].shape[0]
    flash(args)
    gen = torch.Generator().manual_seed(11)
    flash(args, block_table=torch.randint(0, 8, (b, 4), dtype=torch.int32, generator=gen),
          cache_seqlens=torch.full((b,), 37, dtype=torch.int32),
          tile_scheduler_metadata=torch.randint(0, 100, (132, 8), dtype=torch.int32, generator=gen),
          num_splits=torch.arange(b + 1, dtype=torch.int32))
    (args0, kwargs0, *_), (args1, kwargs1, *_) = calls
    assert len(args0) == len(args1) and all(same(x, y) for x, y in zip(args0, args1))
    assert kwargs0.keys() == kwargs1.keys() and all(same(kwargs0[k], kwargs1[k]) for k in kwargs0)
    (spec0, stream0, pointers0), (spec1, stream1, pointers1) = launcher.launches
    assert (spec0, stream0) == (spec1, stream1) and len(ops._plans) == 1
    assert pointers0[:len(plan_cache.TENSOR_SOURCES)] == pointers1[:len(plan_cache.TENSOR_SOURCES)]


# ---------------------------------------------------------------------------------------------- prepare


@pytest.fixture
def gpus(monkeypatch, kernel_root):
    """Two pretend GPUs: cuda:0 of compute capability 9.0 (sm90), cuda:1 of 12.0 (sm120); ops' catalog is the
    fake wheel, its device registry empty, and kernels load through a recording launcher. Returns the launcher,
    the capability lookups made and a setter for the current device."""
    launcher, asked, current = FakeLauncher(), [], [0]
    capabilities = {0: CAPABILITY["sm90"], 1: OTHER_CAPABILITY}

    def get_device_capability(device=None):
        index = current[0] if device is None else device
        asked.append(index)
        return capabilities[index]

    monkeypatch.setattr(ops, "_catalog", Catalog(kernel_root))
    monkeypatch.setattr(ops, "_devices", {})
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "get_device_capability", get_device_capability)
    monkeypatch.setattr(ops, "DeviceKernels", lambda catalog, index, target: DeviceKernels(catalog, index, target,
                                                                                           launcher))
    monkeypatch.delenv(paths.TARGET_ENV, raising=False)
    monkeypatch.delenv(paths.FORCE_ENV, raising=False)
    return launcher, asked, lambda index: current.__setitem__(0, index)


def table_kernels(root, target: str) -> list[str]:
    """The kernel names a target's tables need (their variants and the combine kernel), in load order."""
    names = {COMBINE_NAME} | {row.variant for table in Catalog(root).tables(target) for row in table.rows}
    return [f"{name}_kernel" for name in sorted(names)]  # fake_record's kernel_name


@pytest.mark.parametrize("current, device, index", [
    (0, None, 0), (1, None, 1), (0, "cuda:1", 1), (1, torch.device("cuda"), 1), (1, "cuda:0", 0)])
def test_prepare_loads_the_targets_tables_once(gpus, kernel_root, current, device, index):
    launcher, asked, set_current = gpus
    set_current(current)
    target = "sm90" if index == 0 else OTHER_TARGET
    assert table_kernels(kernel_root, "sm90") != table_kernels(kernel_root, OTHER_TARGET)  # the targets differ
    assert ops.prepare(device) == target
    assert asked == [index] and launcher.loaded == table_kernels(kernel_root, target)
    kernels = ops._devices[index]
    assert list(ops._devices) == [index]
    assert (kernels.device_index, kernels.target, kernels.context) == (index, target, 0x1000 + index)
    assert ops.prepare(device) == target  # a second call loads nothing and keeps the loaded kernels
    assert launcher.loaded == table_kernels(kernel_root, target) and ops._devices[index] is kernels


def test_prepare_loads_each_device_separately(gpus, kernel_root):
    launcher, _, _ = gpus
    both = table_kernels(kernel_root, "sm90") + table_kernels(kernel_root, OTHER_TARGET)
    assert ops.prepare("cuda:0") == "sm90" and ops.prepare("cuda:1") == OTHER_TARGET
    assert launcher.loaded == both and sorted(ops._devices) == [0, 1]
    assert ops.prepare("cuda:0") == "sm90" and launcher.loaded == both


@pytest.mark.parametrize("device, named", [("cpu", "cpu"), (torch.device("meta"), "meta"), ("cpu:0", "cpu:0")])
def test_prepare_refuses_a_device_that_is_not_cuda(gpus, device, named):
    launcher, asked, _ = gpus
    with pytest.raises(ValueError, match=rf"^device must be a CUDA device; got {named}$"):
        ops.prepare(device)
    assert not asked and not launcher.loaded and not ops._devices


def test_prepare_on_a_gpu_without_kernels_registers_nothing(gpus, monkeypatch):
    """A capability the wheel lacks is the catalog's error; no half-loaded device stays behind for later calls."""
    launcher, _, _ = gpus
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    with pytest.raises(RuntimeError, match=r"no kernels for compute capability 8\.0"):
        ops.prepare("cuda:0")
    assert not launcher.loaded and not ops._devices


# ---------------------------------------------------------------------------------------------- explain


@pytest.mark.parametrize("current, target", [(0, "sm90"), (1, OTHER_TARGET)])
def test_explain_without_target_uses_the_current_gpus(gpus, kernel_root, current, target):
    _, asked, set_current = gpus
    set_current(current)
    for kv_format in ("v32", "model1"):
        text = ops.explain(2, 1, 16, kv_format)
        assert asked[-1] == current
        assert text == ops.explain(2, 1, 16, kv_format, target=target)
        assert f"table {target}/{kv_format}_h16 " in text
        assert text == dispatch.explain(2, 16, kv_format, target=target, catalog=Catalog(kernel_root))


def test_explain_dispatches_on_batch_times_s_q_rows(gpus):
    """sm90's test tables bound their rows at 1 and 4 batch rows: b=1, s_q=4 is 4 rows (row 1), not 1."""
    texts = {(b, s_q): ops.explain(b, s_q, 16, "v32", target="sm90") for b, s_q in
             [(4, 1), (2, 2), (1, 4), (1, 5), (5, 1)]}
    assert texts[(4, 1)] == texts[(2, 2)] == texts[(1, 4)]
    assert "batch_rows 4: " in texts[(1, 4)] and " row 1: batch_rows <= 4" in texts[(1, 4)]
    assert texts[(1, 5)] == texts[(5, 1)] != texts[(1, 4)]
    assert "batch_rows 5: " in texts[(1, 5)] and " row 2: " in texts[(1, 5)]
