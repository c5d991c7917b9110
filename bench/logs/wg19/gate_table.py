"""Session 19, call 1's table: per shape and batch size, each site's best time (the gate's tune CSV: the wg
variants alone, best variant and split) in each round, and its ratio to main's in the same round.

    python3 bench/logs/wg19/gate_table.py OUT   (OUT holds gate<round>_<site>/sm90_<kv>_h<heads>.csv)"""
import csv
import sys
from pathlib import Path

SITES = ("main", "ovl", "hs", "hsovl", "pp", "hspp", "s3", "pp2")


def best(csv_path: Path) -> dict[int, float]:
    """rows -> the fastest median (us) of the tune's CSV, over its variants and splits; the measurements of the
    final stage where a point has them (the screen's single replays are noisier)."""
    if not csv_path.exists():
        return {}
    rows: dict[int, dict[str, list[float]]] = {}
    with csv_path.open() as f:
        for record in csv.DictReader(f):
            rows.setdefault(int(record["batch_rows"]), {}).setdefault(record["stage"], []).append(
                float(record["median_us"]))
    return {r: min(stages.get("full") or stages["screen"]) for r, stages in rows.items()}


def main() -> None:
    out = Path(sys.argv[1])
    print("| shape | rows | " + " | ".join(f"{s} r1 / r2 (us), / main" for s in SITES) + " |")
    print("|---|---|" + "---|" * len(SITES))
    for kv in ("v32", "model1"):
        for heads in (16, 32):
            runs = {(r, s): best(out / f"gate{r}_{s}" / f"sm90_{kv}_h{heads}.csv") for r in (1, 2) for s in SITES}
            for rows in (1, 64, 128):
                cells = []
                for site in SITES:
                    times, ratios = [], []
                    for r in (1, 2):
                        run, base = runs[(r, site)], runs[(r, "main")]
                        if rows in run:
                            times.append(f"{run[rows]:.1f}")
                            if rows in base:
                                ratios.append(f"{run[rows] / base[rows]:.3f}")
                        else:
                            times.append("-")
                    cells.append(" / ".join(times) + (f", {' / '.join(ratios)}" if ratios and site != "main" else ""))
                print(f"| {kv} h{heads} | {rows} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
