"""The per-call plan cache (ops + plan_cache) on CPU tensors, through a recording stand-in for the native launcher
(tests/fake_runtime.py): a repeated signature skips the checks and launches what a fresh derivation would, with
this call's pointers; a call that differs in one thing the checks read misses, and is refused exactly as the full
check refuses it. The property test drives random sequences of such calls."""
from __future__ import annotations

import dataclasses
import re
import struct
from collections import Counter

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from sparse_mla_aot import dispatch, ops, paths, plan_cache
from sparse_mla_aot.contract import COMBINE_ARG_NAMES, COMBINE_NAME, SPLIT_ARG_NAMES
from sparse_mla_aot.plan import combine_arguments, combined_offsets, make_plan, split_arguments, workspace_elements
from sparse_mla_aot.reference import make_inputs
from sparse_mla_aot.validation import check_arguments, check_devices
from tests.fake_runtime import (STREAM, FakeCachingAllocator, FakeLauncher, decode_spec, use_cpu_runtime,
                                write_runtime_kernel_dir)
from tests.test_properties import ARGUMENTS, _env, _settings, cases

SEQUENCE_EXAMPLES = 150
FORCE, CHECK = paths.FORCE_ENV, paths.CHECK_ENV
# An error names the argument it is about (or the setting that is wrong), first.
NAMED = re.compile(r"^(" + "|".join(sorted([*ARGUMENTS, FORCE], key=len, reverse=True)) + r")\b")
OPTIONAL = ("attn_sink", "topk_length", "extra_topk_length", "out", "lse")


@pytest.fixture(scope="module")
def kernel_root(tmp_path_factory):
    return write_runtime_kernel_dir(tmp_path_factory.mktemp("plan_cache") / "kernels")


@pytest.fixture
def runtime(monkeypatch, kernel_root):
    launcher, allocator = FakeLauncher(), FakeCachingAllocator()
    kernels = use_cpu_runtime(monkeypatch, kernel_root, launcher, allocator)
    checks = Counter()
    real_check = ops.check_arguments

    def counting_check(*args, **kwargs):
        checks["full"] += 1
        return real_check(*args, **kwargs)

    monkeypatch.setattr(ops, "check_arguments", counting_check)
    return launcher, kernels, checks, allocator


def full_check(args: dict):
    """The oracle: what the op must do without a cache. Returns the exception it must raise, or None."""
    try:
        call = check_arguments(**args)
        check_devices(call, device_type="cpu")
        dispatch.choose(ops._kernels_for(None).catalog, "sm90", call.kv_format, call.h_q, call.batch_rows)
    except (ValueError, TypeError) as error:
        return error
    return None


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def expected_launch(args: dict, pointers: tuple, kernels) -> dict:
    """The split and combine arguments a fresh derivation gives this call, with the buffers the op allocated."""
    call = check_arguments(**args)
    choice = dispatch.choose(kernels.catalog, "sm90", call.kv_format, call.h_q, call.batch_rows)
    split = kernels.kernels[choice.variant]
    plan = make_plan(call, choice.variant, split.block_h, split.block_t, choice.num_splits, split.wave)
    workspace = pointers[plan_cache.WORKSPACE]
    partial_lse = workspace + 4 * workspace_elements(plan)[1]
    out, lse = pointers[plan_cache.OUT], pointers[plan_cache.LSE]

    def address(t):
        return t if isinstance(t, int) else t.data_ptr()

    split_args = dict(zip(SPLIT_ARG_NAMES, split_arguments(call, plan, workspace, partial_lse, out, lse,
                                                           pointer=address)))
    split_args["sm_scale_log2"] = _float32(split_args["sm_scale_log2"])
    scratch = {"global_scratch": 0, "profile_scratch": 0}
    combine = None
    if plan.combine_grid is not None:
        out_offset, lse_offset = combined_offsets(call, plan)  # the combine kernel writes the split rows only
        combine_args = dict(zip(COMBINE_ARG_NAMES, combine_arguments(call, plan, workspace, partial_lse,
                                                                     out + 2 * out_offset, lse + 4 * lse_offset,
                                                                     pointer=address)))
        combine = {"kernel": COMBINE_NAME, "grid": plan.combine_grid,
                   "block_x": kernels.kernels[COMBINE_NAME].block_x,
                   "shared_bytes": kernels.kernels[COMBINE_NAME].shared_bytes,
                   # a programmatic dependent launch where the row asks and the combine kernel can wait for it
                   "programmatic": (choice.programmatic_combine
                                    and kernels.catalog.records("sm90")[COMBINE_NAME].grid_dependency),
                   "args": {**combine_args, **scratch}}
    return {"context": kernels.context,
            "split": {"kernel": choice.variant, "grid": plan.split_grid, "block_x": split.block_x,
                      "shared_bytes": split.shared_bytes, "programmatic": False, "args": {**split_args, **scratch}},
            "combine": combine}

