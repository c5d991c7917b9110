"""Where a wg block_h 16 tile's time goes, from the SM's cycle counter (issue 22; experiment build only): the
template of `timeline.patch` has each warpgroup's first thread store %clock64 at fixed points of every tile into
the program's row of q (read into shared memory before the loop; 16 heads leave 2,304 int64 per row). Run with the
wheel built from that template on PYTHONPATH; prints, per point, the median cycles of each segment over the
programs' middle tiles, and writes every stamp to --json.

    python3 bench/logs/wg19/timeline.py --point v32/h16/topk2048:1 --point v32/h16/topk2048:128 --json t.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

import sparse_mla_aot
from sparse_mla_aot import dispatch
from tuning.gpu_timing import InputSets, Shape

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/: the profiler's point syntax
from ncu_profile import force_for, parse_point  # noqa: E402

DEFAULT_CHOICE = "wg_bh16_bt64_w4_s2x1"

WG_STRIDE = 720  # int64 stamps per warpgroup: 6 per tile
SOFTMAX, PV, PRODUCER = 0, 1, 2
# (name, warpgroup, event) -> the stamp points of timeline.patch
EVENTS = {
    "softmax: full wait done": (SOFTMAX, 0), "softmax: QK^T done": (SOFTMAX, 1), "softmax: P handed over": (SOFTMAX, 2),
    "softmax: own P wait done": (SOFTMAX, 3), "softmax: PV done": (SOFTMAX, 4),
    "pv: full wait done": (PV, 0), "pv: P wait done": (PV, 1), "pv: PV done": (PV, 2),
    "producer: loop top": (PRODUCER, 0), "producer: empty wait done": (PRODUCER, 1), "producer: full arrived": (PRODUCER, 2),
}
# segment -> (from event, tile offset of the from event, to event)
SEGMENTS = {
    "softmax waits for a full slot": ("softmax: PV done", -1, "softmax: full wait done"),
    "softmax QK^T (issue + wait)": ("softmax: full wait done", 0, "softmax: QK^T done"),
    "softmax: mask, max, exp2, P store, hand-off": ("softmax: QK^T done", 0, "softmax: P handed over"),
    "softmax: own P barrier": ("softmax: P handed over", 0, "softmax: own P wait done"),
    "softmax PV (issue + wait)": ("softmax: own P wait done", 0, "softmax: PV done"),
    "softmax: tile to tile": ("softmax: full wait done", -1, "softmax: full wait done"),
    "pv: waits for P after full": ("pv: full wait done", 0, "pv: P wait done"),
    "pv: rescale + PV": ("pv: P wait done", 0, "pv: PV done"),
    "producer: issue loads, wait empty": ("producer: loop top", 0, "producer: empty wait done"),
    "producer: dequantize + store + arrive": ("producer: empty wait done", 0, "producer: full arrived"),
    "producer: tile to tile": ("producer: loop top", -1, "producer: loop top"),
    "slot full -> softmax starts": ("producer: full arrived", 0, "softmax: full wait done"),
    "softmax PV done -> producer refills (2 tiles on)": ("softmax: PV done", -2, "producer: empty wait done"),
}


def run_point(point: str) -> dict:
    shape_name, batch, choice = parse_point(point)
    shape, choice = Shape.parse(shape_name), choice or DEFAULT_CHOICE
    spec = force_for(shape.kv_format, choice)
    sets = InputSets(shape).sets_for(batch)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with dispatch.forcing(spec):
        for i in range(6):  # warm-up on fresh copies of q (the stamps overwrite it)
            inputs = dict(sets[i % len(sets)], q=sets[i % len(sets)]["q"].clone())
            sparse_mla_aot.sparse_mla_decode(**inputs)
        inputs = dict(sets[0], q=sets[0]["q"].clone())
        torch.cuda.synchronize()
        start.record()
        sparse_mla_aot.sparse_mla_decode(**inputs)
        end.record()
        torch.cuda.synchronize()
    q = inputs["q"]
    stamps = q.view(batch, -1).view(torch.int64)[:, :3 * WG_STRIDE].cpu().tolist()
    n_tiles = -(-(shape.topk + shape.extra_topk) // 64)
    return {"point": point, "variant": choice, "rows": batch, "n_tiles": n_tiles, "call_us": start.elapsed_time(end) * 1e3,
            "stamps": stamps}


def stamp(row: list[int], event: str, tile: int) -> int:
    wg, k = EVENTS[event]
    return row[wg * WG_STRIDE + tile * 6 + k]


def summarize(result: dict) -> list[tuple[str, float]]:
    n = result["n_tiles"]
    tiles = range(2, n - 1) if n > 4 else range(1, n)
    lines = []
    for segment, (first, offset, last) in SEGMENTS.items():
        values = [stamp(row, last, t) - stamp(row, first, t + offset) for row in result["stamps"] for t in tiles
                  if t + offset >= 0]
        lines.append((segment, statistics.median(values)))
    whole = [stamp(row, "softmax: PV done", n - 1) - stamp(row, "producer: loop top", 0) for row in result["stamps"]]
    lines.append(("program: producer's first tile to last PV", statistics.median(whole)))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--point", action="append", required=True,
                        help="shape:rows[:variantxsplits], default variant wg_bh16_bt64_w4_s2x1")
    parser.add_argument("--json", help="write every stamp here")
    args = parser.parse_args()
    results = [run_point(p) for p in args.point]
    for result in results:
        print(f"\n{result['point']} ({result['variant']}, {result['n_tiles']} tiles per program, eager call "
              f"{result['call_us']:.1f} us): median cycles over programs x middle tiles")
        for segment, cycles in summarize(result):
            print(f"  {segment:52s} {cycles:10.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
