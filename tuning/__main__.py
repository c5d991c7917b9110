"""Command line of the GPU-host tools: `python -m tuning tune|ab ...`, a thin layer over tune.tune and ab.run_ab."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sparse_mla_aot.contract import KV_FORMATS


def _ints(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers; got {value!r}") from None


def _shape_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kv-format", choices=KV_FORMATS, required=True)
    parser.add_argument("--heads", type=int, required=True, help="h_q")
    parser.add_argument("--topk", type=int, default=None, help="default: 2048 (v32), 512 (model1)")
    parser.add_argument("--extra-topk", type=int, default=None, help="default: 0 (v32), 128 (model1)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tuning", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    tune = sub.add_parser("tune", help="time shipped variants x splits x batch sizes; write the table")
    tune.add_argument("--target", required=True)
    _shape_args(tune)
    tune.add_argument("--batches", type=_ints, default=None, help="batch rows, comma list (default: 1..128)")
    tune.add_argument("--splits", type=_ints, default=None, help="split counts, comma list (default: 1..64)")
    tune.add_argument("--variants", default="*", help="glob over variant names (default: all shipped)")
    tune.add_argument("--replays", type=int, default=50, help="timed graph replays per measurement (>= 50)")
    tune.add_argument("--out-dir", type=Path, default=Path("bench/tune"), help="CSV and PNG go here")

    ab = sub.add_parser("ab", help="A/B two tables or forced variants, alternated, per batch size")
    ab.add_argument("--a", required=True, help="'table' or a SPARSE_MLA_AOT_FORCE value")
    ab.add_argument("--b", required=True, help="'table' or a SPARSE_MLA_AOT_FORCE value")
    _shape_args(ab)
    ab.add_argument("--batches", type=_ints, default=[1, 8, 48, 64, 80, 96])
    ab.add_argument("--rounds", type=int, default=20, help="alternations; each times 5 replays of A then of B")
    args = parser.parse_args(argv)

    from tuning.gpu_timing import Shape

    shape = Shape(args.kv_format, args.heads, args.topk or (2048 if args.kv_format == "v32" else 512),
                  args.extra_topk if args.extra_topk is not None else (0 if args.kv_format == "v32" else 128))
    if args.command == "tune":
        from tuning.tune import BATCHES, SPLITS, tune as run_tune

        result = run_tune(args.target, shape, batches=args.batches or BATCHES, splits=args.splits or SPLITS,
                          pattern=args.variants, replays=max(50, args.replays), out_dir=args.out_dir,
                          command="python -m tuning " + " ".join(argv or sys.argv[1:]), log=sys.stdout)
        print(json.dumps(result, indent=1))
    else:
        from tuning.ab import format_results, parse_side, run_ab

        results = run_ab(shape, parse_side(args.a), parse_side(args.b), args.batches, rounds=args.rounds)
        print(format_results(shape, args.a, args.b, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
