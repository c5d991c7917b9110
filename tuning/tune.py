"""`tune` (on a GPU host): time every shipped variant x split count x batch size of one (kv_format, h_q) through
the installed runtime, reject variants that fail numerics on this GPU, and write the dispatch table with its
provenance, every measurement (CSV, resumable) and a plot."""
from __future__ import annotations

import csv
import datetime
import fnmatch
import json
import subprocess
import time
from pathlib import Path

import torch

import sparse_mla_aot
from build_tools.measurements import CSV_FIELDS, Key, best_per_batch, header, read_rows, table_rows, write_rows
from build_tools.render import write_if_different
from build_tools.tables import table_path
from sparse_mla_aot import ops
from sparse_mla_aot.contract import COMBINE_NAME, ArtifactRecord, table_stem
from sparse_mla_aot.dispatch import force_spec, forcing
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode
from tuning.gpu_timing import InputSets, Shape, capture, replay_in_turns, replay_times_us, summary

BATCHES = (1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 128)
SPLITS = (1, 2, 4, 8, 16, 32, 64)
# Two passes per batch size: every point is screened with a few replays; only points within SCREEN_MARGIN of the
# best screened time are measured in full (>= 50 replays) and only those can enter the table. A 5-replay median
# is within a few percent of the 50-replay one here, so a 1.3x margin keeps every plausible winner.
SCREEN_REPLAYS = 5
SCREEN_MARGIN = 1.3
# Device time, not capture, is what a tune spends (measured: 64 of the 68 s at 1 row), and most of it on points
# several times slower than the best. A point whose first replay is beyond PROBE_CUT x the best screened so far
# cannot come within SCREEN_MARGIN, so it keeps that one replay. Points run in the previous batch size's order,
# fastest first, so the best so far is near the final best early.
PROBE_CUT = 2.0


def candidates(target: str, kv_format: str, pattern: str) -> dict[str, ArtifactRecord]:
    shipped = ops.catalog().shipped(target)
    return {name: r for name, r in sorted(shipped.items())
            if r.variant and r.variant.kv_format == kv_format and fnmatch.fnmatch(name, pattern)}


def numerics_rejects(shape: Shape, records: dict[str, ArtifactRecord]) -> dict[str, str]:
    """Each variant once on random inputs with every option (4 splits) against the reference, by the numerics rule
    (docs/design.md#numerics)."""
    inputs = make_inputs(4, 2, shape.h_q, shape.topk, shape.kv_format, extra_topk=shape.extra_topk,
                         with_sink=True, with_topk_length=True, device="cuda", seed=7)
    ref_out, ref_lse = reference_sparse_mla_decode(**inputs)
    rejects = {}
    for name, record in records.items():
        with forcing(force_spec(record.variant, 4)):
            out, lse = sparse_mla_aot.sparse_mla_decode(**inputs)
        figures = check_close(out.float(), lse, ref_out.float(), ref_lse.float())
        if not figures["ok"]:
            rejects[name] = "; ".join(figures["failures"])
    return rejects


def points(shape: Shape, records: dict[str, ArtifactRecord], splits) -> list[tuple[str, int]]:
    """(variant, split count) pairs. More splits than tiles would be the same launch as one split per tile, so a
    split count beyond the tile count is measured as the tile count itself (model1 topk 512 + 128 at block_t 64 has
    10 tiles: 16 and 64 splits run as 10, which 8 does not cover)."""
    found = []
    for name, record in records.items():
        tiles = (shape.topk + shape.extra_topk) // record.variant.block_t
        found += [(name, s) for s in sorted({min(s, tiles) for s in splits})]
    return found


def contenders(screened: dict[tuple[str, int], float], margin: float = SCREEN_MARGIN) -> list[tuple[str, int]]:
    """Points whose screened median is within `margin` of the best screened median."""
    best = min(screened.values())
    return sorted(p for p, median in screened.items() if median <= margin * best)


