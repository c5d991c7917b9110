"""Stage 6: stage a target set's shipped binaries, every artifact record, the dispatch tables and a manifest
into a package directory (the wheel's sparse_mla_aot/kernels/). Refuses a table that names a variant
that was not shipped or is of the other kv_format, or whose bounds are not increasing."""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
import zlib
from pathlib import Path

from build_tools import paths
from build_tools.render import write_atomic
from build_tools.report import read_report
from build_tools.variant import get_target
from sparse_mla_aot.catalog import check_table_variants, parse_table
from sparse_mla_aot.contract import COMBINE_NAME, Variant


def _check_table(table: dict, source: Path, shipped_formats: dict[str, str], binaries: str) -> None:
    """The runtime's own table rules (parse_table, check_table_variants): every row names a shipped variant of
    the table's kv_format (shipped_formats: binary set `binaries`' split variants -> kv_format)."""
    try:
        check_table_variants(parse_table(table, str(source)), shipped_formats, str(source))
    except ValueError as error:
        raise ValueError(f"{error} (see build/{binaries}/report.md)") from None


def stage(targets: list[str], dest: Path, package_version: str) -> dict:
    """Copy everything the runtime reads into dest; returns the manifest (written last). A target whose binaries
    are another target's (sm121: sm120's) gets its own manifest entry and tables, and no copy of the binaries."""
    if dest.exists():
        shutil.rmtree(dest)
    manifest = {"package_version": package_version, "triton_version": importlib.metadata.version("triton"),
                "targets": {}, "tables": []}
    shipped_formats = {}
    for binaries in dict.fromkeys(get_target(t).binaries for t in targets):
        artifacts, pruned = _stage_binaries(binaries, dest / binaries)
        shipped_formats[binaries] = {name: Variant.parse(name).kv_format for name in artifacts if name != COMBINE_NAME}
        manifest["targets"][binaries] = {"artifacts": artifacts, "pruned": pruned}
    for target in targets:
        entry = get_target(target).manifest_entry()
        (dest / "tables" / target).mkdir(parents=True)
        for source in sorted((paths.VARIANTS_DIR / target).glob("*.json")):
            table = json.loads(source.read_text())
            _check_table(table, source, shipped_formats[entry["binaries"]], entry["binaries"])
            shutil.copyfile(source, dest / "tables" / target / source.name)
            manifest["tables"].append(f"{target}/{source.name}")
        manifest["targets"][target] = {**entry, **manifest["targets"].get(target, {})}
    write_atomic(dest / "manifest.json", json.dumps(manifest, indent=1).encode())
    return manifest


def size_lines(manifest: dict, dest: Path) -> list[str]:
    """What each binary set adds to the wheel: its files' bytes, and deflated as the wheel's zip stores them."""
    lines = []
    for binaries in dict.fromkeys(entry["binaries"] for entry in manifest["targets"].values()):
        files = [path.read_bytes() for path in sorted((dest / binaries).iterdir())]
        raw, deflated = sum(map(len, files)), sum(len(zlib.compress(data, 6)) for data in files)
        runs_on = [name for name, entry in manifest["targets"].items() if entry["binaries"] == binaries]
        lines.append(f"{binaries} (runs on {', '.join(runs_on)}): {len(manifest['targets'][binaries]['artifacts'])} "
                     f"binaries and {len(files) - len(manifest['targets'][binaries]['artifacts'])} records, "
                     f"{raw / 1e6:.1f} MB, {deflated / 1e6:.1f} MB deflated")
    return lines


def _stage_binaries(target: str, dest: Path) -> tuple[dict, list[str]]:
    """A binary set's shipped binaries (checked against their records) and every record; returns the manifest's
    artifacts {name: {binary, sha256}} and the pruned names."""
    report = read_report(target)
    artifacts = {}
    dest.mkdir(parents=True)
    for record in report["artifacts"]:
        if record.status == "shipped":
            data = (paths.target_dir(target) / record.binary).read_bytes()
            if hashlib.sha256(data).hexdigest() != record.sha256:
                raise RuntimeError(f"build/{target}/{record.binary} does not match its record; rebuild")
            (dest / record.binary).write_bytes(data)
            artifacts[record.name] = {"binary": record.binary, "sha256": record.sha256}
        (dest / f"{record.name}.json").write_text(json.dumps(record.to_json(), indent=1))
    return artifacts, sorted(r.name for r in report["artifacts"] if r.status != "shipped")
