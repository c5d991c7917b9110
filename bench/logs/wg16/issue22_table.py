"""python3 bench/logs/wg16/issue22_table.py: issue 22's sm90 table at 64 and 128 rows for the state this session
commits: the 16-head shapes from call 2's run of main's wheel (their tables are unchanged), the 32-head shapes from
call 3's run of the new wheel with the re-tuned 32-head tables, main's from call 2 beside them (same machine).
Fraction = gathered bytes / time / 4.8 TB/s; FlashMLA padded to 64 heads, from the same run as ours."""
import json
from pathlib import Path

HERE = Path(__file__).parent
rows = lambda path: {s["shape"]: {r["batch_rows"]: r for r in s["rows"]} for s in json.load(open(path))["shapes"]}
cur, new = rows(HERE / "call2/peers_sm90_cur.json"), rows(HERE / "call3/peers_sm90.json")
print("| shape | b | sm90 us | GB/s | fraction | FlashMLA us | ours / FlashMLA | main us |")
print("|---|---|---|---|---|---|---|---|")
for shape in cur:
    for b in (64, 128):
        r = (new if "/h32/" in shape else cur)[shape][b]
        us, fm, gb = r["ours"]["median_us"], r["flash_mla"]["median_us"], r["moved_bytes"]["gathered"]
        print(f"| {shape} | {b} | {us:.1f} | {gb / us / 1e3:.0f} | {gb / us / 4.8e6:.3f} | {fm:.1f} | {us / fm:.2f} | "
              f"{cur[shape][b]['ours']['median_us']:.1f} |")
