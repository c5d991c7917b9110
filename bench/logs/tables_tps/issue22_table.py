"""python3 issue22_table.py SM90_JSON PROXY_JSON: issue 22's table at 64 and 128 rows (markdown): us, GB/s and fraction
of 4.8 TB/s of the gathered records, FlashMLA padded to 64 heads (from the sm90 run), ours / FlashMLA."""
import json, sys
rows = lambda path: {s["shape"]: {r["batch_rows"]: r for r in s["rows"]} for s in json.load(open(path))["shapes"]}
sm90, proxy = rows(sys.argv[1]), rows(sys.argv[2])
print("| shape | b | sm90 us | GB/s | fraction | proxy us | fraction | FlashMLA us | ours / FlashMLA (sm90 / proxy) |")
print("|---|---|---|---|---|---|---|---|---|")
for shape in sm90:
    for b in (64, 128):
        r, p = sm90[shape][b], proxy[shape][b]
        us, pus, fm = r["ours"]["median_us"], p["ours"]["median_us"], r["flash_mla"]["median_us"]
        gb = r["moved_bytes"]["gathered"]
        print(f"| {shape} | {b} | {us:.1f} | {gb / us / 1e3:.0f} | {gb / us / 4.8e6:.3f} | {pus:.1f} | "
              f"{gb / pus / 4.8e6:.3f} | {fm:.1f} | {us / fm:.2f} / {pus / fm:.2f} |")
