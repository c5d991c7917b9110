"""How fast can this GPU gather the cache records at all? The split kernel's bandwidth (bench/peers.py) against the
same random record gathers with nothing else to do (docs/design.md#performance): a Triton kernel reads `rows x
topk` random 656-byte (v32) or 584-byte (model1) records from a cache far larger than L2 and folds them into one
word per program, so only the reads move bytes. Swept over the programs per call (128: one per row and SM, as the
split kernel at one split; more: several per SM) and the records each program loads per step (the bytes it keeps in
flight: step x record bytes, the index of the next step loaded beside them). Also torch's index_select of the same
records (reads and writes). Each kernel's fold is checked against torch's before timing. Device times: CUDA-graph
replay of one call per rotating index set (tuning.gpu_timing), median per call. Prints a table; writes
$OUT/gather_ceiling.json.

    python bench/gather_ceiling.py                      # GPU host with triton
    python bench/gather_ceiling.py --rows 128 --topk 2048 --record-bytes 656 --programs 128,512,2048
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tuning.__main__ import _ints as comma_ints  # noqa: E402  (the tune command's --batches parser)
from tuning.gpu_timing import capture, replay_times_us, summary  # noqa: E402

RATED_BYTES_PER_S = {"H200": 4.8e12, "H100": 3.35e12}  # HBM rated bandwidth by device name; fractions are of this
CACHE_BYTES = 4 << 30  # the pool the records are drawn from: 80x an H200's L2
INDEX_SETS = 3  # rotated within one graph, so no call finds the previous call's records in L2


@triton.jit
def gather_fold(cache, indices, folds, per_program, record_words: tl.constexpr, head_words: tl.constexpr,
                mid_words: tl.constexpr, last_words: tl.constexpr, step: tl.constexpr):
    """folds[p] = the sum of every 32-bit word of the records program p gathers (indices[p * per_program:][:per_program],
    per_program a multiple of step). A record is read as three unmasked power-of-two runs of words (word_split), so
    each load is as wide as the record's alignment allows (16 bytes for v32's records, 8 for model1's); the next
    step's indices load beside this step's records."""
    program = tl.program_id(0)
    first = indices + program * per_program
    fold_head = tl.zeros([step, head_words], dtype=tl.int32)
    fold_mid = tl.zeros([step, mid_words], dtype=tl.int32)
    fold_last = tl.zeros([step, last_words], dtype=tl.int32)
    tokens = tl.load(first + tl.arange(0, step)).to(tl.int64)
    for start in range(0, per_program, step):
        following = start + step + tl.arange(0, step)
        next_tokens = tl.load(first + following, mask=following < per_program, other=0).to(tl.int64)
        records = cache + tokens[:, None] * record_words
        fold_head += tl.load(records + tl.arange(0, head_words)[None, :])
        fold_mid += tl.load(records + head_words + tl.arange(0, mid_words)[None, :])
        fold_last += tl.load(records + head_words + mid_words + tl.arange(0, last_words)[None, :])
        tokens = next_tokens
    fold = tl.sum(tl.sum(fold_head, 1), 0) + tl.sum(tl.sum(fold_mid, 1), 0) + tl.sum(tl.sum(fold_last, 1), 0)
    tl.store(folds + program, fold)


def word_split(record_words: int) -> tuple[int, int, int]:
    """(head, mid, last): three powers of two, largest first, that sum to the record's words (656 bytes: 128 + 32 +
    4; 584: 128 + 16 + 2)."""
    parts = [1 << bit for bit in reversed(range(record_words.bit_length())) if record_words >> bit & 1]
    if len(parts) != 3:
        raise ValueError(f"a record of {record_words} words is not a sum of three powers of two (656 or 584 bytes "
                         f"are: 164 and 146 words)")
    return parts[0], parts[1], parts[2]


def launch_fold(cache_words: torch.Tensor, indices: torch.Tensor, folds: torch.Tensor, programs: int,
                step: int, num_warps: int) -> None:
    record_words = cache_words.shape[1]
    gather_fold[(programs,)](cache_words, indices, folds, indices.numel() // programs, record_words,
                             *word_split(record_words), step, num_warps=num_warps)


def expected_folds(cache_words: torch.Tensor, indices: torch.Tensor, programs: int) -> torch.Tensor:
    """The fold each program must produce, summed in int64 and wrapped to int32 as the kernel's adds wrap."""
    sums = cache_words[indices.long()].to(torch.int64).sum(dim=1).view(programs, -1).sum(dim=1)
    return ((sums + 2**31) % 2**32 - 2**31).to(torch.int32)


