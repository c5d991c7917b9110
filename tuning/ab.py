"""`ab` (on a GPU host): the A/B experiment of the sm120 prototype (docs/design.md#the-sm120-prototype) as one
command. Same inputs, A and B captured as graphs and replayed alternately; per batch size the median and spread
(p10..p90) of each, and a verdict only where the medians differ by more than the larger spread."""
from __future__ import annotations

from sparse_mla_aot.dispatch import forcing, parse_force
from tuning.gpu_timing import InputSets, Shape, capture, replay_in_turns, summary


def parse_side(value: str) -> str | None:
    """'table' (the installed dispatch table) or a SPARSE_MLA_AOT_FORCE spec, checked now."""
    if value == "table":
        return None
    parse_force(value)
    return value


def verdict(a: dict, b: dict) -> str:
    spread = max(a["p90_us"] - a["p10_us"], b["p90_us"] - b["p10_us"])
    difference = b["median_us"] - a["median_us"]
    if abs(difference) <= spread:
        return "no verdict (within spread)"
    return f"{'A' if difference > 0 else 'B'} faster by {abs(difference) / max(a['median_us'], b['median_us']):.1%}"


def run_ab(shape: Shape, a: str | None, b: str | None, batches, rounds: int = 20, per_round: int = 5) -> list[dict]:
    inputs = InputSets(shape)
    results = []
    for batch in batches:
        sets = inputs.sets_for(batch)
        with forcing(a):
            graph_a = capture(sets)
        with forcing(b):
            graph_b = capture(sets)
        times_a, times_b = replay_in_turns([graph_a, graph_b], len(sets), rounds, per_round)
        sa, sb = summary(times_a), summary(times_b)
        results.append({"batch_rows": batch, "a": sa, "b": sb, "b_over_a": sb["median_us"] / sa["median_us"],
                        "verdict": verdict(sa, sb)})
    return results


def format_results(shape: Shape, a_label: str, b_label: str, results: list[dict]) -> str:
    lines = [f"{shape.label}   A = {a_label}   B = {b_label}",
             f"{'batch':>6} {'A median us':>12} {'A p10..p90':>16} {'B median us':>12} {'B p10..p90':>16} "
             f"{'B/A':>6}  verdict"]
    for r in results:
        a, b = r["a"], r["b"]
        lines.append(f"{r['batch_rows']:>6} {a['median_us']:>12.1f} {a['p10_us']:>7.1f}..{a['p90_us']:<8.1f} "
                     f"{b['median_us']:>12.1f} {b['p10_us']:>7.1f}..{b['p90_us']:<8.1f} {r['b_over_a']:>6.3f}  "
                     f"{r['verdict']}")
    return "\n".join(lines)
