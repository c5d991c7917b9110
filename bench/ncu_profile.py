"""Where the split kernel's time goes, from Nsight Compute's counters (docs/design.md#performance): per point
(shape, batch, variant), one profiled launch of the split kernel inside a normal eager call on rotating inputs
(tuning.gpu_timing.InputSets), then a table of duration, throughput, occupancy, registers and the stall reasons,
the share of warp-stall samples per SASS opcode, and the instructions where warps stall most. GPU host with `ncu`
on PATH; writes the reports and the per-instruction CSV under $OUT (or --out).

    python bench/ncu_profile.py --point v32/h128/topk2048:128 --point model1/h16/topk512:128:fused_bh16_bt64_w4_s1x2
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SKIP_LAUNCHES = 3  # eager warm-up calls before the profiled one
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats", "SchedulerStats", "SourceCounters",
            "MemoryWorkloadAnalysis")
DETAILS = {  # (section, metric) -> column
    ("GPU Speed Of Light Throughput", "Duration"): "duration",
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput"): "SM %",
    ("GPU Speed Of Light Throughput", "Memory Throughput"): "mem %",
    ("GPU Speed Of Light Throughput", "DRAM Throughput"): "DRAM %",
    ("Occupancy", "Achieved Occupancy"): "occupancy %",
    ("Occupancy", "Theoretical Occupancy"): "theoretical %",
    ("Launch Statistics", "Registers Per Thread"): "regs",
    ("Launch Statistics", "Grid Size"): "grid",
    ("Scheduler Statistics", "Issued Warp Per Scheduler"): "issued/sched",
    ("Warp State Statistics", "Warp Cycles Per Issued Instruction"): "cycles/issue",
}
CHOICE_PREFIX = "profiled: "
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
# Each execution pipe's issue share of its peak: which pipe (conversions and exp2 on XU, FP32 on FMA, mma.sync on
# the tensor pipe, shared memory on LSU) comes closest to its limit.
PIPE_PREFIX = "sm__inst_executed_pipe_"
PIPE_SUFFIX = ".avg.pct_of_peak_sustained_active"


def parse_point(text: str) -> tuple[str, int, str | None]:
    """shape:batch[:variantxsplits], e.g. v32/h128/topk2048:128 or model1/h16/topk512:128:fused_bh16_bt64_w4_s1x2."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"--point must be shape:batch[:variantxsplits]; got {text!r}")
    return parts[0], int(parts[1]), parts[2] if len(parts) == 3 else None


def force_for(kv_format: str, choice: str | None) -> str | None:
    """'fused_bh16_bt64_w4_s1x2' -> the SPARSE_MLA_AOT_FORCE spec of that variant at 2 splits."""
    if choice is None:
        return None
    from sparse_mla_aot import dispatch
    from sparse_mla_aot.contract import Variant
    name, splits = choice.rsplit("x", 1)
    return dispatch.force_spec(Variant.parse(f"{kv_format}_{name}"), int(splits))


def run_calls(point: str) -> None:
    """The profiled process: SKIP_LAUNCHES + 1 eager calls of the point, each on its own input set."""
    import torch

    import sparse_mla_aot
    from sparse_mla_aot import dispatch
    from tuning.gpu_timing import InputSets, Shape
    shape_name, batch, choice = parse_point(point)
    shape = Shape.parse(shape_name)
    sets = InputSets(shape).sets_for(batch)
    with dispatch.forcing(force_for(shape.kv_format, choice)):
        for i in range(SKIP_LAUNCHES + 1):
            sparse_mla_aot.sparse_mla_decode(**sets[i % len(sets)])
        torch.cuda.synchronize()
        print(CHOICE_PREFIX + (sparse_mla_aot.explain(batch, 1, shape.h_q, shape.kv_format).split(":")[0]
                               if choice is None else choice))


def ncu_csv(report: Path, *page: str) -> list[list[str]]:
    text = subprocess.run(["ncu", "-i", str(report), "--csv", *page], check=True, capture_output=True,
                          text=True).stdout
    return list(csv.reader(io.StringIO(text[text.find('"'):])))


def stall_hot_spots(source: list[list[str]], top: int) -> tuple[list, list]:
    """From the source page (per SASS instruction): the share of warp-stall samples per opcode (top 8) and the
    `top` instructions with the most samples, each as (percent, text)."""
    start = next(i for i, r in enumerate(source) if r and r[0] == "Address")  # after the kernel-name line
    header, lines = source[start], source[start + 1:]
    samples = next(i for i, h in enumerate(header) if h.startswith("Warp Stall Sampling (All"))
    text = header.index("Source")
    weighted = [(float(r[samples].replace(",", "") or 0), r[text]) for r in lines if len(r) > samples]
    total = sum(w for w, _ in weighted) or 1.0
    by_opcode: dict[str, float] = {}
    for w, t in weighted:
        words = [x for x in t.split() if not x.startswith("@")]
        if words:
            by_opcode[words[0].split(".")[0]] = by_opcode.get(words[0].split(".")[0], 0.0) + w
    opcodes = sorted(((100 * w / total, op) for op, w in by_opcode.items()), reverse=True)[:8]
    return opcodes, [(100 * w / total, t) for w, t in sorted(weighted, key=lambda x: -x[0])[:top]]


