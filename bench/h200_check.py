"""GPU acceptance run for the installed wheel: numerics of forced variants (a sample of the fused family, every
shipped ws variant) through the native launcher, every ws variant's CUDA-graph replay with fresh inputs, the
dispatched op at serving shapes, eager and replayed, two threads on two streams, no memory kept past a call, the
capture rules, and cold start (host time per call: bench/host_overhead.py). Prints a table per check and every
failure; writes the figures as JSON to $OUT (or ./gpu_check_<target>.json); exits 1 when any check failed.

    python bench/h200_check.py            # with sparse_mla_aot installed from wheels/
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import torch

import sparse_mla_aot
from sparse_mla_aot import ops, sparse_mla_decode
from sparse_mla_aot.contract import Variant
from sparse_mla_aot.dispatch import force_spec, forcing
from sparse_mla_aot.plan import make_plan
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode
from sparse_mla_aot.validation import check_arguments
from sanitize import last_wave_batch  # bench/, the script's folder

SHAPES = {"v32": dict(h_q=128, topk=2048), "model1": dict(h_q=64, topk=512, extra_topk=128)}
RESULTS: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}


def _inputs(kv_format: str, b: int, s_q: int, seed: int, **extra) -> dict:
    shape = dict(SHAPES[kv_format], **extra)
    return make_inputs(b, s_q, kv_format=kv_format, with_sink=True, with_topk_length=True, seed=seed,
                       device="cuda", **shape)


def _decode(inputs: dict, **kw):
    out = torch.full((*inputs["q"].shape[:3], 512), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.full(inputs["q"].shape[:3], float("nan"), dtype=torch.float32, device="cuda")
    return sparse_mla_decode(**inputs, out=out, lse=lse, **kw)


def _check(inputs: dict, out, lse) -> dict:
    ref_out, ref_lse = reference_sparse_mla_decode(**inputs)
    return check_close(out.float(), lse, ref_out.float(), ref_lse.float())


def _forced(inputs: dict, variant: Variant, splits: int) -> dict:
    """The numerics figures of `variant` forced at `splits`, or {"ok": None, "pruned": reason} when the wheel
    ships it pruned for this target: only that error; any other is the check's failure."""
    try:
        with forcing(force_spec(variant, splits)):
            return _check(inputs, *_decode(inputs))
    except ValueError as error:
        if "was pruned for" not in str(error):
            raise
        return {"ok": None, "pruned": str(error)}


# Per family: the shapes each variant is checked on (h_q 8 leaves a head block half empty; h_q 32 spans head blocks)
# at one split (the split kernel writes out, lse and the sink itself) and at 3 (partials and the combine kernel).
WS_CASES = [("model1", dict(h_q=16, topk=512, extra_topk=128)), ("model1", dict(h_q=8, topk=256, extra_topk=64)),
            ("v32", dict(h_q=32, topk=1024)), ("v32", dict(h_q=16, topk=256))]
# block_h 64 variants (the wg family) also at the head counts they are for: one and two full head blocks.
WIDE_CASES = [("model1", dict(h_q=64, topk=512, extra_topk=128)), ("v32", dict(h_q=128, topk=1024))]


def shipped_ws_variants() -> list[Variant]:
    """Every variant with producer warps (the ws and pingpong families) the wheel ships for this target, in name
    order."""
    shipped = ops.catalog().shipped(RESULTS["target"])
    return [shipped[n].variant for n in sorted(shipped) if shipped[n].variant and shipped[n].variant.consumer_groups]


