"""Host time per eager sparse_mla_decode call on the GPU host, beside FlashMLA's on the same inputs in the same run,
and where ours goes. Prints a table; writes JSON to $OUT/host_overhead_<target>.json when OUT is set.

    python bench/host_overhead.py [--calls 2000]

Cases: (a) model1 h_q 16 b=1, no options; (b) model1 h_q 64 b=1 with attn_sink, topk_length and the extra set
(with its lengths); (c) v32 h_q 128 b=1. Each sample times one call with an idle GPU queue (synchronize before
it, not inside it); figures are the median and p99 of `--calls` samples. A case's rows are sampled in turns, 100
calls at a time, so that they share the host's state: on the H200 host the same call measured 20.4 and 28.8 us in
two processes a minute apart, so compare the rows of one case, not figures of different runs. Exits 1 when our
output is wrong in any case. Rows:
  ours                 sparse_mla_decode(...), out/lse allocated by the call (as FlashMLA allocates its own)
  ours, out/lse given  the same with preallocated out= and lse=
  custom op            torch.ops.sparse_mla_aot.sparse_mla_decode(...) in eager mode (the dispatcher's cost on top)
  FlashMLA             flash_mla_with_kvcache with a new scheduler object per call (planned in the call), and
                       with one reused (planned once: its cheapest eager call); (b) and (c) only, when importable
Stages of our cached path, each timed alone (also in turns): signature + plan lookup, the workspace (a raw block
of the caching allocator, taken and freed; and for comparison a torch.empty of that size), out + lse allocation
(when not given), current-stream query, pointer reads, the native launch of both kernels and of the split kernel
alone; and what a first call of a shape adds (full validation, dispatch, plan + launch spec).

FlashMLA comes from the peers archive: extracted to $FLASH_MLA_PATH (default /tmp/fm) or already importable.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

import sparse_mla_aot
from sparse_mla_aot import dispatch, ops, plan_cache
from sparse_mla_aot.launch import CONTEXT, KERNEL_SPEC
from sparse_mla_aot.plan import make_plan
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode
from sparse_mla_aot.validation import check_arguments, check_devices

CASES = {
    "a: model1 h16 b=1": dict(b=1, h_q=16, topk=512, kv_format="model1"),
    "b: model1 h64 b=1 sink+lengths+extra": dict(b=1, h_q=64, topk=512, kv_format="model1", extra_topk=128,
                                                 with_sink=True, with_topk_length=True),
    "c: v32 h128 b=1": dict(b=1, h_q=128, topk=2048, kv_format="v32"),
}
FLASH_MLA_CASES = ("b: model1 h64 b=1 sink+lengths+extra", "c: v32 h128 b=1")  # FlashMLA takes h_q 64 / 128 only


def timed(fns: dict, calls: int, sync: bool = True, turn: int = 100, warm_up_s: float = 0.5) -> dict:
    """Median and p99 host time of each fn() in us, sampled in turns of `turn` calls after `warm_up_s` seconds of
    untimed calls (allocator pools and caches settled); sync: drain the GPU queue before each sample (untimed)."""
    warm_up_until = time.perf_counter() + warm_up_s
    while time.perf_counter() < warm_up_until:
        for fn in fns.values():
            fn()
    samples = {name: [] for name in fns}
    for _ in range(max(1, calls // turn)):
        for name, fn in fns.items():
            for _ in range(turn):
                if sync:
                    torch.cuda.synchronize()
                started = time.perf_counter_ns()
                fn()
                samples[name].append(time.perf_counter_ns() - started)
    figures = {}
    for name, taken in samples.items():
        taken.sort()
        figures[name] = {"median_us": taken[len(taken) // 2] / 1e3, "p99_us": taken[len(taken) * 99 // 100] / 1e3}
    return figures


def flash_mla_module():
    """FlashMLA's Python module, or None and why not."""
    path = os.environ.get("FLASH_MLA_PATH", "/tmp/fm")
    if os.path.isdir(path) and path not in sys.path:
        sys.path.insert(0, path)
    try:
        import flash_mla
    except ImportError as error:
        return None, f"not importable ({error}); extract the peers archive to {path}"
    return flash_mla, "importable"