def run(args: dict, launcher, kernels, checks, allocator) -> tuple[str, object]:
    """One op call compared with the oracle: ("hit" | "miss", the launch) or ("refused", the error). Either way no
    workspace outlives the call; a launch's workspace is the block this call took on the current stream."""
    expected = full_check(args)
    before, launches, blocks = checks["full"], len(launcher.launches), len(allocator.blocks)
    try:
        out, lse = ops.sparse_mla_decode(**args)
    except (ValueError, TypeError) as error:
        assert expected is not None, f"refused a call the full check accepts: {error}"
        assert (type(error), str(error)) == (type(expected), str(expected))
        assert NAMED.match(str(error)), f"the error does not name an argument: {error}"
        assert len(launcher.launches) == launches and len(allocator.blocks) == blocks
        return "refused", error
    assert expected is None, f"accepted a call the full check refuses ({type(expected).__name__}: {expected})"
    assert len(launcher.launches) == launches + 1
    spec, stream, pointers = launcher.launches[-1]
    assert stream == torch._C._cuda_getCurrentRawStream(None)  # the current stream (STREAM unless a test moved)
    tensors = [args.get(name) for name in plan_cache.TENSOR_SOURCES]
    assert pointers[:len(tensors)] == tuple(0 if t is None else t.data_ptr() for t in tensors)
    assert pointers[plan_cache.OUT] == out.data_ptr() and pointers[plan_cache.LSE] == lse.data_ptr()
    assert (out.dtype, lse.dtype, out.device, lse.device) == (torch.bfloat16, torch.float32, args["q"].device,
                                                              args["q"].device)
    if args.get("out") is not None:
        assert out is args["out"] and lse.shape == args["q"].shape[:3]
    launched = decode_spec(spec, pointers, kernels)
    assert launched == expected_launch(args, pointers, kernels)
    taken = allocator.blocks[blocks:]
    if launched["combine"] is None:
        assert pointers[plan_cache.WORKSPACE] == 0 and not taken
    else:
        rows, h_q = launched["combine"]["grid"][:2]  # partial out [rows, h_q, splits, 512] + lse, fp32
        splits = launched["combine"]["args"]["num_splits"]
        assert taken == [(pointers[plan_cache.WORKSPACE], rows * h_q * splits * (512 + 1) * 4, stream)]
    assert not allocator.live
    return ("miss" if checks["full"] > before else "hit"), spec


def inputs(kv_format: str = "model1", b: int = 2, **options) -> dict:
    return make_inputs(b, 1, 16, 128, kv_format, page_size=16, **options)


def test_repeated_signature_skips_the_checks_and_uses_this_calls_pointers(runtime):
    args = inputs(with_sink=True, with_topk_length=True, extra_topk=64)
    assert run(args, *runtime)[0] == "miss"
    assert run(args, *runtime)[0] == "hit"
    fresh = inputs(with_sink=True, with_topk_length=True, extra_topk=64, seed=1)  # new tensors, same signature
    assert all(fresh[k].data_ptr() != args[k].data_ptr() for k in ("q", "k_cache", "indices"))
    assert run(fresh, *runtime)[0] == "hit"
    assert len(ops._plans) == 1