def variant_numerics() -> list:
    """Forced variants, b=3, s_q=2 (6 rows), sink + topk_length (+ the extra set for model1): fused bh {16, 64} x
    bt {16, 32} x tiles in flight {1, 2}, 8 warps, at h_q 64, 4 splits; every shipped ws variant on WS_CASES at 1
    and 3 splits (block_h 64 ones on WIDE_CASES too)."""
    rows = []
    for kv_format in ("v32", "model1"):
        inputs = _inputs(kv_format, 3, 2, seed=1, h_q=64)
        for bh in (16, 64):
            for bt in (16, 32):
                for stages in (1, 2):
                    variant = Variant(kv_format, "fused", bh, bt, 8, stages)
                    rows.append({"kv_format": kv_format, "variant": variant.name, "case": "h_q 64, 4 splits",
                                 **_forced(inputs, variant, 4)})
    ws = shipped_ws_variants()
    for i, (kv_format, shape) in enumerate(WS_CASES + WIDE_CASES):
        inputs = make_inputs(3, 2, kv_format=kv_format, with_sink=True, with_topk_length=True, seed=20 + i,
                             device="cuda", **shape)
        wide = i >= len(WS_CASES)
        for variant in sorted(v for v in ws if v.kv_format == kv_format and (v.block_h == 64 or not wide)):
            for splits in (1, 3):
                case = f"h_q {shape['h_q']} topk {shape['topk']}+{shape.get('extra_topk', 0)}, {splits} split(s)"
                rows.append({"kv_format": kv_format, "variant": variant.name, "case": case,
                             **_forced(inputs, variant, splits)})
    return rows


def ws_graph_replays() -> list:
    """Every shipped ws variant captured once (forced, 3 splits) and replayed with fresh q, cache bytes, indices and
    lengths copied into the captured tensors: the replay passes the numerics rule and equals an eager call."""
    rows = []
    for variant in shipped_ws_variants():
        with forcing(force_spec(variant, 3)):
            topk = {"topk": 512, "extra_topk": 128} if variant.kv_format == "model1" else {"topk": 1024}
            rows.append({"variant": variant.name, **_replay_fresh(variant.kv_format, 4, 1, seed=500, h_q=16, **topk)})
    return rows


def _replay_fresh(kv_format: str, b: int, s_q: int, seed: int, static: dict | None = None, **shape) -> dict:
    """Capture one call (on `static`, else on inputs of `seed`), copy fresh inputs (new q, cache bytes, indices,
    lengths, sink) into the captured tensors, replay: the figures of the replay, and whether it equals an eager call
    on the fresh inputs."""
    static = static if static is not None else _inputs(kv_format, b, s_q, seed=seed, **shape)
    sparse_mla_decode(**static)  # loads the kernels outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_lse = sparse_mla_decode(**static)
    fresh = _inputs(kv_format, b, s_q, seed=seed + 1, **shape)
    for key in ("q", "indices", "topk_length", "extra_indices", "extra_topk_length", "attn_sink"):
        if static.get(key) is not None:
            static[key].copy_(fresh[key])
    for key in ("k_cache", "extra_k_cache"):
        if static.get(key) is not None:
            static[key].untyped_storage().copy_(fresh[key].untyped_storage())
    graph.replay()
    torch.cuda.synchronize()
    e_out, e_lse = _decode(fresh)
    return {"replay": _check(fresh, g_out, g_lse),
            "replay_equals_eager": bool(torch.equal(g_out, e_out) and torch.equal(g_lse, e_lse))}


def last_wave_variants() -> list[Variant]:
    """Every shipped variant with producer warps or warpgroup MMAs, and per kv_format the fused family's block_h 16
    and 64 at 8 warps, 64-token tiles, one tile in flight, where shipped."""
    shipped = ops.catalog().shipped(RESULTS["target"])
    fused = {Variant(kv, "fused", bh, 64, 8, 1).name for kv in ("v32", "model1") for bh in (16, 64)}
    return [shipped[n].variant for n in sorted(shipped)
            if shipped[n].variant and (shipped[n].variant.family != "fused" or n in fused)]


