"""Our dispatched op beside its peers, one table per shape (SPEC section 9), all measured in one run on one GPU:

- ours: the installed wheel's cubins, variant and split count from the dispatch table;
- JIT: the same template rendered with BLOCK_H / BLOCK_T as constexprs under @triton.autotune over the same grid
  the table was tuned from (x split counts), the engines' way, re-tuned at every batch size (its best case);
- FlashMLA's flash_mla_with_kvcache where `flash_mla` is importable (skipped otherwise);
- the floor: max(bytes / measured copy bandwidth, matmul FLOPs / measured bf16 matrix rate).

Device times: CUDA-graph replay of one call per rotating input set (build_tools.gpu_timing, as `tune` measures),
median per call. Also first-call time of both paths (fresh process; the JIT path with an empty Triton cache)
and host time of one eager call. Prints the tables; writes $OUT/peers.json.

    python bench/peers.py            # GPU host: sparse_mla_aot installed from the wheel, triton for the JIT path
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import sparse_mla_aot  # noqa: E402
from build_tools.gpu_timing import (InputSets, Shape, capture, floor_us, measure_ceilings,  # noqa: E402
                                    replay_times_us, summary)
from build_tools.kernels import COMBINE_NUM_WARPS, SPLIT_PARAMS  # noqa: E402
from build_tools.tune import SPLITS  # noqa: E402
from sparse_mla_aot import ops  # noqa: E402
from sparse_mla_aot.plan import (COMBINE_ARG_NAMES, SPLIT_ARG_NAMES, allocate_partials,  # noqa: E402
                                 combine_arguments, make_plan, split_arguments)
from sparse_mla_aot.validation import D_V, check_arguments  # noqa: E402
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode  # noqa: E402

SHAPES = {
    "v32/h128/topk2048": Shape("v32", 128, 2048, 0),
    "model1/h64/topk512+128": Shape("model1", 64, 512, 128),
    "model1/h16/topk512": Shape("model1", 16, 512, 0),
}
BATCHES = (1, 2, 4, 8, 16, 32, 64, 96, 128)
# The variants the committed sm90 tables were tuned over (the --variants of their provenance's command): the JIT
# path autotunes over exactly these, times every split count.
JIT_GRID = {"v32": "v32_*_w4_s2", "model1": "model1_*_s2"}
# Autotuner timing per config (ms): shorter than Triton's default 25 / 100 so a run fits the device budget.
AUTOTUNE_WARMUP_MS, AUTOTUNE_REP_MS = 5, 20
REPLAYS = 100
POINTER_DTYPES = {"*i32": torch.int32, "*u8": torch.uint8, "*bf16": torch.bfloat16, "*fp32": torch.float32}


class AutotunedJit:
    """The JIT peer: render once, compile on first use, autotune per batch-rows value (a tuner per value, sharing
    the compiled kernels). Host code (validation, plan, workspace, argument order) is the runtime's own."""

    def __init__(self, kv_format: str, variants: list[dict]):
        import triton  # here, not at the top: the "ours" first-call process never imports it

        from build_tools.compile import load_jit_function
        from build_tools.render import AutotunedBlocks, render_combine, render_split

        self.triton = triton
        directory = Path(tempfile.mkdtemp(prefix="peers_jit_"))
        kernels = {}
        for rendered in (render_split(AutotunedBlocks(kv_format)), render_combine()):
            path = directory / f"{rendered.name}.py"
            path.write_text(rendered.source)
            kernels[rendered.name] = load_jit_function(path, rendered.kernel_name)
        self.split_fn, self.combine_fn = kernels[f"{kv_format}_autotuned"], kernels["combine"]
        self.variants = variants
        self.smallest_tile = min(v["block_t"] for v in variants)  # sizes the workspace for the most splits
        self.tuners: dict[int, object] = {}
        self.dummies: dict[torch.dtype, torch.Tensor] = {}  # made once, outside any capture

    def _tuner(self, batch_rows: int, tokens: int):
        if batch_rows not in self.tuners:
            configs = [self.triton.Config({"BLOCK_H": v["block_h"], "BLOCK_T": v["block_t"], "num_splits": s},
                                          num_warps=v["num_warps"], num_stages=v["num_stages"])
                       for v in self.variants for s in SPLITS if s <= tokens // v["block_t"]]
            bench = lambda fn, quantiles: self.triton.testing.do_bench(  # noqa: E731
                fn, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)
            self.tuners[batch_rows] = self.triton.autotune(configs, key=["h_q"], do_bench=bench)(self.split_fn)
        return self.tuners[batch_rows]

    def choice(self, batch_rows: int) -> str:
        config = self.tuners[batch_rows].best_config
        return (f"bh{config.kwargs['BLOCK_H']} bt{config.kwargs['BLOCK_T']} w{config.num_warps} "
                f"s{config.num_stages} x{config.kwargs['num_splits']}")

    def decode(self, q, k_cache, indices, softmax_scale, **options):
        call = check_arguments(q, k_cache, indices, softmax_scale, **options)
        tuner = self._tuner(call.batch_rows, call.topk + call.extra_topk)
        plan = make_plan(call, "jit", 16, self.smallest_tile, max(SPLITS))
        partial_out, partial_lse = allocate_partials(plan, q.device)
        args = dict(zip(SPLIT_ARG_NAMES, split_arguments(call, plan, partial_out, partial_lse, pointer=_itself)))
        del args["num_splits"]  # the autotuner's config supplies it
        # The runtime passes q for absent optional tensors (the cubins' signature is fixed); a JIT kernel would
        # specialize on q's dtype and not compile, so those get a dummy of the declared type.
        for param in SPLIT_PARAMS:
            dtype = POINTER_DTYPES.get(param.type)
            if dtype is not None and args[param.name].dtype != dtype:
                if dtype not in self.dummies:
                    self.dummies[dtype] = torch.empty(1, dtype=dtype, device=q.device)
                args[param.name] = self.dummies[dtype]
        rows, h_q = call.batch_rows, call.h_q
        tuner[lambda meta: (rows, self.triton.cdiv(h_q, meta["BLOCK_H"]), meta["num_splits"])](**args)
        plan = replace(plan, num_splits=tuner.best_config.kwargs["num_splits"])
        out = torch.empty((call.batch, call.s_q, h_q, D_V), dtype=torch.bfloat16, device=q.device)
        lse = torch.empty((call.batch, call.s_q, h_q), dtype=torch.float32, device=q.device)
        combine = combine_arguments(call, plan, partial_out, partial_lse, out, lse, pointer=_itself)
        assert len(combine) == len(COMBINE_ARG_NAMES)
        self.combine_fn[(rows, h_q, 1)](*combine, num_warps=COMBINE_NUM_WARPS)
        return out, lse


def _itself(tensor):
    return tensor


def jit_variants(kv_format: str) -> list[dict]:
    shipped = ops.catalog().shipped(sparse_mla_aot.prepare())
    return [r["variant"] for name, r in sorted(shipped.items())
            if r["kind"] == "split" and fnmatch.fnmatch(name, JIT_GRID[kv_format])]


def flash_mla_decode():
    """FlashMLA's decode when importable, in the call form our compat wrapper mirrors; else the import error."""
    try:
        import flash_mla
    except ImportError as error:
        return None, f"skipped: flash_mla not importable ({error})"

    def decode(q, k_cache, indices, softmax_scale, attn_sink=None, extra_k_cache=None, extra_indices=None, **_):
        return flash_mla.flash_mla_with_kvcache(
            q, k_cache, None, None, 512, flash_mla.get_mla_metadata()[0], None, softmax_scale, False, True, indices,
            attn_sink=attn_sink, extra_k_cache=extra_k_cache, extra_indices_in_kvcache=extra_indices)
    return decode, "flash_mla importable"


def first_call(path: str, shape: Shape) -> dict:
    """In this (fresh) process: inputs and CUDA context first, then the clock runs from importing the package
    (and, for the JIT path, rendering + compiling + autotuning) to a synchronized first result, checked."""
    inputs = make_inputs(1, 1, shape.h_q, shape.topk, shape.kv_format, extra_topk=shape.extra_topk, with_sink=True,
                         device="cuda", seed=3)
    torch.cuda.synchronize()
    started = time.perf_counter()
    if path == "ours":
        out, lse = sparse_mla_aot.sparse_mla_decode(**inputs)
    else:
        out, lse = AutotunedJit(shape.kv_format, jit_variants(shape.kv_format)).decode(**inputs)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    figures = check_close(out.float(), lse, *(t.float() for t in reference_sparse_mla_decode(**inputs)))
    return {"seconds": seconds, "ok": figures["ok"]}


def first_call_in_fresh_process(path: str, shape_name: str, triton_cache: str) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=triton_cache)
    result = subprocess.run([sys.executable, __file__, "--first-call", path, "--shapes", shape_name],
                            capture_output=True, text=True, env=env)
    if result.returncode:
        return {"seconds": None, "ok": False, "error": result.stderr[-2000:]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def host_us(decode, inputs: dict, calls: int = 500) -> float:
    """Median host time of one eager call; the GPU is drained first so the launch queue never blocks."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        started = time.perf_counter()
        decode(**inputs)
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def timed(sets: list[dict], decode) -> dict:
    graph = capture(sets, decode)
    return summary(replay_times_us(graph, len(sets), REPLAYS))


def run_shape(name: str, shape: Shape, batches, ceilings: dict, flash) -> dict:
    jit = AutotunedJit(shape.kv_format, jit_variants(shape.kv_format))
    inputs = InputSets(shape, seed=len(name))
    rows = []
    for batch in batches:
        sets = inputs.sets_for(batch)
        ours = timed(sets, sparse_mla_aot.sparse_mla_decode)
        started = time.perf_counter()
        jit_out, jit_lse = jit.decode(**sets[0])  # autotunes at this batch size
        torch.cuda.synchronize()
        tune_s = time.perf_counter() - started
        out, lse = sparse_mla_aot.sparse_mla_decode(**sets[0])
        agreement = check_close(jit_out.float(), jit_lse, out.float(), lse)
        row = {"batch_rows": batch, "ours": ours, "jit": timed(sets, jit.decode), "jit_autotune_s": tune_s,
               "jit_choice": jit.choice(batch), "jit_agrees": agreement["ok"],
               "our_choice": sparse_mla_aot.explain(batch, 1, shape.h_q, shape.kv_format).split("(")[0].strip(),
               "floor_us": floor_us(shape, batch, ceilings)}
        if flash:
            try:
                row["flash_mla"] = timed(sets, flash)
            except Exception as error:  # noqa: BLE001 -- a peer's failure is reported, not fatal
                row["flash_mla_error"] = f"{type(error).__name__}: {error}"
        rows.append(row)
        print(f"  {name} b={batch}: ours {ours['median_us']:.1f} us, JIT {row['jit']['median_us']:.1f} us "
              f"({row['jit_choice']}, tuned in {tune_s:.1f} s)", flush=True)
    sets = inputs.sets_for(1)
    host = {"ours_us": host_us(sparse_mla_aot.sparse_mla_decode, sets[0]), "jit_us": host_us(jit.decode, sets[0])}
    return {"shape": name, "rows": rows, "host": host}


def format_shape(result: dict, flash_status: str) -> str:
    lines = [f"\n{result['shape']}   (FlashMLA: {flash_status})",
             f"{'b':>4} {'ours us':>9} {'JIT us':>9} {'ours/JIT':>8} {'floor us':>9} {'floor/ours':>10}  "
             f"{'our choice':<34} JIT choice"]
    for r in result["rows"]:
        ours, jit = r["ours"]["median_us"], r["jit"]["median_us"]
        flash = f"  FlashMLA {r['flash_mla']['median_us']:.1f} us" if "flash_mla" in r else ""
        lines.append(f"{r['batch_rows']:>4} {ours:>9.1f} {jit:>9.1f} {ours / jit:>8.2f} {r['floor_us']:>9.1f} "
                     f"{r['floor_us'] / ours:>10.3f}  {r['our_choice']:<34} {r['jit_choice']}"
                     f"{'' if r['jit_agrees'] else '  (JIT output differs from ours!)'}{flash}")
    host, first = result["host"], result["first_call"]
    lines.append(f"host time of one eager call (b=1): ours {host['ours_us']:.1f} us, JIT {host['jit_us']:.1f} us")
    lines.append("first call (fresh process): " + ", ".join(
        f"{path} {f['seconds']:.3f} s{'' if f['ok'] else ' (FAILED)'}" if f["seconds"] is not None
        else f"{path} failed" for path, f in first.items())
        + ("" if first["jit"].get("compiled_cold") else " (JIT kernels already compiled by an earlier shape)"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {list(SHAPES)}")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)))
    parser.add_argument("--first-call", choices=("ours", "jit"), help=argparse.SUPPRESS)  # the fresh-process mode
    args = parser.parse_args()
    names = args.shapes.split(",")
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; known: {list(SHAPES)}")
    if args.first_call:
        print(json.dumps(first_call(args.first_call, SHAPES[names[0]])))
        return

    sparse_mla_aot.prepare()
    ceilings = measure_ceilings()
    flash, flash_status = flash_mla_decode()
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "ceilings": ceilings,
               "flash_mla": flash_status, "autotune_ms": [AUTOTUNE_WARMUP_MS, AUTOTUNE_REP_MS], "shapes": []}
    print(f"{results['device']}: copy {ceilings['copy_bytes_per_s'] / 1e12:.2f} TB/s, bf16 matmul "
          f"{ceilings['bf16_flops_per_s'] / 1e12:.0f} TFLOP/s; {flash_status}", flush=True)
    out_dir = Path(os.environ.get("OUT", "."))
    caches: dict[str, str] = {}  # one Triton cache per kv_format: its first shape's JIT first call compiles cold
    for name in names:
        shape = SHAPES[name]
        cold = shape.kv_format not in caches
        cache = caches.setdefault(shape.kv_format, tempfile.mkdtemp(prefix="peers_triton_cache_"))
        first = {path: first_call_in_fresh_process(path, name, cache) for path in ("ours", "jit")}
        first["jit"]["compiled_cold"] = cold  # else the kernels came from the same kv_format's earlier shape
        os.environ["TRITON_CACHE_DIR"] = cache  # the main run reuses what the first call compiled
        result = run_shape(name, shape, [int(b) for b in args.batches.split(",")], ceilings, flash)
        result["first_call"] = first
        results["shapes"].append(result)
        print(format_shape(result, flash_status), flush=True)
        (out_dir / "peers.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
