"""Two tunes of one shape compared, new / old, through the tune's own CSV reader:
- per variant (fused and wg pooled: kernels a change left alone are the control), each batch size's best screened
  time over split counts (every variant is screened at every point, the same way in both tunes); the median over
  batch sizes, over those from 32 rows, min and max;
- per batch size, the table's choice in each tune (build_tools.measurements.best_per_batch: full measurements only).
    python bench/logs/lazy_rescale/tune_ratio.py OLD.csv NEW.csv"""
import collections
import statistics
import sys
from pathlib import Path

sys.path[:0] = ["src", "."]
from build_tools.measurements import best_per_batch, read_rows  # noqa: E402

BATCHES = (1, 4, 8, 16, 32, 48, 64, 96, 128)


def screened_best(rows: dict) -> dict[tuple[int, str], float]:
    best: dict[tuple[int, str], float] = {}
    for (batch, variant, _splits, _programmatic, stage), row in rows.items():
        if stage == "screen":
            best[batch, variant] = min(best.get((batch, variant), float("inf")), float(row["median_us"]))
    return best


old_rows, new_rows = (read_rows(Path(p)) for p in sys.argv[1:3])
old, new = screened_best(old_rows), screened_best(new_rows)
ratios = collections.defaultdict(list)
for batch, variant in old.keys() & new.keys():
    family = variant.split("_")[1]
    ratios[variant if family in ("ws", "pingpong") else family].append((batch, new[batch, variant] / old[batch, variant]))
for name, pairs in sorted(ratios.items()):
    values, large = [r for _, r in pairs], [r for b, r in pairs if b >= 32]
    print(f"  {name:34s} n={len(values):3d} median {statistics.median(values):.3f}  b>=32 median "
          f"{statistics.median(large) if large else float('nan'):.3f}  min {min(values):.3f} max {max(values):.3f}")
old_best, new_best = (best_per_batch(list(rows.values()), BATCHES) for rows in (old_rows, new_rows))
for batch in BATCHES:
    a, b = old_best[batch], new_best[batch]
    print(f"  b={batch:3d} old {float(a['median_us']):7.2f} {a['variant'] + '/' + a['num_splits']:36s} "
          f"new {float(b['median_us']):7.2f} {b['variant'] + '/' + b['num_splits']:36s} "
          f"{float(b['median_us']) / float(a['median_us']):.3f}")
