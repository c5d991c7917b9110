"""Rebuild the table a `python -m tuning tune` run wrote from that run's printed log, for call C's sm90 model1 h16 /
h32 tunes, whose tables and CSVs did not come back from the GPU host (too many files under $OUT). The log has, per
batch size, the best point (variant, split count, whether the combine kernel launched programmatically) and, at
its end, tune()'s JSON summary (rejected variants, wall_s); the rows come from the same table_rows() tune uses, and
the count of variants timed from the sm90 build report of the wheel the tune ran (its shipped variants of the
kv_format, less the rejected ones: tune's candidates).

    python bench/logs/acceptance_h100/table_from_tune_log.py bench/logs/acceptance_h100/callC/tune_sm90_model1_h32.log \
        <build dir of final>/sm90/report.json > variants/sm90/model1_h32.json
"""
import json
import re
import sys

sys.path[:0] = ["src", "."]
from tuning.tune import Shape, tuned_table  # noqa: E402

LINE = re.compile(r"batch_rows +(\d+): \d+ screened .*; best (\S+) x(\d+)( programmatic)? ")
SHAPE = re.compile(r"^(\w+)/h(\d+)/topk(\d+)(?:\+(\d+))? ")  # the shape each line starts with

log_path, report_path = sys.argv[1], sys.argv[2]
text = open(log_path).read()
kv_format, h_q, topk, extra_topk = SHAPE.match(text).groups()
h_q = int(h_q)
best = {}
for batch, variant, splits, programmatic in LINE.findall(text):
    best[int(batch)] = {"variant": variant, "num_splits": int(splits), "programmatic_combine": int(bool(programmatic))}
summary = json.loads(text[text.index("\n{") + 1:])
assert {int(b) for b in summary["best"]} == set(best), "a log of one whole tune"
shipped = [a["name"] for a in json.load(open(report_path))["artifacts"]
           if a.get("status") == "shipped" and a["name"].startswith(f"{kv_format}_")]
shape = Shape(kv_format, h_q, int(topk), int(extra_topk or 0))
measured_on = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "triton": "3.9.0", "torch": "2.11.0+cu130",
               "date": "2026-12-06"}  # call C's GPU host (its log.txt) and final's Triton
table = tuned_table(
    "sm90", shape, best, measured_on,
    command=f"python -m tuning tune --target sm90 --kv-format {kv_format} --heads {h_q} --out-dir /root/out/tune",
    resumed=0, variants_timed=len(set(shipped) - set(summary["rejected"])), rejected=summary["rejected"],
    wall_s=summary["wall_s"], replays=50)  # tune's default --replays
table["provenance"]["rebuilt_from"] = (
    f"the tune's printed log, bench/logs/acceptance_h100/{log_path.split('acceptance_h100/')[-1]} (its table and CSV "
    "did not come back from the GPU host)")
print(json.dumps(table, indent=1))
