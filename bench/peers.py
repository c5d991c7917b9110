"""Our dispatched op beside its peers, one table per shape (docs/design.md#performance), all measured in one run on
one GPU:

- ours: the installed wheel's cubins, variant and split count from the dispatch table;
- JIT: the same template rendered with BLOCK_H / BLOCK_T as constexprs under @triton.autotune (the engines' way)
  over a family of the grid plus every variant our tuned tables choose (x split counts), re-tuned at every batch
  size: it can always take our choice, so a ratio above 1 is code or overhead, not the search;
- FlashMLA's flash_mla_with_kvcache where `flash_mla` is importable (skipped otherwise);
- the floor: max(bytes / measured copy bandwidth, matmul FLOPs / measured bf16 matrix rate).

Device times: CUDA-graph replay of one call per rotating input set (tuning.gpu_timing, as `tune` measures),
median per call. Also first-call time of both paths (fresh process; the JIT path with an empty Triton cache, or
with one filled by --precompile-jobs, as labelled) and host time of one eager call. Prints the tables; writes
$OUT/peers.json.

    python bench/peers.py            # GPU host: sparse_mla_aot installed from the wheel, triton for the JIT path
    python bench/peers.py --shapes model1/h64/topk512+128,model1/h16/topk512 --precompile-jobs 12
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
from sparse_mla_aot import ops  # noqa: E402
from sparse_mla_aot.paths import TARGET_ENV  # noqa: E402
from sparse_mla_aot.contract import (BYTES_PER_TOKEN, COMBINE_ARG_NAMES, COMBINE_NAME, D_QK, D_V,  # noqa: E402
                                     SPLIT_ARG_NAMES, SPLIT_PARAMS, Variant)
from sparse_mla_aot.plan import allocate_partials, as_is, combine_arguments, make_plan, split_arguments  # noqa: E402
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode  # noqa: E402
from sparse_mla_aot.validation import check_arguments  # noqa: E402
from tuning.gpu_timing import (InputSets, Shape, capture, floor_us, measure_ceilings,  # noqa: E402
                               replay_times_us, summary)

SHAPES = {name: Shape.parse(name) for name in (
    "v32/h128/topk2048", "v32/h64/topk2048", "model1/h64/topk512+128", "model1/h16/topk512",
    # 16-32 heads per GPU (V3.2 at TP8, V4-Flash at TP4): memory-bound (docs/design.md#performance)
    "model1/h16/topk512+128", "model1/h32/topk512+128", "v32/h16/topk2048", "v32/h32/topk2048")}
HBM_BYTES_PER_S = 4.8e12  # the H200's rated HBM bandwidth: the fraction columns are of this
BATCHES = (1, 2, 4, 8, 16, 32, 64, 96, 128)
# Below 64 heads engines pad q with zero heads to 64 for FlashMLA (the padding is outside the timed call here).
FLASH_MLA_PAD_HEADS = 64
# The JIT path autotunes (every split count) over a family of the grid plus every variant a tuned table of this
# target chooses, so it can always take our choice and re-tunes per batch size on top. Not the whole grid: on the
# H200's host, Triton 3.6 compiled 9 v32 variants in 130 s cold, and 32 model1 variants took 335 s across 12
# processes (a variant compiles once per value specialization of num_splits: 1, divisible by 16, other).
JIT_FAMILY = {"v32": "v32_fused_*_w4_s2", "model1": "model1_fused_*_s2"}
# Autotuner timing per config (ms): shorter than Triton's default 25 / 100 so a run fits the device budget.
AUTOTUNE_WARMUP_MS, AUTOTUNE_REP_MS = 5, 20
REPLAYS = 100
POINTER_DTYPES = {"*i32": torch.int32, "*u8": torch.uint8, "*bf16": torch.bfloat16, "*fp32": torch.float32}


class AutotunedJit:
    """The JIT peer: render once, compile on first use, autotune per batch-rows value (a tuner per value, sharing
    the compiled kernels). Host code (validation, plan, workspace, argument order) is the runtime's own."""

    def __init__(self, kv_format: str, variants: list[Variant], splits=None, specialize_ints: bool = True):
        """specialize_ints False: the integers our compile signature leaves unhinted are not value-specialized
        (no ==1 constants, no divisibility), as an AOT compile by this Triton would see them."""
        import triton  # here, not at the top: the "ours" first-call process never imports it

        from build_tools.compile import load_jit_function
        from build_tools.render import COMBINE_NUM_WARPS, AutotunedBlocks, render_combine, render_split
        from tuning.tune import SPLITS

        self.triton = triton
        directory = Path(tempfile.mkdtemp(prefix="peers_jit_"))
        kernels = {}
        for rendered in (render_split(AutotunedBlocks(kv_format)), render_combine()):
            path = directory / f"{rendered.name}.py"
            path.write_text(rendered.source)
            kernels[rendered.name] = load_jit_function(path, rendered.kernel_name)
        self.split_fn, self.combine_fn = kernels[f"{kv_format}_autotuned"], kernels[COMBINE_NAME]
        self.combine_warps = COMBINE_NUM_WARPS
        if not specialize_ints:
            unhinted = [p.name for p in SPLIT_PARAMS if p.type in ("i32", "i64") and p.divisible_by == 1]
            self.split_fn = triton.jit(self.split_fn.fn, do_not_specialize=unhinted)
        self.variants, self.splits = variants, splits or SPLITS
        self.smallest_tile = min(v.block_t for v in variants)  # sizes the workspace for the most splits
        self.tuners: dict[int, object] = {}
        self.dummies: dict[torch.dtype, torch.Tensor] = {}  # made once, outside any capture

    def _tuner(self, batch_rows: int, tokens: int):
        if batch_rows not in self.tuners:
            configs = [self.triton.Config({"BLOCK_H": v.block_h, "BLOCK_T": v.block_t, "num_splits": s},
                                          num_warps=v.num_warps, num_stages=v.num_stages)
                       for v in self.variants for s in self.splits if s <= tokens // v.block_t]
            bench = lambda fn, quantiles: self.triton.testing.do_bench(  # noqa: E731
                fn, warmup=AUTOTUNE_WARMUP_MS, rep=AUTOTUNE_REP_MS, quantiles=quantiles)
            self.tuners[batch_rows] = self.triton.autotune(configs, key=["h_q"], do_bench=bench)(self.split_fn)
        return self.tuners[batch_rows]

    def choice(self, batch_rows: int) -> str:
        config = self.tuners[batch_rows].best_config
        return (f"bh{config.kwargs['BLOCK_H']} bt{config.kwargs['BLOCK_T']} w{config.num_warps} "
                f"s{config.num_stages} x{config.kwargs['num_splits']}")

    def _split_call(self, q, k_cache, indices, softmax_scale, **options):
        """The validated call, its tuner, plan and workspace, and the split kernel's arguments (less num_splits,
        which the autotuner's config supplies)."""
        call = check_arguments(q, k_cache, indices, softmax_scale, **options)
        tuner = self._tuner(call.batch_rows, call.topk + call.extra_topk)
        plan = make_plan(call, "jit", 16, self.smallest_tile, max(self.splits))
        partial_out, partial_lse = allocate_partials(plan, q.device)
        out = torch.empty((call.batch, call.s_q, call.h_q, D_V), dtype=torch.bfloat16, device=q.device)
        lse = torch.empty((call.batch, call.s_q, call.h_q), dtype=torch.float32, device=q.device)
        args = dict(zip(SPLIT_ARG_NAMES, split_arguments(call, plan, partial_out, partial_lse, out, lse,
                                                         pointer=as_is)))
        del args["num_splits"]
        # The runtime passes q for absent optional tensors (the cubins' signature is fixed); a JIT kernel would
        # specialize on q's dtype and not compile, so those get a dummy of the declared type.
        for param in SPLIT_PARAMS:
            dtype = POINTER_DTYPES.get(param.type)
            if dtype is not None and args[param.name].dtype != dtype:
                if dtype not in self.dummies:
                    self.dummies[dtype] = torch.empty(1, dtype=dtype, device=q.device)
                args[param.name] = self.dummies[dtype]
        return call, tuner, plan, partial_out, partial_lse, out, lse, args

    def precompile(self, **inputs) -> None:
        """Compile every config for calls like `inputs` without launching (Autotuner.warmup): fills the Triton
        cache exactly as the first real call would, with the same specializations."""
        _, tuner, _, _, _, _, _, args = self._split_call(**inputs)
        tuner.warmup(**args, grid=(1, 1, 1))

    def decode(self, q, k_cache, indices, softmax_scale, **options):
        call, tuner, plan, partial_out, partial_lse, out, lse, args = self._split_call(q, k_cache, indices,
                                                                                       softmax_scale, **options)
        rows, h_q = call.batch_rows, call.h_q
        tuner[lambda meta: (rows * meta["num_splits"] * self.triton.cdiv(h_q, meta["BLOCK_H"]),)](**args)
        splits = tuner.best_config.kwargs["num_splits"]
        if splits > 1:  # one split wrote out and lse itself
            combine = combine_arguments(call, replace(plan, num_splits=splits), partial_out, partial_lse, out, lse,
                                        pointer=as_is)
            assert len(combine) == len(COMBINE_ARG_NAMES)
            self.combine_fn[(rows, h_q, 1)](*combine, num_warps=self.combine_warps)
        return out, lse


def jit_variants(kv_format: str, family: str | None = None) -> list[Variant]:
    """The JIT path's variants: fused ones (the template it autotunes; the ws family is Gluon) matching `family`
    (default JIT_FAMILY[kv_format]) or chosen by a tuned table."""
    target = sparse_mla_aot.prepare()
    tuned = {row.variant for table in ops.catalog().tables(target) if table.kv_format == kv_format
             and table.provenance.get("kind") == "tuned" for row in table.rows}
    shipped = ops.catalog().shipped(target)
    return [r.variant for name, r in sorted(shipped.items())
            if r.variant and r.variant.kv_format == kv_format and r.variant.family == "fused"
            and (fnmatch.fnmatch(name, family or JIT_FAMILY[kv_format]) or name in tuned)]


def shape_inputs(shape: Shape, seed: int) -> dict:
    return make_inputs(1, 1, shape.h_q, shape.topk, shape.kv_format, extra_topk=shape.extra_topk, with_sink=True,
                       device="cuda", seed=seed)


def family_args(family: str | None) -> list[str]:
    return ["--jit-family", family] if family else []


def precompile_in_parallel(shape_name: str, family: str | None, triton_cache: str, jobs: int) -> float:
    """Fill `triton_cache` with the JIT path's kernels for this shape, the variants dealt over `jobs` processes
    (compiles only, no launches); returns the wall seconds."""
    env = dict(os.environ, TRITON_CACHE_DIR=triton_cache)
    started = time.perf_counter()
    command = [sys.executable, __file__, "--shapes", shape_name, *family_args(family), "--precompile-slice"]
    workers = [subprocess.Popen([*command, f"{i}/{jobs}"], env=env, stderr=subprocess.PIPE, text=True)
               for i in range(jobs)]
    errors = [w.communicate()[1] for w in workers]  # drains each pipe, so no worker blocks on a full one
    failed = [(w.args, error[-2000:]) for w, error in zip(workers, errors) if w.returncode]
    if failed:
        raise RuntimeError(f"precompiling the JIT kernels failed: {failed}")
    return time.perf_counter() - started


def flash_mla_decode():
    """A factory of FlashMLA decode functions when `flash_mla` is importable (None and the import error otherwise).
    Each function owns one scheduler object, which FlashMLA plans on its first call: make one per shape and batch
    size (FlashMLA's rule; the length values here never change, no topk_length is passed)."""
    try:
        import flash_mla
    except ImportError as error:
        return None, f"skipped: flash_mla not importable ({error})"

    def make_decode():
        sched = flash_mla.get_mla_metadata()[0]

        def decode(q, k_cache, indices, softmax_scale, attn_sink=None, extra_k_cache=None, extra_indices=None, **_):
            out, lse = flash_mla.flash_mla_with_kvcache(
                q, k_cache, None, None, 512, sched, softmax_scale=softmax_scale, causal=False, is_fp8_kvcache=True,
                indices=indices, attn_sink=attn_sink, extra_k_cache=extra_k_cache,
                extra_indices_in_kvcache=extra_indices)
            return out, lse.transpose(1, 2)
        return decode
    return make_decode, "flash_mla importable"


def first_call(path: str, shape: Shape, family: str | None) -> dict:
    """In this (fresh) process: inputs and CUDA context first, then the clock runs from importing the package
    (and, for the JIT path, rendering + compiling + autotuning) to a synchronized first result, checked."""
    inputs = shape_inputs(shape, seed=3)
    torch.cuda.synchronize()
    started = time.perf_counter()
    if path == "ours":
        out, lse = sparse_mla_aot.sparse_mla_decode(**inputs)
    else:
        out, lse = AutotunedJit(shape.kv_format, jit_variants(shape.kv_format, family)).decode(**inputs)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    figures = check_close(out.float(), lse, *(t.float() for t in reference_sparse_mla_decode(**inputs)))
    return {"seconds": seconds, "ok": figures["ok"]}


def first_call_in_fresh_process(path: str, shape_name: str, family: str | None, triton_cache: str) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=triton_cache)
    result = subprocess.run([sys.executable, __file__, "--first-call", path, "--shapes", shape_name,
                             *family_args(family)],
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


def reference_check(decode, inputs: dict) -> dict:
    """The numerics rule's figures (docs/design.md#numerics) for one call of `decode` against the float64 reference on the same inputs."""
    out, lse = decode(**inputs)
    return check_close(out.float(), lse.float(), *(t.float() for t in reference_sparse_mla_decode(**inputs)))


def moved_bytes(shape: Shape, batch_rows: int) -> dict:
    """What one call must move through HBM at least: the gathered token records of both sets (each read once),
    q, and out and lse written."""
    gathered = batch_rows * (shape.topk + shape.extra_topk) * BYTES_PER_TOKEN[shape.kv_format]
    per_head = D_QK[shape.kv_format] * 2 + D_V * 2 + 4  # q (bf16), out (bf16), lse (fp32)
    return {"gathered": gathered, "all": gathered + batch_rows * shape.h_q * per_head}


def padded_heads(inputs: dict, heads: int) -> dict:
    """inputs with q (and the sink) padded with zero heads to `heads`, as an engine calls FlashMLA below 64 heads;
    the first h_q heads of the result are the call's."""
    q = inputs["q"]
    if q.shape[2] >= heads:
        return inputs
    padded = dict(inputs, q=torch.cat([q, q.new_zeros((*q.shape[:2], heads - q.shape[2], q.shape[3]))], dim=2))
    if inputs.get("attn_sink") is not None:
        sink = inputs["attn_sink"]
        padded["attn_sink"] = torch.cat([sink, sink.new_zeros(heads - sink.shape[0])])
    return padded


def flash_padded_check(decode, inputs: dict) -> dict:
    """The numerics rule for FlashMLA on q padded to FLASH_MLA_PAD_HEADS: its first h_q heads against the
    reference on the unpadded call."""
    out, lse = decode(**padded_heads(inputs, FLASH_MLA_PAD_HEADS))
    h_q = inputs["q"].shape[2]
    return check_close(out[:, :, :h_q].float(), lse[:, :, :h_q].float(),
                       *(t.float() for t in reference_sparse_mla_decode(**inputs)))


def run_shape(name: str, shape: Shape, family: str | None, batches, ceilings: dict, flash, with_jit: bool) -> dict:
    jit = AutotunedJit(shape.kv_format, jit_variants(shape.kv_format, family)) if with_jit else None
    inputs = InputSets(shape, seed=len(name))
    rows = []
    for batch in batches:
        sets = inputs.sets_for(batch)
        ours = timed(sets, sparse_mla_aot.sparse_mla_decode)
        row = {"batch_rows": batch, "ours": ours, "floor_us": floor_us(shape, batch, ceilings),
               "moved_bytes": moved_bytes(shape, batch), "sets": len(sets),
               "our_choice": sparse_mla_aot.explain(batch, 1, shape.h_q, shape.kv_format).split("(")[0].strip()}
        if jit:
            started = time.perf_counter()
            jit_out, jit_lse = jit.decode(**sets[0])  # autotunes at this batch size
            torch.cuda.synchronize()
            row["jit_autotune_s"] = time.perf_counter() - started
            out, lse = sparse_mla_aot.sparse_mla_decode(**sets[0])
            row.update(jit=timed(sets, jit.decode), jit_choice=jit.choice(batch),
                       jit_agrees=check_close(jit_out.float(), jit_lse, out.float(), lse)["ok"])
        if flash:
            row["flash_mla_heads"] = max(shape.h_q, FLASH_MLA_PAD_HEADS)
            try:
                row["flash_mla"] = timed([padded_heads(s, FLASH_MLA_PAD_HEADS) for s in sets], flash())
                row["flash_mla_numerics_ok"] = flash_padded_check(flash(), sets[0])["ok"]
            except Exception as error:  # noqa: BLE001 -- a peer's failure is reported, not fatal
                row["flash_mla_error"] = f"{type(error).__name__}: {error}"
        rows.append(row)
        print(f"  {name} b={batch}: ours {ours['median_us']:.1f} us"
              + (f", JIT {row['jit']['median_us']:.1f} us ({row['jit_choice']})" if jit else "")
              + (f", FlashMLA {row['flash_mla']['median_us']:.1f} us" if "flash_mla" in row else ""), flush=True)
    sets = inputs.sets_for(1)
    host = {"ours_us": host_us(sparse_mla_aot.sparse_mla_decode, sets[0])}
    if jit:
        host["jit_us"] = host_us(jit.decode, sets[0])
    return {"shape": name, "rows": rows, "host": host,
            "ours_numerics": reference_check(sparse_mla_aot.sparse_mla_decode, inputs.sets_for(8)[0])}


def _cell(value: float | None, spec: str, width: int) -> str:
    return f"{value:>{width}{spec}}" if value is not None else f"{'-':>{width}}"


def format_shape(result: dict, flash_status: str) -> str:
    lines = [f"\n{result['shape']}   (FlashMLA: {flash_status}; our numerics at b=8: "
             f"{'pass' if result['ours_numerics']['ok'] else 'FAIL ' + str(result['ours_numerics']['failures'])}; "
             f"GB/s from the gathered records, q, out and lse; 'gather' counts the records only; fractions are of "
             f"{HBM_BYTES_PER_S / 1e12:.1f} TB/s)",
             f"{'b':>4} {'ours us':>8} {'GB/s':>6} {'of peak':>7} {'gather':>6} {'FlashMLA us':>11} "
             f"{'ours/FlashMLA':>13} {'JIT us':>7} {'ours/JIT':>8} {'floor us':>8} {'floor/ours':>10}  "
             f"{'our choice':<34} JIT choice"]
    for r in result["rows"]:
        ours = r["ours"]["median_us"]
        jit = r["jit"]["median_us"] if "jit" in r else None
        flash = r["flash_mla"]["median_us"] if "flash_mla" in r else None
        moved = r["moved_bytes"]
        notes = ("" if r.get("jit_agrees", True) else "  (JIT output differs from ours!)") + (
            "" if r.get("flash_mla_numerics_ok", True) else "  (FlashMLA fails the numerics rule)") + (
            f"  FlashMLA error: {r['flash_mla_error']}" if "flash_mla_error" in r else "") + (
            f"  (FlashMLA on q padded to {r['flash_mla_heads']} heads)"
            if r.get("flash_mla_heads", 0) > Shape.parse(result["shape"]).h_q else "")
        lines.append(f"{r['batch_rows']:>4} {ours:>8.1f} {moved['all'] / ours / 1e3:>6.0f} "
                     f"{moved['all'] / ours / 1e-6 / HBM_BYTES_PER_S:>7.3f} "
                     f"{moved['gathered'] / ours / 1e-6 / HBM_BYTES_PER_S:>6.3f} {_cell(flash, '.1f', 11)} "
                     f"{_cell(ours / flash if flash else None, '.2f', 13)} {_cell(jit, '.1f', 7)} "
                     f"{_cell(ours / jit if jit else None, '.2f', 8)} {r['floor_us']:>8.1f} "
                     f"{r['floor_us'] / ours:>10.3f}  {r['our_choice']:<34} {r.get('jit_choice', '-')}{notes}")
    host, first = result["host"], result["first_call"]
    lines.append(f"host time of one eager call (b=1): ours {host['ours_us']:.1f} us"
                 + (f", JIT {host['jit_us']:.1f} us" if "jit_us" in host else ""))
    lines.append("first call (fresh process): " + ", ".join(
        f"{path} {f['seconds']:.3f} s{'' if f['ok'] else ' (FAILED)'}" if f["seconds"] is not None
        else f"{path} failed" for path, f in first.items()) + (
        f" (JIT's Triton cache: {result['jit_cache']}; {result['jit_variants']} variants ({result['jit_family']} "
        f"+ the tuned tables' choices) x split counts)" if "jit" in first else ""))
    return "\n".join(lines)


def shape_failures(result: dict) -> list[str]:
    """What went wrong in one shape's run: our numerics, a first call, the JIT disagreeing with us, or FlashMLA
    failing (an error, or the numerics rule)."""
    found = [] if result["ours_numerics"]["ok"] else [f"our numerics at b=8: {result['ours_numerics']['failures']}"]
    found += [f"{path} first call failed: {f.get('error', 'wrong result')}"
              for path, f in result["first_call"].items() if not f["ok"]]
    for r in result["rows"]:
        where = f"b={r['batch_rows']}"
        found += [f"{where}: the JIT path's output differs from ours"] if not r.get("jit_agrees", True) else []
        found += [f"{where}: FlashMLA error {r['flash_mla_error']}"] if "flash_mla_error" in r else []
        found += [f"{where}: FlashMLA fails the numerics rule"] if not r.get("flash_mla_numerics_ok", True) else []
    return [f"{result['shape']} {line}" for line in found]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=None,
                        help="the cubin set to run, e.g. sm89-proxy (sets SPARSE_MLA_AOT_TARGET; default: the "
                             "device's own)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {list(SHAPES)}")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)))
    parser.add_argument("--precompile-jobs", type=int, default=0,
                        help="compile each kv_format's JIT kernels in this many processes first (its first call is "
                             "then timed with a warm Triton cache); default 0: the first call compiles cold")
    parser.add_argument("--jit-family", default=None,
                        help=f"glob over variant names for the JIT path (besides the tuned tables' variants); "
                             f"default per kv_format: {JIT_FAMILY}")
    parser.add_argument("--no-jit", action="store_true", help="skip the JIT-autotuned path (ours, FlashMLA, floor)")
    parser.add_argument("--no-flash", action="store_true", help="skip FlashMLA even where it is importable")
    parser.add_argument("--first-call", choices=("ours", "jit"), help=argparse.SUPPRESS)  # the fresh-process mode
    parser.add_argument("--precompile-slice", help=argparse.SUPPRESS)  # a precompile worker: "i/n"
    args = parser.parse_args()
    if args.target:
        os.environ[TARGET_ENV] = args.target  # child processes (first calls) inherit it
    names = args.shapes.split(",")
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; known: {list(SHAPES)}")
    if args.first_call:
        print(json.dumps(first_call(args.first_call, SHAPES[names[0]], args.jit_family)))
        return 0
    if args.precompile_slice:
        index, count = map(int, args.precompile_slice.split("/"))
        shape = SHAPES[names[0]]
        variants = jit_variants(shape.kv_format, args.jit_family)[index::count]
        AutotunedJit(shape.kv_format, variants).precompile(**shape_inputs(shape, 3))
        return 0

    target = sparse_mla_aot.prepare()
    ceilings = measure_ceilings()
    flash, flash_status = (None, "skipped (--no-flash)") if args.no_flash else flash_mla_decode()
    results = {"device": torch.cuda.get_device_name(), "target": target, "torch": torch.__version__,
               "ceilings": ceilings,
               "flash_mla": flash_status, "autotune_ms": [AUTOTUNE_WARMUP_MS, AUTOTUNE_REP_MS], "shapes": []}
    print(f"{results['device']} ({target} kernels): copy {ceilings['copy_bytes_per_s'] / 1e12:.2f} TB/s, bf16 matmul "
          f"{ceilings['bf16_flops_per_s'] / 1e12:.0f} TFLOP/s; {flash_status}", flush=True)
    out_dir = Path(os.environ.get("OUT", "."))
    caches: dict[str, str] = {}  # one Triton cache per kv_format: its first shape's JIT first call compiles cold
    for name in names:
        shape = SHAPES[name]
        jit_cache = "cold" if shape.kv_format not in caches else "warm (compiled by an earlier shape)"
        cache = caches.setdefault(shape.kv_format, tempfile.mkdtemp(prefix="peers_triton_cache_"))
        if args.precompile_jobs:
            seconds = precompile_in_parallel(name, args.jit_family, cache, args.precompile_jobs)
            jit_cache = f"warm (precompiled by {args.precompile_jobs} processes in {seconds:.0f} s)"
            print(f"  {name}: JIT kernels precompiled by {args.precompile_jobs} processes in {seconds:.0f} s",
                  flush=True)
        paths = ("ours",) if args.no_jit else ("ours", "jit")
        first = {path: first_call_in_fresh_process(path, name, args.jit_family, cache) for path in paths}
        os.environ["TRITON_CACHE_DIR"] = cache  # the main run reuses what the first call compiled
        result = run_shape(name, shape, args.jit_family, [int(b) for b in args.batches.split(",")], ceilings,
                           flash, with_jit=not args.no_jit)
        result.update(first_call=first, jit_cache=jit_cache)
        if not args.no_jit:
            result.update(jit_variants=len(jit_variants(shape.kv_format, args.jit_family)),
                          jit_family=args.jit_family or JIT_FAMILY[shape.kv_format])
        results["shapes"].append(result)
        print(format_shape(result, flash_status), flush=True)
        (out_dir / f"peers_{target}.json").write_text(json.dumps(results, indent=1))
    failed = [line for result in results["shapes"] for line in shape_failures(result)]
    for line in failed:
        print(f"FAIL {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