def last_wave_splits() -> list:
    """Each last_wave_variants() variant forced at 2 splits on a batch of about 1.5 waves of its programs (the
    device's SMs x the programs one holds; h_q 128 or 64 for block_h 64, else 32): the rows of the whole wave run
    unsplit and write out and lse, the rest split and go through the combine kernel. Captured once and replayed
    with fresh inputs, compared with the reference and with an eager call."""
    kernels = ops._kernels_for(torch.cuda.current_device())
    rows = []
    for variant in last_wave_variants():
        kernels.load([variant.name])
        wave = kernels.kernels[variant.name].wave
        h_q = 32 if variant.block_h < 64 else SHAPES[variant.kv_format]["h_q"]
        b = last_wave_batch(wave, variant.block_h, h_q)
        static = _inputs(variant.kv_format, b, 1, seed=700, h_q=h_q)
        plan = make_plan(check_arguments(**static), variant.name, variant.block_h, variant.block_t, 2, wave)
        with forcing(force_spec(variant, 2)):
            rows.append({"variant": variant.name, "b": b, "h_q": h_q, "wave": wave,
                         "unsplit_rows": plan.unsplit_rows, "exercised": 0 < plan.unsplit_rows < b,
                         **_replay_fresh(variant.kv_format, b, 1, seed=700, static=static, h_q=h_q)})
    return rows


def dispatched_numerics_and_graphs() -> list:
    rows = []
    for kv_format in ("v32", "model1"):
        for b in (1, 8, 32, 96):
            for s_q in (1, 2):
                eager_inputs = _inputs(kv_format, b, s_q, seed=10 + b + s_q)
                figures = _check(eager_inputs, *_decode(eager_inputs))
                rows.append({"kv_format": kv_format, "b": b, "s_q": s_q, "explain":
                             sparse_mla_aot.explain(b, s_q, SHAPES[kv_format]["h_q"], kv_format),
                             "eager": figures, **_replay_fresh(kv_format, b, s_q, seed=100 + b)})
    return rows


def concurrent_streams(iterations: int = 50) -> dict:
    """Two threads on two streams, each decoding its own inputs back to back (no synchronization between its calls,
    so each call's split workspace reuses blocks that the call before it on that stream freed while its kernels may
    still run): every result equals a sequential call's."""
    import threading

    jobs = [_inputs("model1", 8, 1, seed=300 + i) for i in range(2)]
    expected = [tuple(t.clone() for t in sparse_mla_decode(**inputs)) for inputs in jobs]
    streams = [torch.cuda.Stream() for _ in jobs]
    mismatches = [0, 0]

    def worker(i: int) -> None:
        with torch.cuda.stream(streams[i]):
            results = [sparse_mla_decode(**jobs[i]) for _ in range(iterations)]
            streams[i].synchronize()
        mismatches[i] = sum(not (torch.equal(out, expected[i][0]) and torch.equal(lse, expected[i][1]))
                            for out, lse in results)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"threads": 2, "iterations_each": iterations, "mismatches": mismatches}


def memory_kept(calls: int = 100) -> dict:
    """Nothing a call allocates outlives it but its outputs: after calls whose outputs are dropped, PyTorch's
    allocator holds the bytes it held before (each call frees its split workspace; b=1 plans have one)."""
    inputs = _inputs("v32", 1, 1, seed=400)
    sparse_mla_decode(**inputs)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(calls):
        sparse_mla_decode(**inputs)
    torch.cuda.synchronize()
    return {"calls": calls, "bytes_before": before, "bytes_after": torch.cuda.memory_allocated()}


# A first call under capture is refused with a clear error (no module load, no allocation outside the graph's pool);
# after prepare(), a call whose signature is new is planned under capture and its replay equals eager.
CAPTURE_RULES = r"""
import torch, sparse_mla_aot
from sparse_mla_aot.reference import make_inputs
inputs = make_inputs(2, 1, 64, 512, "model1", extra_topk=128, device="cuda", seed=7)
torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(graph):
        sparse_mla_aot.sparse_mla_decode(**inputs)
    refused = "no error"
except RuntimeError as error:
    refused = str(error).split(":")[0]
sparse_mla_aot.prepare()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    out, lse = sparse_mla_aot.sparse_mla_decode(**inputs)
graph.replay()
eager = sparse_mla_aot.sparse_mla_decode(**inputs)
torch.cuda.synchronize()
print(repr(refused), torch.equal(out, eager[0]) and torch.equal(lse, eager[1]))
"""


