"""python tune_family_ratio.py OLD.csv NEW.csv: per variant (fused and wg pooled as controls), the new tune's best time over
splits / the old one's at each shared (batch rows, variant); median, median from 32 rows, min, max."""
import csv, sys, statistics, collections
def best(path):
    out = {}
    for r in csv.DictReader(open(path)):
        k = (int(r["batch_rows"]), r["variant"]); t = float(r["median_us"])
        out[k] = min(out.get(k, t), t)
    return out
old, new = best(sys.argv[1]), best(sys.argv[2])
by = collections.defaultdict(list)
for k in old.keys() & new.keys():
    b, v = k; fam = v.split("_")[1]
    by[(fam, v if fam in ("ws", "pingpong") else fam)].append((b, new[k] / old[k]))
for (fam, v), rs in sorted(by.items()):
    rs.sort(); big = [r for b, r in rs if b >= 32]
    print(f"  {v:34s} n={len(rs):3d} median {statistics.median(r for _, r in rs):.3f}  b>=32 median "
          f"{statistics.median(big) if big else float('nan'):.3f}  min {min(r for _, r in rs):.3f} max {max(r for _, r in rs):.3f}")
