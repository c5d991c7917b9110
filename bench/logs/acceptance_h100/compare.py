"""python3 cmp.py DIR A B: per shape and b, A and B us, B/A, and B/FlashMLA where B has FlashMLA."""
import json, sys
d, a, b = sys.argv[1:4]
A = {s["shape"]: {r["batch_rows"]: r for r in s["rows"]} for s in json.load(open(f"{d}/peers_{a}.json"))["shapes"]}
B = {s["shape"]: {r["batch_rows"]: r for r in s["rows"]} for s in json.load(open(f"{d}/peers_{b}.json"))["shapes"]}
for shape in B:
    print(shape)
    print(f"  {'b':>4} {a:>9} {b:>9} {b+'/'+a:>12} {'FlashMLA':>9} {'ours/FM':>8} {'gather':>7}  choice")
    for n, r in B[shape].items():
        ra = A.get(shape, {}).get(n)
        ua = ra["ours"]["median_us"] if ra else float("nan")
        ub = r["ours"]["median_us"]
        fm = r.get("flash_mla") or {}
        fmu = fm.get("median_us", float("nan"))
        gather = r["moved_bytes"]["gathered"] / (ub * 1e-6) / 4.8e12
        print(f"  {n:>4} {ua:9.2f} {ub:9.2f} {ub/ua:12.3f} {fmu:9.2f} {ub/fmu:8.3f} {gather:7.3f}  {r['our_choice']}")