def raw_group(raw: list[list[str]], prefix: str, suffix: str, count: int = 6) -> list[tuple[str, float]]:
    """The largest `count` of the raw page's metrics named prefix<name>suffix, as (name, value)."""
    found = {}
    for metric, value in zip(raw[0], raw[-1]):
        if metric.startswith(prefix) and metric.endswith(suffix):
            try:
                found[metric[len(prefix):-len(suffix)]] = float(value.replace(",", ""))
            except ValueError:
                pass
    return sorted(found.items(), key=lambda kv: -kv[1])[:count]


def profile(point: str, out: Path, top: int) -> dict:
    label = point.replace("/", "_").replace(":", "_")
    report = out / f"ncu_{label}"
    command = ["ncu", "--clock-control", "none", "-k", "regex:sparse_mla_split", "--launch-skip", str(SKIP_LAUNCHES),
               "--launch-count", "1", "-f", "-o", str(report), "--metrics",
               f"regex:{STALL_PREFIX}.*{STALL_SUFFIX.replace('.', '[.]')},"
               f"regex:{PIPE_PREFIX}[a-z0-9_]*{PIPE_SUFFIX.replace('.', '[.]')}"]
    for section in SECTIONS:
        command += ["--section", section]
    run = subprocess.run(command + [sys.executable, __file__, "--child", point], capture_output=True, text=True)
    (out / f"ncu_{label}.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        return {"point": point, "error": (run.stdout + run.stderr).strip().splitlines()[-1:]}
    row = {"point": point, "choice": next((line[len(CHOICE_PREFIX):] for line in run.stdout.splitlines()
                                           if line.startswith(CHOICE_PREFIX)), "?")}
    rows = ncu_csv(report.with_suffix(".ncu-rep"), "--page", "details")
    header = rows[0]
    section, name, value = header.index("Section Name"), header.index("Metric Name"), header.index("Metric Value")
    unit = header.index("Metric Unit")
    for r in rows[1:]:
        column = DETAILS.get((r[section], r[name]))
        if column:
            row[column] = f"{r[value]} {r[unit]}".strip() if column == "duration" else r[value]
    raw = ncu_csv(report.with_suffix(".ncu-rep"), "--page", "raw")
    row["stalls"] = raw_group(raw, STALL_PREFIX, STALL_SUFFIX)
    row["pipes"] = raw_group(raw, PIPE_PREFIX, PIPE_SUFFIX)
    try:
        source = ncu_csv(report.with_suffix(".ncu-rep"), "--page", "source", "--print-source", "sass")
        (out / f"ncu_{label}_sass.csv").write_text("\n".join(",".join(f'"{c}"' for c in r) for r in source))
        row["opcodes"], row["hot"] = stall_hot_spots(source, top)
    except (subprocess.CalledProcessError, StopIteration, ValueError) as error:
        row["opcodes"], row["hot"] = [], [(0.0, f"(no source page: {error!r})")]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--point", action="append", default=[], help="shape:batch[:variantxsplits] (repeatable)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--top", type=int, default=12, help="hottest SASS instructions shown per point")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = parser.parse_args()
    if args.child:
        run_calls(args.child)
        return
    for point in args.point:
        parse_point(point)
    args.out.mkdir(parents=True, exist_ok=True)
    results = [profile(point, args.out, args.top) for point in args.point]
    columns = ["choice", *DETAILS.values()]
    print("| point | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for r in results:
        print(f"| {r['point']} | " + " | ".join(str(r.get(c, r.get('error', '-'))) for c in columns) + " |")
    failed = [r["point"] for r in results if "error" in r]
    for r in results:
        if "stalls" not in r:
            continue
        print(f"\n{r['point']}: stall cycles per issued instruction: "
              + ", ".join(f"{k} {v:.2f}" for k, v in r["stalls"]))
        print("  pipe issue, % of peak: " + ", ".join(f"{k} {v:.1f}" for k, v in r["pipes"]))
        print("  stall samples by opcode: " + ", ".join(f"{op} {share:.1f}%" for share, op in r["opcodes"]))
        for share, text in r["hot"]:
            print(f"  {share:5.1f}%  {text}")
    if failed:
        sys.exit(f"FAILED: ncu did not profile {', '.join(failed)} (its log is under --out)")


if __name__ == "__main__":
    main()
