"""Rebuild the table a `python -m tuning tune` run wrote from that run's printed log, for call C's sm90 model1 h16 /
h32 tunes, whose tables and CSVs did not come back from the GPU host (too many files under $OUT). The log has, per
batch size, the best point (variant, split count, whether the combine kernel launched programmatically) and, at
its end, tune()'s JSON summary (rejected variants, wall_s); the rows come from the same table_rows() tune uses, and
the count of variants timed from the sm90 build report of the wheel the tune ran (its shipped variants of the
kv_format, less the rejected ones: tune's candidates).

    python bench/logs/acceptance_h100/table_from_tune_log.py bench/logs/acceptance_h100/callC/tune_sm90_model1_h32.log \
        model1 32 <build dir of final>/sm90/report.json > variants/sm90/model1_h32.json
"""
import json
import re
import sys

sys.path[:0] = ["src", "."]
from build_tools.measurements import table_rows  # noqa: E402
from tuning.tune import PROBE_CUT, SCREEN_MARGIN, SCREEN_REPLAYS  # noqa: E402

LINE = re.compile(r"batch_rows +(\d+): \d+ screened .*; best (\S+) x(\d+)( programmatic)? ")

log_path, kv_format, h_q, report_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(log_path).read()
best = {}
for batch, variant, splits, programmatic in LINE.findall(text):
    best[int(batch)] = {"variant": variant, "num_splits": int(splits), "programmatic_combine": int(bool(programmatic))}
summary = json.loads(text[text.index("\n{") + 1:])
assert {int(b) for b in summary["best"]} == set(best), "a log of one whole tune"
shipped = [a["name"] for a in json.load(open(report_path))["artifacts"]
           if a.get("status") == "shipped" and a["name"].startswith(f"{kv_format}_")]
shape = {"topk": 512, "extra_topk": 128} if kv_format == "model1" else {"topk": 2048, "extra_topk": 0}
table = {
    "target": "sm90", "kv_format": kv_format, "h_q": h_q,
    "provenance": {
        "kind": "tuned", "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "triton": "3.9.0",
        "torch": "2.11.0+cu130", "date": "2026-12-06",
        "command": f"python -m tuning tune --target sm90 --kv-format {kv_format} --heads {h_q} --out-dir /root/out/tune",
        "resumed_from_rows": 0, "shape": shape,
        "variants_timed": len(set(shipped) - set(summary["rejected"])),
        "rejected": summary["rejected"], "wall_s": summary["wall_s"],
        "method": "CUDA-graph replay of one call per rotating input set, CUDA events, median per-call time of the "
                  "replays; inputs: random q and indices over a 262,144-token cache; every point screened with "
                  f"{SCREEN_REPLAYS} replays (one if that one is beyond {PROBE_CUT}x the best so far), those within "
                  f"{SCREEN_MARGIN}x of the best (and, splitting, with a programmatic combine launch) measured with "
                  "50, in turns of 5",
        "rebuilt_from": f"the tune's printed log, bench/logs/acceptance_h100/{log_path.split('acceptance_h100/')[-1]} "
                        "(its table and CSV did not come back from the GPU host)",
    },
    "rows": table_rows(best),
}
print(json.dumps(table, indent=1))