def capture_rules() -> dict:
    run = subprocess.run([sys.executable, "-c", CAPTURE_RULES], capture_output=True, text=True)
    if run.returncode:
        return {"ok": False, "error": run.stderr[-2000:]}
    refused, replay_equals_eager = run.stdout.strip().rsplit(" ", 1)
    return {"ok": "first called under CUDA-graph capture" in refused and replay_equals_eager == "True",
            "first_call_under_capture": refused, "new_signature_under_capture_replay_equals_eager":
            replay_equals_eager == "True"}


COLD = r"""
import sys, time, torch
torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
t0 = time.perf_counter()
import sparse_mla_aot
t_import = time.perf_counter() - t0
from sparse_mla_aot.reference import make_inputs, reference_sparse_mla_decode, check_close  # untimed: test data
inputs = make_inputs(8, 1, 64, 512, "model1", extra_topk=128, device="cuda", seed=3)
torch.cuda.synchronize()
t1 = time.perf_counter()
out, lse = sparse_mla_aot.sparse_mla_decode(**inputs)
torch.cuda.synchronize()
t_first_call = time.perf_counter() - t1
ok = check_close(out.float(), lse, *reference_sparse_mla_decode(**inputs))["ok"]
print(f"{t_import + t_first_call:.4f} {ok} {'triton' in sys.modules} {t_import:.4f} {t_first_call:.4f}")
"""


def cold_start(runs: int = 3) -> dict:
    values = []
    for _ in range(runs):
        seconds, ok, triton_loaded, import_s, first_call_s = subprocess.run(
            [sys.executable, "-c", COLD], capture_output=True, text=True, check=True).stdout.split()
        values.append({"seconds": float(seconds), "import_s": float(import_s), "first_call_s": float(first_call_s),
                       "correct": ok == "True", "triton_imported": triton_loaded})
    return {"runs": values, "median_s": statistics.median(v["seconds"] for v in values)}


def _figures(r: dict) -> str:
    return (f"rel_err {r['rel_err']:.2e}  cos {r['cos_diff']:.1e}  lse {r['lse_max_err']:.1e}  "
            f"{'PASS' if r['ok'] else 'FAIL ' + '; '.join(r['failures'])}")


def failures(results: dict) -> list[str]:
    """Every check of `results` that failed, one line each (empty: all passed)."""
    found = [f"{r['variant']} ({r['case']}): {'; '.join(r['failures'])}" for r in results["variants"]
             if r["ok"] is False]
    for r in results["dispatched"]:
        where = f"dispatched {r['kv_format']} b={r['b']} s_q={r['s_q']}"
        found += [f"{where} {kind}: {'; '.join(r[kind]['failures'])}" for kind in ("eager", "replay")
                  if not r[kind]["ok"]]
        found += [f"{where}: graph replay differs from eager"] if not r["replay_equals_eager"] else []
    for r in results["last_wave_splits"]:
        where = f"{r['variant']} b={r['b']} h_q={r['h_q']} (2 splits, last wave)"
        found += [f"{where} graph replay: {'; '.join(r['replay']['failures'])}"] if not r["replay"]["ok"] else []
        found += [f"{where}: graph replay differs from eager"] if not r["replay_equals_eager"] else []
        found += [f"{where}: {r['unsplit_rows']} unsplit rows, not a mix"] if not r["exercised"] else []
    for r in results["ws_graph_replays"]:
        found += [f"{r['variant']} graph replay: {'; '.join(r['replay']['failures'])}"] if not r["replay"]["ok"] else []
        found += [f"{r['variant']}: graph replay differs from eager"] if not r["replay_equals_eager"] else []
    if any(results["concurrent_streams"]["mismatches"]):
        found.append(f"two streams: mismatches {results['concurrent_streams']['mismatches']}")
    memory = results["memory_kept"]
    if memory["bytes_after"] != memory["bytes_before"]:
        found.append(f"allocator bytes {memory['bytes_before']} -> {memory['bytes_after']} after dropped outputs")
    if not results["capture_rules"]["ok"]:
        found.append(f"capture rules: {results['capture_rules']}")
    if results["triton_in_sys_modules"]:
        found.append("triton was imported by the runtime")
    found += [f"cold start run {i}: {run}" for i, run in enumerate(results["cold_start"]["runs"])
              if not run["correct"] or run["triton_imported"] != "False"]
    return found


