"""compute-sanitizer memcheck and racecheck (and, asked, synccheck) over every shipped split variant of this GPU's
target (or of SPARSE_MLA_AOT_TARGET, e.g. the sm89 proxy), each with the combine kernel, at three shapes per variant:

  A: b=2, s_q=1, h_q=16, topk 128 (+64 extra for model1), page size 61, 3 splits;
  B: b=1, s_q=2, h_q=64, topk 256 (+128 extra), page size 64, topk_length, 64 splits (clamped: empty splits);
  C: b=2, s_q=1, h_q=64, topk 128 (+64 extra), page size 61, one split (the split kernel writes out and lse);
  D: as C at 2 splits and about 1.5 waves of the variant's programs: the first wave's rows unsplit, the rest split.

Both with attn_sink, about 20% -1 indices, caches allocated to exactly their pages, the last page only half
filled, and one index at the last filled token. Every output is also checked against the reference
(docs/design.md#numerics); torch's own kernels are sanitized too. Variants are spread over concurrent sanitizer
processes; prints a summary table and writes the full sanitizer output to $OUT/sanitize_<label>_<tool>.log and the
figures to $OUT/sanitize_<label>.json. With --racecheck-report hazard, racecheck's records (the first
HAZARD_PRINT_LIMIT) are also counted per pair of instructions (kind, each access's warp and kernel offset).

    python bench/sanitize.py --label sm90            # GPU host, sparse_mla_aot installed; compute-sanitizer on PATH
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

import sparse_mla_aot
from sparse_mla_aot import ops
from sparse_mla_aot.dispatch import force_spec, forcing
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode

SHAPES = {
    "A": dict(b=2, s_q=1, h_q=16, topk=128, extra_topk=64, page_size=61, num_splits=3),
    "B": dict(b=1, s_q=2, h_q=64, topk=256, extra_topk=128, page_size=64, num_splits=64, with_topk_length=True),
    "C": dict(b=2, s_q=1, h_q=64, topk=128, extra_topk=64, page_size=61, num_splits=1),
    # b: about 1.5 waves of the variant's programs (LAST_WAVE), so the first wave's rows run unsplit and the rest split
    "D": dict(b=None, s_q=1, h_q=64, topk=128, extra_topk=64, page_size=61, num_splits=2),
}
LAST_WAVE = "D"
ERROR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
# racecheck's hazard report prints one record per pair of thread accesses (hundreds of thousands for the ws family):
# without backtraces, this many of them are kept and counted per pair of instructions (hazard_pairs).
HAZARD_PRINT_LIMIT = 3000
HAZARD = re.compile(r"Potential (\w+) hazard detected at (__\w+__)")
HAZARD_ACCESS = re.compile(r"(Write|Read) Thread \((\d+),\d+,\d+\) at \S+?\+(0x[0-9a-f]+)")
SUMMARY = {"memcheck": ERROR_SUMMARY, "synccheck": ERROR_SUMMARY,
           "racecheck": re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")}


def _partial_last_page(indices: torch.Tensor, num_tokens: int, page_size: int) -> torch.Tensor:
    """Ids only in the filled part (the last page half full), one of them the last filled token; -1 stays."""
    filled = num_tokens - page_size // 2
    indices = torch.where(indices >= 0, indices % filled, indices)
    indices[0, 0, 0] = filled - 1
    return indices


def shape_inputs(name: str, kv_format: str, b: int | None = None, device: str = "cuda") -> tuple[dict, int]:
    """A shape's inputs (b given for LAST_WAVE) and split count."""
    shape = dict(SHAPES[name], **({"b": b} if b else {}))
    num_splits = shape.pop("num_splits")
    if kv_format == "v32":
        shape["extra_topk"] = 0
    inputs = make_inputs(kv_format=kv_format, with_sink=True, invalid_frac=0.2, device=device, seed=11,
                         extra_page_size=shape["page_size"], **shape)
    ps = shape["page_size"]
    inputs["indices"] = _partial_last_page(inputs["indices"], inputs["k_cache"].shape[0] * ps, ps)
    if inputs.get("extra_indices") is not None:
        extra_tokens = inputs["extra_k_cache"].shape[0] * ps
        inputs["extra_indices"] = _partial_last_page(inputs["extra_indices"], extra_tokens, ps)
    return inputs, num_splits