def flash_mla_call(flash_mla, inputs: dict, reuse_schedule: bool):
    """One FlashMLA sparse decode of `inputs` (its documented call form); out, lse [b, s_q, h_q] like ours."""
    options = {} if inputs["kv_format"] == "v32" else dict(
        topk_length=inputs["topk_length"], extra_k_cache=inputs["extra_k_cache"],
        extra_indices_in_kvcache=inputs["extra_indices"], extra_topk_length=inputs["extra_topk_length"])
    schedule = flash_mla.get_mla_metadata()[0]

    def call():
        out, lse = flash_mla.flash_mla_with_kvcache(
            inputs["q"], inputs["k_cache"], None, None, 512,
            schedule if reuse_schedule else flash_mla.get_mla_metadata()[0], softmax_scale=inputs["softmax_scale"],
            causal=False, is_fp8_kvcache=True, indices=inputs["indices"], attn_sink=inputs["attn_sink"], **options)
        return out, lse.transpose(1, 2)
    return call


def correct(inputs: dict, out, lse) -> bool:
    torch.cuda.synchronize()
    ref_out, ref_lse = reference_sparse_mla_decode(**inputs)
    return bool(check_close(out.float(), lse, ref_out.float(), ref_lse.float())["ok"])


def stages(inputs: dict, calls: int) -> dict:
    """Each part of our cached path alone, and what a first call of the shape adds."""
    names = plan_cache.TENSOR_SOURCES
    tensors = tuple(inputs.get(name) for name in names)
    options = {k: v for k, v in inputs.items() if k not in ("q", "k_cache", "indices", "softmax_scale")}
    args = (inputs["q"], inputs["k_cache"], inputs["indices"], inputs["softmax_scale"])
    q = inputs["q"]
    force = dispatch.forcing_in_effect()
    plan = ops._plans[plan_cache.signature(tensors, inputs["softmax_scale"], inputs["kv_format"], None, None, force)]
    workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=q.device)
    out, lse = q.new_empty(plan.out_shape), q.new_empty(plan.lse_shape, dtype=torch.float32)
    stream = torch._C._cuda_getCurrentRawStream(plan.device_index)
    pointers = [0 if t is None else t.data_ptr() for t in tensors]
    buffers = (workspace.data_ptr(), out.data_ptr(), lse.data_ptr())
    split_alone = plan.spec[:CONTEXT.size + KERNEL_SPEC.size] + bytes(KERNEL_SPEC.size)  # an empty combine slot
    call = check_arguments(*args, **options)
    kernels = ops._kernels_for(plan.device_index)

    def build():
        choice = dispatch.choose(kernels.catalog, kernels.target, call.kv_format, call.h_q, call.batch_rows)
        split = kernels.kernels[choice.variant]
        return plan_cache.build(call, make_plan(call, choice.variant, split.block_h, split.block_t,
                                                choice.num_splits, split.wave), kernels, split, q.device)

    host_only = timed({
        "signature_and_lookup": lambda: ops._plans[plan_cache.signature(
            tensors, inputs["softmax_scale"], inputs["kv_format"], None, None, force)],
        "workspace": lambda: torch._C._cuda_cudaCachingAllocator_raw_delete(ops._allocate_workspace(plan, stream)),
        "workspace_if_torch_empty": lambda: torch.empty(plan.workspace_bytes // 4, dtype=torch.float32,
                                                        device=q.device),
        "out_lse_allocation": lambda: (q.new_empty(plan.out_shape), q.new_empty(plan.lse_shape,
                                                                                dtype=torch.float32)),
        "current_stream": lambda: torch._C._cuda_getCurrentRawStream(plan.device_index),
        "pointers": lambda: [0 if t is None else t.data_ptr() for t in tensors],
        "first_call_validation": lambda: check_devices(check_arguments(*args, **options)),
        "first_call_dispatch_plan_spec": build,
    }, calls, sync=False)
    launches = timed({"native_launch": lambda: plan.launch(plan.spec, stream, *pointers, *buffers),
                      "native_launch_split_alone": lambda: plan.launch(split_alone, stream, *pointers, *buffers)},
                     calls)
    order = ("signature_and_lookup", "workspace", "out_lse_allocation", "current_stream", "pointers",
             "native_launch", "native_launch_split_alone", "workspace_if_torch_empty", "first_call_validation",
             "first_call_dispatch_plan_spec")
    return {name: {**host_only, **launches}[name] for name in order}