@pytest.mark.parametrize("change, outcome", [
    ("contiguous_copy", "hit"), ("non_contiguous_same_shape", "refused"), ("misaligned", "refused"),
    ("other_device", "refused"), ("dtype", "refused"), ("drop_topk_length", "miss"), ("drop_extra_set", "miss"),
    ("add_out", "miss"), ("new_batch_size", "miss"), ("other_scale", "miss"), ("scale_as_int", "miss"),
    ("bool_scale", "refused"), ("kv_format_other_spelling", "miss"), ("unhashable_kv_format", "refused"),
    ("not_a_tensor", "refused")])
def test_one_thing_changed_misses_or_is_refused_like_the_full_check(runtime, change, outcome):
    args = inputs(with_topk_length=True, extra_topk=64)
    assert run(args, *runtime)[0] == "miss"
    q = args["q"]
    changed = dict(args)
    if change == "contiguous_copy":
        changed["q"] = q.clone()
    elif change == "non_contiguous_same_shape":
        changed["q"] = torch.zeros((*q.shape[:3], 2 * q.shape[3]), dtype=q.dtype)[..., ::2]
    elif change == "misaligned":
        changed["indices"] = torch.zeros(args["indices"].numel() + 1, dtype=torch.int32)[1:].view(
            args["indices"].shape)
    elif change == "other_device":
        cache = args["extra_k_cache"]
        changed["extra_k_cache"] = torch.empty_strided(cache.shape, cache.stride(), dtype=cache.dtype, device="meta")
    elif change == "dtype":
        changed["topk_length"] = args["topk_length"].long()
    elif change == "drop_topk_length":
        changed["topk_length"] = None
    elif change == "drop_extra_set":
        changed.update(extra_k_cache=None, extra_indices=None, extra_topk_length=None)
    elif change == "add_out":
        changed["out"] = torch.empty((*q.shape[:3], 512), dtype=torch.bfloat16)
    elif change == "new_batch_size":
        changed = {k: v[:1] if isinstance(v, torch.Tensor) and k not in ("k_cache", "extra_k_cache") else v
                   for k, v in args.items()}
    elif change == "other_scale":
        changed["softmax_scale"] = args["softmax_scale"] / 2
    elif change == "scale_as_int":
        changed["softmax_scale"] = 1
    elif change == "bool_scale":
        changed["softmax_scale"] = True
    elif change == "kv_format_other_spelling":  # None and "model1" mean the same here; the key tells them apart
        changed["kv_format"] = None if args.get("kv_format") else "model1"
    elif change == "unhashable_kv_format":
        changed["kv_format"] = ["model1"]
    elif change == "not_a_tensor":
        changed["indices"] = args["indices"].tolist()
    assert run(changed, *runtime)[0] == outcome
    assert run(changed, *runtime)[0] == ("refused" if outcome == "refused" else "hit")


def test_force_setting_is_part_of_the_signature(runtime, monkeypatch):
    launcher, kernels, checks, _ = runtime
    args = inputs("v32", b=1)
    _, table_spec = run(args, *runtime)
    monkeypatch.setenv(FORCE, "block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=2")
    kind, forced_spec = run(args, *runtime)
    assert kind == "miss" and forced_spec != table_spec
    assert decode_spec(forced_spec, launcher.launches[-1][2], kernels)["split"]["kernel"] == "v32_fused_bh16_bt16_w8_s2"
    monkeypatch.setenv(FORCE, "block_h=16,block_t=32,num_warps=8,num_stages=2,num_splits=2")  # pruned
    assert run(args, *runtime)[0] == "refused"
    monkeypatch.delenv(FORCE)
    assert run(args, *runtime) == ("hit", table_spec)


