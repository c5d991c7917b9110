"""Where does a gap between our cubins and bench/peers.py's JIT path come from: the code each Triton generates, or
the JIT's value specialization? Per (variant, batch rows, split count), on one GPU in one run:

- ours: the installed wheel's cubin (the build host's Triton), pinned with SPARSE_MLA_AOT_FORCE;
- JIT: the same template under this host's Triton as peers.py runs it, this one config only;
- JIT, ints unspecialized: the same, with the integer arguments our compile signature leaves unhinted not
  value-specialized (no ==1 constants, no divisibility): what an AOT compile by this host's Triton would see.

ours ~ JIT-unspecialized << JIT: specialization; JIT-unspecialized ~ JIT << ours: the Triton version.
Device times as peers.py measures them (graph replay over rotating input sets, median). Writes $OUT/codegen_gap.json.

    python bench/codegen_gap.py --points v32_fused_bh64_bt32_w4_s1:64:2,v32_fused_bh64_bt32_w8_s2:8:8
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

import torch  # noqa: E402
import triton  # noqa: E402

import sparse_mla_aot  # noqa: E402
from peers import SHAPES, AutotunedJit, timed  # noqa: E402
from sparse_mla_aot import ops  # noqa: E402
from sparse_mla_aot.dispatch import force_spec, forcing  # noqa: E402
from tuning.gpu_timing import InputSets  # noqa: E402

SHAPE_OF = {"v32": "v32/h128/topk2048", "model1": "model1/h64/topk512+128"}


def parse_points(text: str) -> list[tuple[str, int, int]]:
    points = []
    for item in text.split(","):
        name, rows, splits = item.split(":")
        points.append((name, int(rows), int(splits)))
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", required=True, help="comma list of variant:batch_rows:num_splits")
    args = parser.parse_args()
    target = sparse_mla_aot.prepare()
    shipped = ops.catalog().shipped(target)
    points = parse_points(args.points)
    unknown = [name for name, _, _ in points if name not in shipped]
    if unknown:
        parser.error(f"not shipped for {target}: {unknown}")
    cubin_triton = ops.catalog().manifest["triton_version"]
    print(f"{torch.cuda.get_device_name()}: cubins by Triton {cubin_triton}, JIT by Triton {triton.__version__}")
    print(f"{'variant':<24} {'rows':>4} {'splits':>6} {'ours us':>9} {'JIT us':>9} {'JIT ints-unspec us':>18}")
    rows = []
    for name, batch, splits in points:
        variant = shipped[name].variant
        shape = SHAPES[SHAPE_OF[variant.kv_format]]
        sets = InputSets(shape).sets_for(batch)
        with forcing(force_spec(variant, splits)):
            ours = timed(sets, sparse_mla_aot.sparse_mla_decode)
        jit = {mode: timed(sets, AutotunedJit(variant.kv_format, [variant], splits=(splits,),
                                              specialize_ints=mode == "specialized").decode)
               for mode in ("specialized", "unspecialized")}
        rows.append({"variant": name, "batch_rows": batch, "num_splits": splits, "ours": ours, **jit})
        print(f"{name:<24} {batch:>4} {splits:>6} {ours['median_us']:>9.1f} {jit['specialized']['median_us']:>9.1f} "
              f"{jit['unspecialized']['median_us']:>18.1f}", flush=True)
    out = Path(os.environ.get("OUT", ".")) / "codegen_gap.json"
    partial = out.with_suffix(".json.tmp")
    partial.write_text(json.dumps({"device": torch.cuda.get_device_name(), "cubin_triton": cubin_triton,
                                   "jit_triton": triton.__version__, "rows": rows}, indent=1))
    partial.replace(out)


if __name__ == "__main__":
    main()