def measure_case(name: str, shape: dict, flash_mla, calls: int) -> dict:
    shape = dict(shape)
    inputs = make_inputs(shape.pop("b"), 1, shape.pop("h_q"), shape.pop("topk"), shape.pop("kv_format"), seed=5,
                         device="cuda", **shape)
    out = torch.empty((*inputs["q"].shape[:3], 512), dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(inputs["q"].shape[:3], dtype=torch.float32, device="cuda")
    op = torch.ops.sparse_mla_aot.sparse_mla_decode
    row = {"correct": correct(inputs, *sparse_mla_aot.sparse_mla_decode(**inputs))}
    fns = {"ours": lambda: sparse_mla_aot.sparse_mla_decode(**inputs),
           "ours_out_lse_given": lambda: sparse_mla_aot.sparse_mla_decode(**inputs, out=out, lse=lse),
           "custom_op": lambda: op(**inputs)}
    if flash_mla is not None and name in FLASH_MLA_CASES:
        try:
            row["flash_mla_correct"] = correct(inputs, *flash_mla_call(flash_mla, inputs, True)())
            fns["flash_mla_new_schedule"] = flash_mla_call(flash_mla, inputs, False)
            fns["flash_mla_reused_schedule"] = flash_mla_call(flash_mla, inputs, True)
        except Exception as error:  # a peer's failure is reported in the table, not fatal to our figures
            row["flash_mla_error"] = f"{type(error).__name__}: {error}"
    row.update(timed(fns, calls))
    row["stages"] = stages(inputs, calls)
    return row


def _fmt(figures: dict | None) -> str:
    return "-" if figures is None else f"{figures['median_us']:6.1f} / {figures['p99_us']:6.1f}"


def report(results: dict) -> str:
    lines = [f"host time per eager call, us (median / p99 of {results['calls']} calls), {results['device']}, "
             f"FlashMLA {results['flash_mla']}",
             f"{'case':<40} {'ours':>15} {'out/lse given':>15} {'custom op':>15} {'FlashMLA new sched':>19} "
             f"{'FlashMLA reused':>16}  correct"]
    for name, r in results["cases"].items():
        flash = r.get("flash_mla_error", "")
        lines.append(f"{name:<40} {_fmt(r['ours']):>15} {_fmt(r['ours_out_lse_given']):>15} "
                     f"{_fmt(r['custom_op']):>15} {_fmt(r.get('flash_mla_new_schedule')):>19} "
                     f"{_fmt(r.get('flash_mla_reused_schedule')):>16}  ours {r['correct']}"
                     + (f", FlashMLA {r['flash_mla_correct']}" if "flash_mla_correct" in r else "") + flash[:80])
    lines.append("our cached path by stage, median us (share of the whole call's median; none for the comparisons "
                 "and first-call stages):")
    apart = ("first_call", "workspace_if", "native_launch_split")  # not parts of the cached path's time
    for name, r in results["cases"].items():
        whole = r["ours"]["median_us"]
        parts = ", ".join(f"{stage} {f['median_us']:.2f}" + ("" if stage.startswith(apart)
                                                             else f" ({100 * f['median_us'] / whole:.0f}%)")
                          for stage, f in r["stages"].items())
        lines.append(f"  {name}: {parts}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    calls = parser.parse_args().calls
    target = sparse_mla_aot.prepare()
    flash_mla, status = flash_mla_module()
    results = {"device": torch.cuda.get_device_name(), "target": target, "torch": torch.__version__,
               "flash_mla": status, "calls": calls,
               "cases": {name: measure_case(name, shape, flash_mla, calls) for name, shape in CASES.items()}}
    print(report(results))
    if os.environ.get("OUT"):
        path = os.path.join(os.environ["OUT"], f"host_overhead_{target}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(path + ".tmp", path)
        print(f"wrote {path}")
    wrong = [name for name, r in results["cases"].items() if not r["correct"]]
    if wrong:
        print(f"FAILED: our output is wrong in {len(wrong)} of {len(results['cases'])} cases: {', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