def test_forcing_context_is_part_of_the_signature(runtime, monkeypatch):
    """tune and ab pin variants with dispatch.forcing(), not the environment: each pin is its own plan."""
    launcher, kernels, checks, _ = runtime
    args = inputs("v32", b=1)
    _, table_spec = run(args, *runtime)
    with dispatch.forcing("block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=2"):
        kind, forced_spec = run(args, *runtime)
        assert kind == "miss" and forced_spec != table_spec
        assert decode_spec(forced_spec, launcher.launches[-1][2], kernels)["split"]["kernel"] == "v32_fused_bh16_bt16_w8_s2"
    monkeypatch.setenv(FORCE, "block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=2")
    with dispatch.forcing(None):  # the table, whatever the environment says
        assert run(args, *runtime) == ("hit", table_spec)


def test_index_check_runs_on_every_call_when_asked(runtime, monkeypatch):
    args = inputs()
    run(args, *runtime)
    monkeypatch.setenv(CHECK, "1")
    args["indices"][0, 0, 0] = 10**6
    with pytest.raises(ValueError, match=r"^indices\[0, 0, 0\] = 1000000 is outside the cache"):
        ops.sparse_mla_decode(**args)


def test_the_cache_is_bounded(runtime, monkeypatch):
    monkeypatch.setattr(plan_cache, "MAX_PLANS", 2)
    for b in (1, 2, 3):
        run(inputs(b=b), *runtime)
    assert len(ops._plans) == 1  # the third signature started the cache over


def test_every_call_takes_its_own_workspace_and_frees_it(runtime):
    """Nothing the call allocates outlives it (torch.compile's cudagraph trees refuse pool memory kept past a
    call): each launch's workspace is a block this call took from the caching allocator on its stream (run()
    checks size and stream) and freed after the launch; a call on another stream takes it on that stream."""
    launcher, _, _, allocator = runtime
    args = inputs(b=1)
    run(args, *runtime)
    run(args, *runtime)
    assert len(allocator.blocks) == 2 and not allocator.live
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: STREAM + 1)
        run(args, *runtime)
    assert allocator.blocks[-1][2] == STREAM + 1
    assert not [name for name, value in vars(ops).items() if isinstance(value, dict) and any(
        isinstance(v, torch.Tensor) for v in value.values())]  # no tensor kept in a module-level cache


def test_a_failed_launch_still_frees_its_workspace(runtime, monkeypatch):
    launcher, _, _, allocator = runtime
    args = inputs(b=1)
    run(args, *runtime)

    def failing_launch(spec, stream, *pointers):
        raise RuntimeError("cuLaunchKernelEx (split kernel) failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")

    plan = next(iter(ops._plans.values()))
    monkeypatch.setitem(ops._plans, next(iter(ops._plans)), dataclasses.replace(plan, launch=failing_launch))
    with pytest.raises(RuntimeError, match="CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"):
        ops.sparse_mla_decode(**args)
    assert len(allocator.blocks) == 2 and not allocator.live


def test_a_workspace_for_a_device_other_than_the_current_one_is_taken_on_that_device(runtime, monkeypatch):
    """The allocator's raw entry point allocates on the current device: the call makes the plan's current around it."""
    launcher, _, _, allocator = runtime
    args = inputs(b=1)
    run(args, *runtime)
    entered = []

    class RecordingDevice:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            entered.append(self.index)

        def __exit__(self, *exc):
            entered.append("exit")

    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 1, raising=False)
    monkeypatch.setattr(ops.torch.cuda, "device", RecordingDevice)
    assert run(args, *runtime)[0] == "hit"
    assert entered == [None, "exit"]  # the plan's device (the CPU stand-in's index), then back


# ---------------------------------------------------------------------------------------------- property


def _fresh_like(t):
    """A new tensor with t's shape, strides and dtype (so the same signature when t was valid)."""
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype) if isinstance(t, torch.Tensor) else t