def rated_bytes_per_s(device_name: str) -> float | None:
    return next((rate for key, rate in RATED_BYTES_PER_S.items() if key in device_name), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=128, help="batch rows; one program per row at 128 programs")
    parser.add_argument("--topk", type=int, default=2048, help="records gathered per row")
    parser.add_argument("--record-bytes", type=int, default=656, help="656: v32; 584: model1")
    parser.add_argument("--programs", type=comma_ints, default=[128, 256, 512, 1024, 2048],
                        help="programs per call, comma list")
    parser.add_argument("--steps", type=comma_ints, default=[16, 32, 64], help="records each program loads per step")
    parser.add_argument("--warps", type=comma_ints, default=[4, 8], help="num_warps per program")
    parser.add_argument("--replays", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = parser.parse_args()
    if args.record_bytes % 4:
        parser.error(f"--record-bytes must be a multiple of 4 (656 or 584); got {args.record_bytes}")
    try:
        word_split(args.record_bytes // 4)
    except ValueError as error:
        parser.error(f"--record-bytes {args.record_bytes}: {error}")
    records = args.rows * args.topk
    uneven = [p for p in args.programs if records % p]
    if uneven:
        parser.error(f"--programs must divide the {args.rows} x {args.topk} = {records} records "
                     f"evenly; {','.join(map(str, uneven))} do not")
    uneven = [f"{s} (programs {p}: {records // p} records each)" for p in args.programs for s in args.steps
              if (records // p) % s]
    if uneven:
        parser.error(f"--steps must divide every program's records; {', '.join(uneven)} do not")
    if not torch.cuda.is_available():
        print("gather_ceiling.py needs a CUDA GPU", file=sys.stderr)
        return 2

    record_words = args.record_bytes // 4
    tokens = CACHE_BYTES // args.record_bytes
    generator = torch.Generator(device="cuda").manual_seed(0)
    cache = torch.randint(-2**31, 2**31 - 1, (tokens, record_words), dtype=torch.int32, device="cuda",
                          generator=generator)
    index_sets = [torch.randint(0, tokens, (records,), dtype=torch.int32, device="cuda", generator=generator)
                  for _ in range(INDEX_SETS)]
    read_bytes = records * args.record_bytes
    name = torch.cuda.get_device_name()
    rated = rated_bytes_per_s(name)
    print(f"{name}: {args.rows} rows x {args.topk} random {args.record_bytes}-byte records = {read_bytes / 1e6:.1f} "
          f"MB per call from a {CACHE_BYTES >> 30} GiB pool; rated {rated / 1e12 if rated else float('nan'):.2f} TB/s")
    print(f"{'kernel':>14} {'programs':>8} {'step':>4} {'warps':>5} {'in flight/program':>17} {'us':>8} {'GB/s':>7} "
          f"{'of rated':>8}")
    results = []

    def record(label: str, programs: int, step: int, warps: int, moved: int, decode) -> None:
        graph = capture([{"indices": s} for s in index_sets], decode=decode)
        times = summary(replay_times_us(graph, INDEX_SETS, args.replays))
        rate = moved / (times["median_us"] * 1e-6)
        results.append({"kernel": label, "programs": programs, "step": step, "warps": warps, "bytes": moved,
                        "bytes_per_s": rate, **times})
        in_flight = f"{step * args.record_bytes / 1024:.0f} KiB" if step else "-"
        print(f"{label:>14} {programs:>8} {step:>4} {warps:>5} {in_flight:>17} {times['median_us']:8.1f} "
              f"{rate / 1e9:7.0f} {rate / rated if rated else float('nan'):8.2f}", flush=True)

    for programs in args.programs:
        folds = torch.empty(programs, dtype=torch.int32, device="cuda")
        for step in args.steps:
            for warps in args.warps:
                launch_fold(cache, index_sets[0], folds, programs, step, warps)
                if not torch.equal(folds, expected_folds(cache, index_sets[0], programs)):
                    print(f"FAIL gather_fold programs={programs} step={step} warps={warps}: folds differ from "
                          f"torch's", file=sys.stderr)
                    return 1
                record("gather_fold", programs, step, warps, read_bytes,
                       lambda indices, p=programs, s=step, w=warps: launch_fold(cache, indices, folds, p, s, w))
    selected = torch.empty(records, record_words, dtype=torch.int32, device="cuda")
    record("index_select", 0, 0, 0, 2 * read_bytes,
           lambda indices: torch.index_select(cache, 0, indices, out=selected))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gather_ceiling.json").write_text(json.dumps({"device": name, "rows": args.rows, "topk": args.topk,
                                                               "record_bytes": args.record_bytes,
                                                               "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
