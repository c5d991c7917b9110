"""The engine path on the GPU host: a function calling torch.ops.sparse_mla_aot.sparse_mla_decode, compiled with
torch.compile(mode="reduce-overhead", fullgraph=True) (CUDA graphs; fullgraph makes any graph break an error),
must match eager (bit for bit, and the reference), also after new values are copied into its inputs; and the time
per step: plain function, custom op eager, compiled. Prints a table; writes JSON to $OUT/compile_check_<target>.json;
exits 1 when any check fails.

    python bench/compile_check.py
"""
from __future__ import annotations

import json
import os
import time

import torch

import sparse_mla_aot
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode

SHAPES = {"model1 h64 topk 512+128, sink, lengths": dict(h_q=64, topk=512, kv_format="model1", extra_topk=128,
                                                         with_sink=True, with_topk_length=True),
          "v32 h128 topk 2048": dict(h_q=128, topk=2048, kv_format="v32")}
BATCHES = (1, 32)  # each (shape, batch) compiles afresh (dynamo reset): ~4 inductor compiles in all
STEPS = 200


def step(q, k_cache, indices, attn_sink, topk_length, extra_k_cache, extra_indices, extra_topk_length,
         softmax_scale: float, kv_format: str):
    """One layer's attention as an engine writes it: the op, then a use of its outputs."""
    out, lse = torch.ops.sparse_mla_aot.sparse_mla_decode(
        q, k_cache, indices, softmax_scale, kv_format=kv_format, attn_sink=attn_sink, topk_length=topk_length,
        extra_k_cache=extra_k_cache, extra_indices=extra_indices, extra_topk_length=extra_topk_length)
    return out * 2, lse + 1


def plain_step(q, k_cache, indices, attn_sink, topk_length, extra_k_cache, extra_indices, extra_topk_length,
               softmax_scale: float, kv_format: str):
    out, lse = sparse_mla_aot.sparse_mla_decode(
        q, k_cache, indices, softmax_scale, kv_format=kv_format, attn_sink=attn_sink, topk_length=topk_length,
        extra_k_cache=extra_k_cache, extra_indices=extra_indices, extra_topk_length=extra_topk_length)
    return out * 2, lse + 1


TENSORS = ("q", "k_cache", "indices", "attn_sink", "topk_length", "extra_k_cache", "extra_indices",
           "extra_topk_length")


def per_step_us(fn, args, kwargs) -> float:
    """Wall time per step over STEPS back-to-back steps (what a decode loop sees), after warm-up."""
    for _ in range(10):
        fn(*args, **kwargs)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(STEPS):
        fn(*args, **kwargs)
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / STEPS * 1e6


def check_shape(name: str, shape: dict, b: int) -> dict:
    shape = dict(shape)
    inputs = make_inputs(b, 1, shape.pop("h_q"), shape.pop("topk"), shape.pop("kv_format"), seed=b,
                         device="cuda", **shape)
    args = tuple(inputs[k] for k in TENSORS)
    kwargs = {"softmax_scale": inputs["softmax_scale"], "kv_format": inputs["kv_format"]}
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    row = {"shape": name, "b": b}
    try:
        for _ in range(3):  # CUDA-graph trees record on a later call than the first
            got = compiled(*args, **kwargs)
        eager = step(*args, **kwargs)
        torch.cuda.synchronize()
        row["equal_to_eager"] = bool(torch.equal(got[0], eager[0]) and torch.equal(got[1], eager[1]))
        ref_out, ref_lse = reference_sparse_mla_decode(**inputs)
        row["matches_reference"] = bool(check_close(got[0].float() / 2, got[1] - 1, ref_out.float(),
                                                    ref_lse.float())["ok"])
        fresh = make_inputs(b, 1, inputs["q"].shape[2], inputs["indices"].shape[2], inputs["kv_format"],
                            seed=100 + b, device="cuda", **shape)
        for key in TENSORS:  # new values in the same tensors, as a decode loop feeds a captured graph
            if inputs[key] is not None:
                inputs[key].copy_(fresh[key])
        got = compiled(*args, **kwargs)
        eager = step(*args, **kwargs)
        torch.cuda.synchronize()
        row["equal_to_eager_new_values"] = bool(torch.equal(got[0], eager[0]) and torch.equal(got[1], eager[1]))
        row["graph_breaks"] = sum(torch._dynamo.utils.counters["graph_break"].values())
        row["us_per_step"] = {"plain_function": per_step_us(plain_step, args, kwargs),
                              "custom_op_eager": per_step_us(step, args, kwargs),
                              "compiled_reduce_overhead": per_step_us(compiled, args, kwargs)}
    except Exception as error:  # reported in the table: the check failed, with the reason
        row["error"] = f"{type(error).__name__}: {str(error)[:2000]}"
    row["ok"] = "error" not in row and row["graph_breaks"] == 0 and all(
        row[k] for k in ("equal_to_eager", "matches_reference", "equal_to_eager_new_values"))
    return row


def main() -> int:
    target = sparse_mla_aot.prepare()
    rows = [check_shape(name, shape, b) for name, shape in SHAPES.items() for b in BATCHES]
    print(f"torch.compile(mode='reduce-overhead', fullgraph=True) over the custom op, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; us per step over {STEPS} back-to-back steps")
    print(f"{'shape':<40} {'b':>3}  {'ok':<5} {'plain fn':>9} {'op eager':>9} {'compiled':>9}  detail")
    for r in rows:
        t = r.get("us_per_step", {})
        detail = r.get("error") or (f"==eager {r['equal_to_eager']}, ==eager after new values "
                                    f"{r['equal_to_eager_new_values']}, reference {r['matches_reference']}, "
                                    f"graph breaks {r['graph_breaks']}")
        print(f"{r['shape']:<40} {r['b']:>3}  {str(r['ok']):<5} {t.get('plain_function', float('nan')):9.1f} "
              f"{t.get('custom_op_eager', float('nan')):9.1f} {t.get('compiled_reduce_overhead', float('nan')):9.1f}  "
              f"{detail[:300]}")
    if os.environ.get("OUT"):
        path = os.path.join(os.environ["OUT"], f"compile_check_{target}.json")
        with open(path + ".tmp", "w") as f:
            json.dump({"target": target, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "rows": rows}, f, indent=1)
        os.replace(path + ".tmp", path)
        print(f"wrote {path}")
    failed = [f"{r['shape']} b={r['b']}" for r in rows if not r["ok"]]
    if failed:
        print(f"FAILED: {len(failed)} of {len(rows)} checks: {'; '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
