"""Command line: a thin layer over the stage functions."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# The build imports the contract it shares with the runtime from this checkout's src/ (never from an installed
# wheel, which may be another version); the build graph's edges run this module too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from build_tools import paths  # noqa: E402
from build_tools.report import format_table  # noqa: E402
from build_tools.variant import load_targets  # noqa: E402


def _targets(value: str) -> list[str]:
    known = load_targets()
    names = [n for n, t in known.items() if t.default] if value == "default" else value.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown target(s) {unknown}; known: {', '.join(known)} or 'default'")
    return names


def _run_edge(args: argparse.Namespace) -> int:
    """One edge of the build graph, for the target that holds the binaries."""
    from build_tools import artifact, ninja_graph
    from build_tools.build import write_target_report
    from build_tools.variant import get_target, load_grid

    target = get_target(args.target)
    if target.binaries != target.name:
        raise SystemExit(f"--target {target.name}: its binaries are {target.binaries}'s; run the edge for that")
    out_dir = paths.target_dir(target.name)
    if args.command == "compile-one":
        os.environ.pop("TRITON_INTERPRET", None)  # before triton is imported: compile, do not interpret
        record = artifact.compile_artifact(target, args.artifact, out_dir)
        print(artifact.result_line(record), flush=True)
    elif args.command == "configure":
        ninja_graph.configure(target, load_grid(args.grid), args.grid or paths.GRID_FILE)
    elif args.command == "render":
        artifact.render_sources(target, load_grid(args.grid), out_dir)
    else:
        write_target_report(target, args.grid)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="render, compile, inspect and select every variant for targets")
    build.add_argument("--target", type=_targets, required=True,
                       help="a target name, a comma list, or 'default' (sm120,sm121,sm90)")
    build.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes (default: all cores)")
    build.add_argument("--grid", type=Path, default=None, help="a grid TOML other than variants/grid.toml")
    build.add_argument("--quiet-table", action="store_true", help="do not print the full variant table")
    # The edges of build/<target>/build.ninja (build_tools/ninja_graph.py): what ninja runs, one target each.
    edges = {"configure": "write build/<target>/build.ninja and toolchain.json (when they changed)",
             "render": "render every source of the grid (rewrites only changed text)",
             "compile-one": "compile one artifact and write its binary, then its record",
             "report": "write report.json and report.md from the records"}
    for name, text in edges.items():
        edge = sub.add_parser(name, help=f"(a build.ninja edge) {text}")
        edge.add_argument("--target", required=True, help="a target that builds its own binaries")
        if name == "compile-one":  # not the grid: adding a variant to it must not change the other edges
            edge.add_argument("--artifact", required=True, help="a variant name, or 'combine'")
        else:
            edge.add_argument("--grid", type=Path, default=None, help="a grid TOML other than variants/grid.toml")
    tables = sub.add_parser("tables", help="write heuristic dispatch tables into variants/<target>/ from a build")
    tables.add_argument("--target", type=_targets, required=True)
    tables.add_argument("--proxy-sweep", type=Path, default=None,
                        help="a folder of `python -m tuning tune --target sm89-proxy` CSVs: derive those shapes' "
                             "tables from them")
    args = parser.parse_args(argv)

    if args.command in edges:
        return _run_edge(args)

    if args.command == "tables":
        from build_tools.tables import write_heuristic_tables, write_proxy_derived_tables

        for target in args.target:
            written = (write_proxy_derived_tables(target, args.proxy_sweep) if args.proxy_sweep
                       else write_heuristic_tables(target))
            for path in written:
                print(path.relative_to(path.parents[2]))
        return 0

    from build_tools.build import binary_set, build_target

    for shared in (t for t in args.target if binary_set(t).name != t):
        print(f"{shared}: runs {binary_set(shared).name}'s binaries ({binary_set(shared).cubin_arch})", flush=True)
    for target in dict.fromkeys(binary_set(t).name for t in args.target):
        started = time.monotonic()
        report = build_target(target, jobs=max(1, args.jobs), grid=args.grid)
        if not args.quiet_table:
            print(format_table(report["artifacts"]))
        summary = ", ".join(f"{k}: {c['shipped']} shipped / {c['pruned']} pruned" for k, c in report["counts"].items())
        print(f"{target}: {summary}; {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    if sys.argv[1:2] == ["compile-one"]:
        # Gluon's bindings leave nanobind objects alive, and nanobind warns about each one at interpreter exit
        # (hundreds of lines in a full build's log); the binary and its record are written by now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
