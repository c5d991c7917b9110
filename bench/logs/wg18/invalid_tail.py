"""Session 18 (issue 22): the installed wheel's dispatched op on rows whose index lists end in -1, as an engine's are
while a sequence is shorter than topk, against the same rows with every index valid.

Each row's valid length is uniform in [1, topk] (the extra set, model1's window, stays whole); the indices past it
are -1. Both kinds of input are timed as `tune` times (tuning.gpu_timing: rotating sets, one graph per kind, replayed
in turns, median per call), and the dispatched op's numerics are checked on the tail inputs at 8 rows. Prints one
table; with --json writes the rows there. Run once per wheel (PYTHONPATH), in alternation, and compare the JSONs.

    python bench/logs/wg18/invalid_tail.py --label cur --json $OUT/tail_cur_1.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch  # noqa: E402

import sparse_mla_aot  # noqa: E402
from sparse_mla_aot.reference import check_close, reference_sparse_mla_decode  # noqa: E402
from tuning.gpu_timing import InputSets, Shape, capture, replay_in_turns, summary  # noqa: E402

SHAPES = "v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,v32/h32/topk2048,model1/h32/topk512+128,v32/h16/topk2048"


def with_tails(sets: list[dict], generator: torch.Generator) -> list[dict]:
    """Copies of `sets` whose rows keep a uniform random number (1..topk) of their indices, the rest -1."""
    tails = []
    for inputs in sets:
        indices = inputs["indices"]
        rows, _, topk = indices.shape
        lengths = torch.randint(1, topk + 1, (rows, 1, 1), device=indices.device, generator=generator)
        positions = torch.arange(topk, device=indices.device)
        tails.append(dict(inputs, indices=torch.where(positions < lengths, indices, -1).to(torch.int32)))
    return tails


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--batches", default="64,128")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    print(f"{args.label}: {torch.cuda.get_device_name()}")
    print(f"{'shape':<24} {'b':>4} {'valid us':>9} {'tails us':>9} {'tails/valid':>11}  numerics (tails, b=8)")
    for label in args.shapes.split(","):
        shape = Shape.parse(label)
        inputs = InputSets(shape, seed=1)
        generator = torch.Generator(device="cuda").manual_seed(7)
        check_set = with_tails(inputs.sets_for(8), generator)[0]
        out, lse = sparse_mla_aot.sparse_mla_decode(**check_set)
        numerics = check_close(out.float(), lse.float(), *(t.float() for t in reference_sparse_mla_decode(**check_set)))
        for batch in map(int, args.batches.split(",")):
            valid = inputs.sets_for(batch)
            tails = with_tails(valid, generator)
            graphs = [capture(valid), capture(tails)]
            times = replay_in_turns(graphs, len(valid), args.rounds, 5)
            valid_us, tails_us = (summary(t)["median_us"] for t in times)
            rows.append({"shape": label, "batch_rows": batch, "valid_us": valid_us, "tails_us": tails_us,
                         "numerics_ok": numerics["ok"]})
            print(f"{label:<24} {batch:>4} {valid_us:>9.1f} {tails_us:>9.1f} {tails_us / valid_us:>11.3f}  "
                  f"{'pass' if numerics['ok'] else 'FAIL ' + str(numerics['failures'])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"label": args.label, "device": torch.cuda.get_device_name(),
                                               "rows": rows}, indent=1))
    return 0 if all(r["numerics_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