@st.composite
def changes(draw, args: dict):
    """One thing different from a valid argument set: a tensor's dtype, strides, alignment or device, an option
    dropped or added, a new batch size, the scale, or nothing but fresh tensors (the same signature)."""
    present = [k for k, v in args.items() if isinstance(v, torch.Tensor)]
    kind = draw(st.sampled_from(["fresh", "fresh", "dtype", "strides", "misaligned", "device", "drop", "add",
                                 "batch", "scale"]))
    changed = {k: _fresh_like(v) for k, v in args.items()}
    name = draw(st.sampled_from(present))
    t = changed[name]
    if kind == "dtype":
        dtype = draw(st.sampled_from([torch.int8, torch.uint8, torch.int32, torch.int64, torch.float32,
                                      torch.bfloat16, torch.float8_e4m3fn]))
        changed[name] = torch.empty_strided(t.shape, t.stride(), dtype=dtype)
    elif kind == "strides":
        big = torch.empty((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype)
        changed[name] = big[..., ::2] if draw(st.booleans()) else big[..., : t.shape[-1]]
    elif kind == "misaligned":
        flat = torch.empty(t.untyped_storage().nbytes() // t.element_size() + 1, dtype=t.dtype)
        changed[name] = torch.as_strided(flat, t.shape, t.stride(), 1)
    elif kind == "device":
        changed[name] = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    elif kind == "drop":
        name = draw(st.sampled_from([*OPTIONAL, "extra_k_cache", "extra_indices", "kv_format"]))
        changed[name] = None
    elif kind == "add":
        b, s_q, h_q = args["q"].shape[:3]
        name = draw(st.sampled_from(OPTIONAL))
        shape = {"attn_sink": (h_q,), "topk_length": (b,), "extra_topk_length": (b,), "out": (b, s_q, h_q, 512),
                 "lse": (b, s_q, h_q)}[name]
        changed[name] = torch.zeros(shape, dtype=torch.bfloat16 if name == "out" else
                                    torch.int32 if name.endswith("length") else torch.float32)
    elif kind == "batch":
        b = args["q"].shape[0]
        keep = draw(st.integers(1, b))
        changed = {k: v[:keep] if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == b
                   and k not in ("k_cache", "extra_k_cache", "attn_sink") else v for k, v in changed.items()}
    elif kind == "scale":
        changed["softmax_scale"] = draw(st.sampled_from([0.5, 2, 1e-3, 0.0, -1.0, float("nan"), "0.1", None]))
    return kind, changed


@st.composite
def call_sequences(draw):
    """A few valid argument sets, then calls drawn from them and their one-thing-changed variants, repeated."""
    bases = [draw(cases(allow_bad=False)).args for _ in range(draw(st.integers(1, 3)))]
    steps = []
    for _ in range(draw(st.integers(4, 12))):
        base = draw(st.sampled_from(bases))
        steps.append(("base", base) if draw(st.booleans()) else draw(changes(base)))
    return steps + steps[::-1]  # every call again: the second time its signature is known


def test_cache_never_accepts_what_the_full_check_refuses(runtime):
    """Each call must behave exactly as the full check and a fresh derivation say: the same error (naming the
    argument), or a launch of the freshly derived plan with this call's pointers, whether the plan came from the
    cache or not."""
    seen = Counter()

    @_settings(SEQUENCE_EXAMPLES)
    @given(steps=call_sequences())
    def prop(steps):
        ops._plans.clear()
        seen["sequences"] += 1
        for kind, args in steps:
            outcome, _ = run(args, *runtime)
            seen[outcome] += 1
            seen[f"{kind}:{outcome}"] += 1

    with _env(**{FORCE: None, CHECK: None}):
        prop()
    assert seen["sequences"] >= SEQUENCE_EXAMPLES, seen
    # The strategy must produce every outcome, and refusals of calls whose valid twin is in the cache.
    assert min(seen["hit"], seen["miss"], seen["refused"]) >= SEQUENCE_EXAMPLES // 5, seen
    for kind in ("dtype", "strides", "misaligned", "device"):
        assert seen[f"{kind}:refused"] >= 1, seen