def main() -> int:
    RESULTS["target"] = sparse_mla_aot.prepare()
    RESULTS["variants"] = variant_numerics()
    print(f"{RESULTS['target']} forced variants, b=3 s_q=2, sink + topk_length:")
    for r in RESULTS["variants"]:
        detail = r["pruned"][:100] if r["ok"] is None else _figures(r)
        print(f"  {r['variant']:<26} {r['case']:<32} {detail}")
    RESULTS["ws_graph_replays"] = ws_graph_replays()
    print("ws variants (forced, 3 splits), graph replay with fresh inputs:")
    for r in RESULTS["ws_graph_replays"]:
        print(f"  {r['variant']:<26} {_figures(r['replay'])}  ==eager {r['replay_equals_eager']}")
    RESULTS["last_wave_splits"] = last_wave_splits()
    print("2 splits at about 1.5 waves (the first wave's rows unsplit), graph replay with fresh inputs:")
    for r in RESULTS["last_wave_splits"]:
        print(f"  {r['variant']:<26} b={r['b']:<4} h_q={r['h_q']:<3} wave {r['wave']:<4} unsplit rows "
              f"{r['unsplit_rows']:<4} {_figures(r['replay'])}  ==eager {r['replay_equals_eager']}")
    RESULTS["dispatched"] = dispatched_numerics_and_graphs()
    print("dispatched op (v32 h128 topk 2048; model1 h64 topk 512 + 128 extra), eager and graph replay:")
    for r in RESULTS["dispatched"]:
        e, g = r["eager"], r["replay"]
        print(f"  {r['kv_format']:<7} b={r['b']:<3} s_q={r['s_q']}  eager rel {e['rel_err']:.2e} "
              f"{'PASS' if e['ok'] else 'FAIL'}  replay-with-fresh-inputs rel {g['rel_err']:.2e} "
              f"{'PASS' if g['ok'] else 'FAIL'}  ==eager {r['replay_equals_eager']}  [{r['explain'][:60]}]")
    RESULTS["concurrent_streams"] = concurrent_streams()
    print(f"two threads x two streams: {RESULTS['concurrent_streams']}")
    RESULTS["memory_kept"] = memory_kept()
    print(f"allocator bytes before / after 100 calls with dropped outputs: {RESULTS['memory_kept']}")
    RESULTS["capture_rules"] = capture_rules()
    print(f"capture rules (fresh process): {RESULTS['capture_rules']}")
    RESULTS["triton_in_sys_modules"] = "triton" in sys.modules
    RESULTS["cold_start"] = cold_start()
    print(f"triton in sys.modules after calls: {RESULTS['triton_in_sys_modules']}")
    print(f"cold start (import -> first correct result): {RESULTS['cold_start']}")
    RESULTS["failures"] = failures(RESULTS)
    path = os.path.join(os.environ.get("OUT", "."), f"gpu_check_{RESULTS['target']}.json")
    with open(path, "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)
    passed = sum(1 for r in RESULTS["variants"] if r["ok"]) + sum(
        r["eager"]["ok"] + r["replay"]["ok"] for r in RESULTS["dispatched"]) + sum(
        r["replay"]["ok"] for r in RESULTS["ws_graph_replays"]) + sum(
        r["replay"]["ok"] for r in RESULTS["last_wave_splits"])
    print(f"{RESULTS['target']}: {passed} numerics checks passed, {len(RESULTS['failures'])} failures")
    for line in RESULTS["failures"]:
        print(f"FAIL {line}")
    return 1 if RESULTS["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
