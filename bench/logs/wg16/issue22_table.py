"""Issue 22's table at 64 and 128 rows from bench/peers.py's JSON. Fraction = gathered bytes / time / 4.8 TB/s (the
H200's peak, the issue's yardstick); FlashMLA padded to 64 heads, from the same sm90 run as ours.

    python3 bench/logs/wg16/issue22_table.py
        the sixteenth session's commit: the 16-head rows from call 2's run of main's wheel (their tables are
        unchanged), the 32-head rows from call 3's run of the new wheel with the re-tuned 32-head tables, main's from
        call 2 beside them (same machine);
    python3 bench/logs/wg16/issue22_table.py --sm90 PEERS.json --proxy PEERS.json
        one run per target (the proxy's without FlashMLA), with the fraction of the H100's 3.35 TB/s beside.
"""
import argparse
import json
from pathlib import Path

HERE = Path(__file__).parent


def rows(path):
    return {s["shape"]: {r["batch_rows"]: r for r in s["rows"]} for s in json.load(open(path))["shapes"]}


def cells(r, flash_us):
    us, gb = r["ours"]["median_us"], r["moved_bytes"]["gathered"]
    return f"{us:.1f} | {gb / us / 1e3:.0f} | {gb / us / 4.8e6:.3f}", f"{flash_us:.1f} | {us / flash_us:.2f}", gb / us


def sixteenth_session():
    cur, new = rows(HERE / "call2/peers_sm90_cur.json"), rows(HERE / "call3/peers_sm90.json")
    print("| shape | b | sm90 us | GB/s | fraction | FlashMLA us | ours / FlashMLA | main us |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in cur:
        for b in (64, 128):
            r = (new if "/h32/" in shape else cur)[shape][b]
            ours, flash, _ = cells(r, r["flash_mla"]["median_us"])
            print(f"| {shape} | {b} | {ours} | {flash} | {cur[shape][b]['ours']['median_us']:.1f} |")


def both_targets(sm90_path, proxy_path):
    sm90, proxy = rows(sm90_path), rows(proxy_path)
    print("| shape | b | target | us | GB/s | of 4.8 TB/s | of 3.35 TB/s | FlashMLA padded us | ours / FlashMLA |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in sm90:
        for b in (64, 128):
            for target, run in (("sm90", sm90), ("sm89-proxy", proxy)):
                ours, flash, rate = cells(run[shape][b], sm90[shape][b]["flash_mla"]["median_us"])
                print(f"| {shape} | {b} | {target} | {ours} | {rate / 3.35e6:.3f} | {flash} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sm90", help="bench/peers.py's JSON of an sm90 run (with FlashMLA)")
    parser.add_argument("--proxy", help="bench/peers.py's JSON of a --target sm89-proxy run")
    args = parser.parse_args()
    if bool(args.sm90) != bool(args.proxy):
        parser.error("--sm90 and --proxy go together")
    both_targets(args.sm90, args.proxy) if args.sm90 else sixteenth_session()