def last_wave_batch(wave: int, block_h: int, h_q: int = SHAPES[LAST_WAVE]["h_q"]) -> int:
    """A batch (s_q 1) of about 1.5 waves of programs of one split per head block: LAST_WAVE's b by default."""
    return -(-3 * wave // (2 * -(-h_q // block_h)))


def run_variants(names: list[str]) -> int:
    """The sanitized process: each variant at every shape; returns the number of numerics failures."""
    target = sparse_mla_aot.prepare()
    records = ops.catalog().shipped(target)
    kernels = ops._kernels_for(torch.cuda.current_device())
    kernels.load(names)
    cases, references = {}, {}
    failures = 0
    for name in names:
        v = records[name].variant
        for shape in SHAPES:
            key = (shape, v.kv_format,
                   last_wave_batch(kernels.kernels[name].wave, v.block_h) if shape == LAST_WAVE else None)
            if key not in cases:
                cases[key] = shape_inputs(*key)
                references[key] = reference_sparse_mla_decode(**cases[key][0])
            inputs, num_splits = cases[key]
            with forcing(force_spec(v, num_splits)):
                out, lse = sparse_mla_aot.sparse_mla_decode(**inputs)
            torch.cuda.synchronize()
            ref_out, ref_lse = references[key]
            figures = check_close(out.float(), lse, ref_out.float(), ref_lse.float())
            failures += not figures["ok"]
            print(f"launched {name} shape {shape} (b={inputs['q'].shape[0]}): "
                  f"{'ok' if figures['ok'] else figures['failures']}", flush=True)
    return failures


def hazard_pairs(text: str) -> Counter[tuple[str, str, str]]:
    """racecheck's hazard records counted per (kind and memory, first access, second access), each access as
    'Write warp 1 +0x40f0' (the thread's warp, 1D blocks, and the instruction's offset in the kernel)."""
    pairs: Counter[tuple[str, str, str]] = Counter()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        hazard = HAZARD.search(line)
        accesses = [HAZARD_ACCESS.search(x) for x in lines[i + 1:i + 3]]
        if hazard and all(accesses):
            key = (f"{hazard.group(1)} {hazard.group(2)}",
                   *(f"{a.group(1)} warp {int(a.group(2)) // 32} +{a.group(3)}" for a in accesses))
            pairs[key] += 1
    return pairs


def sanitize(tool: str, names: list[str], deadline: float | None, racecheck_report: str = "analysis") -> dict:
    """One sanitizer process over `names`; not started (or stopped) when the deadline (if any) has passed.
    racecheck_report: racecheck's --racecheck-report, "hazard" for every hazard's threads and kind (RAW, WAR)."""
    hazards = tool == "racecheck" and racecheck_report != "analysis"
    report = ["--racecheck-report", racecheck_report] if tool == "racecheck" else []
    limit = ["--print-limit", str(HAZARD_PRINT_LIMIT), "--show-backtrace", "no"] if hazards else ["--print-limit", "20"]
    command = ["compute-sanitizer", "--tool", tool, *limit, *report, sys.executable, __file__, "--run", *names]
    started = time.monotonic()
    try:
        if deadline is not None and started >= deadline:
            raise subprocess.TimeoutExpired(command, 0)
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=None if deadline is None else deadline - started)
        text, returncode = result.stdout + result.stderr, result.returncode
    except subprocess.TimeoutExpired:
        text, returncode = "not run or stopped: --deadline-s passed", None
    match = SUMMARY[tool].search(text)
    return {"tool": tool, "variants": names, "returncode": returncode, "seconds": time.monotonic() - started,
            "summary": match.group(0) if match else None,
            "errors": (int(match.group(2)) if tool == "racecheck" else int(match.group(1))) if match else None,
            "launched_ok": text.count(": ok"), "launches": text.count("launched "), "output": text,
            "hazard_pairs": hazard_pairs(text) if hazards else Counter()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", help="names the output files, e.g. sm90 or sm89-proxy (required)")
    parser.add_argument("--tools", default="memcheck,racecheck", help=f"comma list of {list(SUMMARY)}")
    parser.add_argument("--racecheck-report", choices=("analysis", "hazard", "all"), default="analysis",
                        help="racecheck's report: hazard lists each hazard's kind and threads")
    parser.add_argument("--jobs", type=int, default=12, help="concurrent sanitizer processes")
    parser.add_argument("--per-job", type=int, default=18, help="variants per sanitizer process")
    parser.add_argument("--deadline-s", type=float, default=None,
                        help="seconds from now after which no sanitizer process starts and running ones stop "
                             "(default: none)")
    parser.add_argument("--variants", default=None, help="comma list of names (default: every shipped split)")
    parser.add_argument("--run", nargs="+", help=argparse.SUPPRESS)  # the sanitized process
    args = parser.parse_args()
    if args.run:
        sys.exit(1 if run_variants(args.run) else 0)
    if not args.label:
        parser.error("--label is required (it names the output files)")
    unknown = [t for t in args.tools.split(",") if t not in SUMMARY]
    if unknown:
        parser.error(f"--tools: unknown {unknown}; expected a comma list of {list(SUMMARY)}")

    deadline = None if args.deadline_s is None else time.monotonic() + args.deadline_s
    target = sparse_mla_aot.prepare()
    shipped = ops.catalog().shipped(target)
    names = args.variants.split(",") if args.variants else sorted(n for n, r in shipped.items() if r.kind == "split")
    jobs = [(tool, names[i:i + args.per_job]) for tool in args.tools.split(",")
            for i in range(0, len(names), args.per_job)]
    print(f"{target}: {len(names)} variants x {len(SHAPES)} shapes, {len(jobs)} sanitizer processes "
          f"({args.jobs} at a time)", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: sanitize(job[0], job[1], deadline, args.racecheck_report), jobs))
    out_dir = Path(os.environ.get("OUT", "."))
    figures = {"target": target, "device": torch.cuda.get_device_name(), "tools": {}}
    print(f"\n{'tool':<10} {'processes':>9} {'launches':>8} {'numerics ok':>11} {'errors':>6}  summary lines")
    for tool in args.tools.split(","):
        mine = [r for r in results if r["tool"] == tool]
        (out_dir / f"sanitize_{args.label}_{tool}.log").write_text(
            "\n".join(f"=== {r['variants'][0]} .. {r['variants'][-1]} (rc {r['returncode']}, {r['seconds']:.0f} s)\n"
                      f"{r['output']}" for r in mine))
        errors = sum(r["errors"] for r in mine if r["errors"] is not None)
        missing = sum(r["summary"] is None for r in mine)
        summaries = sorted({r["summary"] for r in mine if r["summary"]})
        figures["tools"][tool] = {"processes": len(mine), "launches": sum(r["launches"] for r in mine),
                                  "numerics_ok": sum(r["launched_ok"] for r in mine), "errors": errors,
                                  "processes_without_summary": missing, "summaries": summaries,
                                  "nonzero_exit": sum(r["returncode"] != 0 for r in mine),
                                  "seconds": max(r["seconds"] for r in mine)}
        f = figures["tools"][tool]
        print(f"{tool:<10} {len(mine):>9} {f['launches']:>8} {f['numerics_ok']:>11} {errors:>6}  "
              f"{'; '.join(summaries)}{f'; {missing} without a summary line!' if missing else ''}")
        pairs = sum((r["hazard_pairs"] for r in mine), Counter()).most_common()
        if pairs:
            f["hazard_pairs"] = [[*key, count] for key, count in pairs]
            print(f"  the first {sum(count for _, count in pairs)} hazard records per pair of instructions:")
            for (kind, first, second), count in pairs[:40]:
                print(f"  {count:7d}  {kind}: {first} / {second}")
    (out_dir / f"sanitize_{args.label}.json").write_text(json.dumps(figures, indent=1))
    # A child's failure is ours: a sanitizer error, a failed or unchecked launch, a process that exited non-zero or
    # printed no summary (stopped, crashed) all make this run fail.
    failed = [f"{tool}: {f['errors']} errors, {f['nonzero_exit']} processes exited non-zero, "
              f"{f['processes_without_summary']} without a summary, {f['numerics_ok']} of {f['launches']} launches "
              f"checked ok" for tool, f in figures["tools"].items()
              if f["errors"] or f["nonzero_exit"] or f["processes_without_summary"] or f["numerics_ok"] != f["launches"]]
    for line in failed:
        print(f"FAIL {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
