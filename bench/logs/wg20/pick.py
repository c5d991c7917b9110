"""Session 20, call 1's fork: is pp2 worth a full tune? Reads the gate CSVs (OUT/gate<round>_<site>/sm90_<kv>_h16.csv,
best time per batch size as in bench/logs/wg19/gate_table.py) and prints `pp2` when the geometric mean of its
times over both 16-head shapes, 64 and 128 rows and every round is below 0.97 of main's, else `none`; the
per-round ratios go to stderr.

    python3 bench/logs/wg20/pick.py OUT"""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "wg19"))
from gate_table import best  # noqa: E402

out = Path(sys.argv[1])
logs = []
for rnd in (1, 2):
    for kv in ("v32", "model1"):
        site_best = {s: best(out / f"gate{rnd}_{s}" / f"sm90_{kv}_h16.csv") for s in ("main", "pp2")}
        for rows in (64, 128):
            if rows in site_best["main"] and rows in site_best["pp2"]:
                ratio = site_best["pp2"][rows] / site_best["main"][rows]
                print(f"round {rnd} {kv} h16 {rows} rows: pp2/main {ratio:.3f}", file=sys.stderr)
                logs.append(math.log(ratio))
            else:
                print(f"round {rnd} {kv} h16 {rows} rows: missing", file=sys.stderr)
mean = math.exp(sum(logs) / len(logs)) if len(logs) >= 4 else math.inf
print(f"geometric mean pp2/main: {mean:.3f} over {len(logs)} points", file=sys.stderr)
print("pp2" if mean < 0.97 else "none")
