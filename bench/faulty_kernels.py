"""Copies of a built wheel's kernel directory, each with one deliberate fault, to show that the GPU scripts fail on
a broken package: run a script with SPARSE_MLA_AOT_KERNEL_DIR=<copy> and it must exit non-zero. Build host (the
combine fault is compiled by Triton 3.9, as the wheel's kernels were):

    python bench/faulty_kernels.py wheels/sparse_mla_aot-*.whl --out .gpu/faulty   # writes .gpu/faulty/<fault>/

Faults:
  combine-halved  every binary set's combine kernel recompiled from its template with the output halved; the
                  manifest's and the record's sha256 follow it, so the package's integrity check passes and the
                  kernel loads and runs: only a check of the numbers can catch it
  table-format    every dispatch table's rows name shipped variants of the other kv_format (a table mixed up
                  between layouts): the runtime refuses the table at its first use
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # before triton is imported: compile, do not interpret
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]  # build_tools, and the runtime's contract

from build_tools.render import COMBINE_NUM_WARPS, render_combine, write_atomic  # noqa: E402
from build_tools.variant import get_target  # noqa: E402
from sparse_mla_aot.contract import COMBINE_NAME, KV_FORMATS, Variant  # noqa: E402

KERNELS_IN_WHEEL = "sparse_mla_aot/kernels/"
# The combine template's output line, and the same line with the output halved.
COMBINE_OUTPUT = "out = acc * (out_scale / tl.where(empty, 1.0, weight_sum))"
COMBINE_OUTPUT_HALVED = "out = 0.5 * acc * (out_scale / tl.where(empty, 1.0, weight_sum))"


def extract_kernels(wheel: Path, dest: Path) -> None:
    """The wheel's sparse_mla_aot/kernels/ tree, as installed, into dest."""
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith(KERNELS_IN_WHEEL) and not m.endswith("/")]
        if not members:
            raise ValueError(f"{wheel} holds no {KERNELS_IN_WHEEL}: not a sparse-mla-aot wheel with kernels")
        for member in members:
            path = dest / member[len(KERNELS_IN_WHEEL):]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(member))


def halve_combine_output(kernels: Path) -> list[str]:
    """Recompile each binary set's combine kernel with its output halved; update manifest and record hashes."""
    from build_tools.compile import compile_kernel
    from build_tools.render import RenderedKernel

    manifest = json.loads((kernels / "manifest.json").read_text())
    changed = []
    for binaries, entry in manifest["targets"].items():
        if COMBINE_NAME not in entry.get("artifacts", {}):
            continue  # a target served by another's binaries (sm121)
        record_path = kernels / binaries / f"{COMBINE_NAME}.json"
        record = json.loads(record_path.read_text())
        rendered = render_combine(record["grid_dependency"])
        if COMBINE_OUTPUT not in rendered.source:
            raise RuntimeError(f"the combine template no longer has the line {COMBINE_OUTPUT!r}: update this fault")
        faulty = RenderedKernel(rendered.name, rendered.kernel_name,
                                rendered.source.replace(COMBINE_OUTPUT, COMBINE_OUTPUT_HALVED), rendered.params)
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / f"{COMBINE_NAME}.py"
            source.write_text(faulty.source)
            compiled = compile_kernel(faulty, source, get_target(binaries), COMBINE_NUM_WARPS,
                                      record["num_stages"], record["num_warps"])
        write_atomic(kernels / binaries / record["binary"], compiled.binary)
        digest = hashlib.sha256(compiled.binary).hexdigest()
        record["sha256"] = entry["artifacts"][COMBINE_NAME]["sha256"] = digest
        write_atomic(record_path, json.dumps(record, indent=1).encode())
        changed.append(f"{binaries}/{record['binary']}")
    write_atomic(kernels / "manifest.json", json.dumps(manifest, indent=1).encode())
    return changed


def swap_table_formats(kernels: Path) -> list[str]:
    """Each table row names the variant of the same axes in the other kv_format."""
    changed = []
    for path in sorted((kernels / "tables").glob("*/*.json")):
        table = json.loads(path.read_text())
        for row in table["rows"]:
            variant = Variant.parse(row["variant"])
            other = next(f for f in KV_FORMATS if f != variant.kv_format)
            row["variant"] = dataclasses.replace(variant, kv_format=other).name
        write_atomic(path, json.dumps(table, indent=1).encode())
        changed.append(str(path.relative_to(kernels)))
    return changed


FAULTS = {"combine-halved": halve_combine_output, "table-format": swap_table_formats}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="writes <out>/<fault>/, a kernel directory each")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma list of {list(FAULTS)}")
    args = parser.parse_args()
    faults = args.faults.split(",")
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        parser.error(f"--faults: unknown {unknown}; expected a comma list of {list(FAULTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for fault in faults:
        dest = args.out / fault
        staging = Path(tempfile.mkdtemp(dir=args.out, prefix=f".{fault}."))
        try:
            extract_kernels(args.wheel, staging)
            changed = FAULTS[fault](staging)
            if dest.exists():
                shutil.rmtree(dest)
            staging.rename(dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        print(f"{dest}: {fault}: {len(changed)} files changed ({', '.join(changed[:4])}"
              f"{', ...' if len(changed) > 4 else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
