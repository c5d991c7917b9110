"""Session 17, call 1's fork: which prototype build (f16, p2) to tune in full. Reads the gate logs
($OUT/gate_<site>_<kv>_h<heads>.log, each ending in `python -m tuning tune`'s JSON summary) and prints the site
whose best times at 128 and 64 rows on the two 16-head shapes have the lowest geometric mean, or `none` when a
variant was rejected in both or neither beats main's (cur) new variants by 3%. Also prints the table it used."""
import json, math, sys
from pathlib import Path

out = Path(sys.argv[1])
def best(site, kv, heads):
    path = out / f"gate_{site}_{kv}_h{heads}.log"
    if not path.exists():
        return None
    text = path.read_text()
    start = text.find("\n{")
    if start < 0:
        return None
    summary = json.loads(text[start:])
    if summary.get("rejected"):
        return None
    return {int(rows): entry[2] for rows, entry in summary["best"].items()}

score = {}
for site in ("cur", "f16", "p2"):
    times = []
    for kv in ("model1", "v32"):
        for heads in (16, 32):
            b = best(site, kv, heads)
            print(f"{site:4s} {kv:6s} h{heads}: " + (" ".join(f"{r}:{t:.1f}" for r, t in sorted(b.items())) if b else "missing/rejected"), file=sys.stderr)
            if heads == 16:
                times += [b[r] for r in (64, 128)] if b else [math.inf]
    score[site] = math.exp(sum(math.log(t) for t in times) / len(times)) if all(map(math.isfinite, times)) else math.inf
print(" ".join(f"{s}={v:.2f}" for s, v in score.items()), file=sys.stderr)
site = min(("f16", "p2"), key=score.get)
print(site if score[site] < 0.97 * score["cur"] else "none")