def measure(shape: Shape, records: dict[str, ArtifactRecord], batches, splits, replays: int, csv_path: Path,
            done: dict[Key, dict], log, programmatic_combine: bool = False) -> list[dict]:
    """Screen every (variant, split) per batch, then measure the contenders in full, in turns (one after another,
    drift decided close calls); with programmatic_combine (the target's combine kernel can wait for the split grid)
    every contender that splits also with its combine kernel as a programmatic dependent launch. The fastest enters
    the table. Appends each row to csv_path as it is measured, so an interrupted tune resumes where it stopped."""
    if csv_path.exists() and header(csv_path) != list(CSV_FIELDS):
        write_rows(csv_path, list(done.values()))  # an older column order: rewrite before appending
    new_file = not csv_path.exists()
    inputs = InputSets(shape)
    with open(csv_path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, lineterminator="\n")
        if new_file:
            writer.writeheader()

        def record(batch, sets, name, num_splits, programmatic, stage, times):
            row = {"batch_rows": batch, "variant": name, "num_splits": num_splits, "programmatic_combine": programmatic,
                   "stage": stage, **summary(times), "calls_per_replay": len(sets)}
            done[batch, name, num_splits, programmatic, stage] = row
            writer.writerow(row)
            f.flush()

        def graph_of(sets, name, num_splits, programmatic):
            with forcing(force_spec(records[name].variant, num_splits, bool(programmatic))):
                return capture(sets, warmups=1)

        def screened_us(batch, sets, name, num_splits, cut_us):
            if (batch, name, num_splits, 0, "screen") not in done:
                graph = graph_of(sets, name, num_splits, 0)
                times = replay_times_us(graph, len(sets), 1)
                if times[0] <= cut_us:
                    times += replay_times_us(graph, len(sets), SCREEN_REPLAYS - 1)
                del graph
                record(batch, sets, name, num_splits, 0, "screen", times)
            return float(done[batch, name, num_splits, 0, "screen"]["median_us"])

        def full_us(batch, sets, launches):
            """The launches (variant, splits, programmatic) measured in turns, `replays` replays each."""
            todo = [launch for launch in launches if (batch, *launch, "full") not in done]
            graphs = [graph_of(sets, *launch) for launch in todo]
            rounds = -(-replays // SCREEN_REPLAYS)
            for launch, times in zip(todo, replay_in_turns(graphs, len(sets), rounds, SCREEN_REPLAYS)):
                record(batch, sets, *launch, "full", times)
            del graphs
            return {launch: float(done[(batch, *launch, "full")]["median_us"]) for launch in launches}

        previous: dict[tuple[str, int], float] = {}
        for batch in batches:
            started = time.monotonic()
            sets = inputs.sets_for(batch)
            todo = sorted(points(shape, records, splits), key=lambda p: previous.get(p, 0.0))
            screened = {}
            for p in todo:
                best = min(screened.values(), default=float("inf"))
                if (batch, *p, 0, "full") in done:
                    screened[p] = float(done[(batch, *p, 0, "full")]["median_us"])
                else:
                    screened[p] = screened_us(batch, sets, *p, cut_us=PROBE_CUT * best)
            finalists = contenders(screened)
            launches = [(*p, 0) for p in finalists]
            if programmatic_combine:  # each split finalist's combine kernel as a programmatic launch too
                launches += [(*p, 1) for p in finalists if p[1] > 1]
            full = full_us(batch, sets, launches)
            (name, num_splits, programmatic), best_us = min(full.items(), key=lambda item: item[1])
            probed = sum(1 for p in todo if int(done.get((batch, *p, 0, "screen"), {}).get("n", 0)) == 1)
            print(f"{shape.label} batch_rows {batch:>4}: {len(screened)} screened ({probed} cut after one replay), "
                  f"{len(finalists)} in full; best {name} x{num_splits}{' programmatic' if programmatic else ''} "
                  f"{best_us:.1f} us "
                  f"({time.monotonic() - started:.0f} s)", file=log, flush=True)
            previous = screened
    return list(done.values())


def _driver() -> str:
    result = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def plot(rows: list[dict], best: dict[int, dict], shape: Shape, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name in sorted({r["variant"] for r in rows}):
        curve = sorted((int(b), min(float(r["median_us"]) for r in rows
                                    if r["variant"] == name and int(r["batch_rows"]) == b))
                       for b in {int(r["batch_rows"]) for r in rows if r["variant"] == name})
        ax.plot(*zip(*curve), color="0.75", linewidth=0.8)
    envelope = sorted((b, float(r["median_us"])) for b, r in best.items())
    ax.plot(*zip(*envelope), color="tab:red", linewidth=2.5, marker="o", label="chosen (table)")
    ax.set_xlabel("batch rows (b * s_q)")
    ax.set_ylabel("device time per call, us (median of graph replays)")
    ax.set_yscale("log")
    ax.set_title(f"{shape.label} on {torch.cuda.get_device_name()}: each variant at its best split count (grey)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def method(replays: int) -> str:
    """How a tune measures, for its table's provenance."""
    return ("CUDA-graph replay of one call per rotating input set, CUDA events, median per-call time of the replays; "
            "inputs: random q and indices over a 262,144-token cache; every point screened with "
            f"{SCREEN_REPLAYS} replays (one if that one is beyond {PROBE_CUT}x the best so far), those within "
            f"{SCREEN_MARGIN}x of the best (and, splitting, with a programmatic combine launch) measured with "
            f"{replays}, in turns of {SCREEN_REPLAYS}")


def tuned_table(target: str, shape: Shape, best: dict[int, dict], measured_on: dict, *, command: str, resumed: int,
                variants_timed: int, rejected: dict, wall_s: int, replays: int) -> dict:
    """The table a tune writes: the best point per batch size as rows, with how and where they were measured
    (measured_on: gpu, driver, triton, torch, date)."""
    return {
        "target": target, "kv_format": shape.kv_format, "h_q": shape.h_q,
        "provenance": {
            "kind": "tuned", **measured_on, "command": command,
            "resumed_from_rows": resumed,  # measurements already in the CSV from earlier invocations (same GPU)
            "shape": {"topk": shape.topk, "extra_topk": shape.extra_topk},
            "variants_timed": variants_timed, "rejected": rejected,
            "wall_s": wall_s,  # measuring, this invocation
            "method": method(replays),
        },
        "rows": table_rows(best),
    }


def tune(target: str, shape: Shape, *, batches=BATCHES, splits=SPLITS, pattern: str = "*", replays: int = 50,
         out_dir: Path, command: str, log) -> dict:
    device_target = sparse_mla_aot.prepare()
    if device_target != target:
        raise ValueError(f"--target {target} but this GPU runs {device_target} kernels; tune on a {target} GPU "
                         f"(or set SPARSE_MLA_AOT_TARGET for a proxy)")
    records = candidates(target, shape.kv_format, pattern)
    if not records:
        raise ValueError(f"no shipped {shape.kv_format} variant of {target} matches {pattern!r}")
    rejects = numerics_rejects(shape, records)
    for name, why in rejects.items():
        print(f"rejected {name}: fails numerics on this GPU: {why}", file=log, flush=True)
    passing = {n: r for n, r in records.items() if n not in rejects}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{target}_{table_stem(shape.kv_format, shape.h_q)}"
    done = read_rows(out_dir / f"{stem}.csv")
    resumed = len(done)
    started = time.monotonic()
    rows = measure(shape, passing, batches, splits, replays, out_dir / f"{stem}.csv", done, log,
                   programmatic_combine=ops.catalog().records(target)[COMBINE_NAME].grid_dependency)
    rows = [r for r in rows if r["variant"] in passing and int(r["batch_rows"]) in batches]
    best = best_per_batch(rows, batches)
    measured_on = {"gpu": torch.cuda.get_device_name(), "driver": _driver(),
                   "triton": ops.catalog().manifest["triton_version"], "torch": torch.__version__,
                   "date": datetime.date.today().isoformat()}
    table = tuned_table(target, shape, best, measured_on, command=command, resumed=resumed,
                        variants_timed=len(passing), rejected=rejects,
                        wall_s=round(time.monotonic() - started), replays=replays)
    path = table_path(target, shape.kv_format, shape.h_q)
    write_if_different(path, json.dumps(table, indent=1) + "\n")
    plot(rows, best, shape, out_dir / f"{stem}.png")
    return {"table": str(path), "best": {b: (r["variant"], r["num_splits"], r["median_us"]) for b, r in best.items()},
            "rejected": rejects, "wall_s": table["provenance"]["wall_s"]}
