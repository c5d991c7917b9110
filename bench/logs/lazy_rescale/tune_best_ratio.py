"""python tune_best_ratio.py OLD.csv NEW.csv: per batch size, the best (variant, splits) of each tune and new / old."""
import csv, sys
def best(path):
    out = {}
    for r in csv.DictReader(open(path)):
        b = int(r["batch_rows"]); t = float(r["median_us"])
        if b not in out or t < out[b][0]: out[b] = (t, f'{r["variant"]}/{r["num_splits"]}')
    return out
old, new = best(sys.argv[1]), best(sys.argv[2])
for b in sorted(old.keys() & new.keys()):
    if b in (1, 4, 8, 16, 32, 48, 64, 96, 128):
        print(f"  b={b:3d} old {old[b][0]:7.2f} {old[b][1]:36s} new {new[b][0]:7.2f} {new[b][1]:36s} {new[b][0]/old[b][0]:.3f}")
