"""Command line: a thin layer over the stage functions."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# The build imports the contract it shares with the runtime from this checkout's src/ (never from an installed
# wheel, which may be another version); compile workers inherit this path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from build_tools.report import format_table  # noqa: E402
from build_tools.variant import load_targets  # noqa: E402


def _targets(value: str) -> list[str]:
    known = load_targets()
    names = [n for n, t in known.items() if t.default] if value == "default" else value.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown target(s) {unknown}; known: {', '.join(known)} or 'default'")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="render, compile, inspect and select every variant for targets")
    build.add_argument("--target", type=_targets, required=True,
                       help="a target name, a comma list, or 'default' (sm120,sm121,sm90)")
    build.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes (default: all cores)")
    build.add_argument("--grid", type=Path, default=None, help="a grid TOML other than variants/grid.toml")
    build.add_argument("--quiet-table", action="store_true", help="do not print the full variant table")
    tables = sub.add_parser("tables", help="write heuristic dispatch tables into variants/<target>/ from a build")
    tables.add_argument("--target", type=_targets, required=True)
    tables.add_argument("--proxy-sweep", type=Path, default=None,
                        help="a folder of `python -m tuning tune --target sm89-proxy` CSVs: derive those shapes' "
                             "tables from them")
    args = parser.parse_args(argv)

    if args.command == "tables":
        from build_tools.tables import write_heuristic_tables, write_proxy_derived_tables

        for target in args.target:
            written = (write_proxy_derived_tables(target, args.proxy_sweep) if args.proxy_sweep
                       else write_heuristic_tables(target))
            for path in written:
                print(path.relative_to(path.parents[2]))
        return 0

    from build_tools.build import build_target

    for target in args.target:
        started = time.monotonic()
        report = build_target(target, jobs=max(1, args.jobs), grid=args.grid)
        if not args.quiet_table:
            print(format_table(report["artifacts"]))
        summary = ", ".join(f"{k}: {c['shipped']} shipped / {c['pruned']} pruned" for k, c in report["counts"].items())
        print(f"{target}: {summary}; {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
