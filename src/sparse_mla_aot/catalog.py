"""What the wheel holds: the manifest, each target's artifact records and its dispatch tables. Reads JSON
only; loading binaries onto a GPU is launch.py's job."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sparse_mla_aot import paths
from sparse_mla_aot.contract import ArtifactRecord, parse_table_stem, table_stem


@dataclass(frozen=True)
class TableRow:
    max_batch_rows: int | None  # None: open-ended last row
    variant: str
    num_splits: int
    # Launch the combine kernel as a programmatic dependent launch (where it was compiled for one): set by a tune
    # that measured it faster for this row; absent in a table means no (docs/design.md#programmatic-dependent-launch).
    programmatic_combine: bool = False


@dataclass(frozen=True)
class DispatchTable:
    target: str
    kv_format: str
    h_q: int
    rows: tuple[TableRow, ...]
    provenance: dict

    @cached_property
    def bounds(self) -> tuple[int, ...]:
        return tuple(row.max_batch_rows for row in self.rows[:-1])

    def row_for(self, batch_rows: int) -> int:
        """Threshold bins: the first row with batch_rows <= bound; beyond every bound, the last row."""
        for i, bound in enumerate(self.bounds):
            if batch_rows <= bound:
                return i
        return len(self.rows) - 1


def _flag(value) -> bool:
    if type(value) is not bool:
        raise ValueError(f"programmatic_combine must be true or false; got {value!r}")
    return value


def parse_table(raw: dict, source: str) -> DispatchTable:
    """Tables are reviewed data; a malformed one is an error naming the file and the rule broken."""
    try:
        rows = tuple(TableRow(r["max_batch_rows"], r["variant"], int(r["num_splits"]),
                              _flag(r.get("programmatic_combine", False))) for r in raw["rows"])
        table = DispatchTable(raw["target"], raw["kv_format"], int(raw["h_q"]), rows, raw["provenance"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"dispatch table {source} is malformed: {error!r}") from error
    if not rows or rows[-1].max_batch_rows is not None:
        raise ValueError(f"dispatch table {source}: the last row must be open-ended (max_batch_rows null)")
    bounds = [r.max_batch_rows for r in rows[:-1]]
    if any(type(b) is not int for b in bounds) or bounds != sorted(set(bounds)):
        raise ValueError(f"dispatch table {source}: bounds must be strictly increasing integers; got {bounds}")
    return table


def check_table_variants(table: DispatchTable, shipped_formats: dict[str, str], source: str) -> None:
    """Every row names a shipped split variant of the table's kv_format (shipped_formats: name -> kv_format): a
    variant of the other layout would run on the cache without an error and return garbage."""
    for i, row in enumerate(table.rows):
        kv_format = shipped_formats.get(row.variant)
        if kv_format is None:
            raise ValueError(f"dispatch table {source}: row {i} names {row.variant}, which is not a shipped split "
                             f"variant for {table.target}")
        if kv_format != table.kv_format:
            raise ValueError(f"dispatch table {source}: row {i} names {row.variant}, a {kv_format} variant; the "
                             f"table is for kv_format {table.kv_format!r}")


class Catalog:
    """The kernels and tables under one directory (the installed package's, or a build tree's)."""

    def __init__(self, root: Path | None = None):
        self.root = root or paths.kernel_dir()
        self._records: dict[str, dict[str, ArtifactRecord]] = {}
        self._tables: dict[tuple[str, str, int], DispatchTable] = {}

    @cached_property
    def manifest(self) -> dict:
        path = self.root / paths.MANIFEST_NAME
        if not path.exists():
            raise RuntimeError(f"sparse_mla_aot: no kernel manifest at {path}; the package was installed without "
                               f"kernels (build the wheel with `python setup.py bdist_wheel`, or set "
                               f"{paths.KERNEL_DIR_ENV})")
        return json.loads(path.read_text())

    @property
    def targets(self) -> list[str]:
        return sorted(self.manifest["targets"])

    def target_for_capability(self, capability: tuple[int, int]) -> str:
        """The cubin set for a device: the manifest's target of that compute capability (variants/targets.toml:
        12.0 -> sm120, 12.1 -> sm121, 9.0 -> sm90); SPARSE_MLA_AOT_TARGET overrides."""
        override = os.environ.get(paths.TARGET_ENV)
        if override:
            if override not in self.manifest["targets"]:
                raise RuntimeError(f"{paths.TARGET_ENV}={override!r}: this package holds {', '.join(self.targets)}")
            return override
        by_capability = {tuple(entry["capability"]): name for name, entry in self.manifest["targets"].items()
                         if entry["capability"] is not None}
        target = by_capability.get(tuple(capability))
        if target is None:
            held = ", ".join(f"{t} (compute capability {'.'.join(map(str, c))})" for c, t in by_capability.items())
            raise RuntimeError(f"sparse_mla_aot has no kernels for compute capability "
                               f"{capability[0]}.{capability[1]}; this wheel holds: {held}")
        return target

    def binaries(self, target: str) -> str:
        """The target whose binaries and records this target runs (sm121 runs sm120's sm_120f cubins)."""
        return self.manifest["targets"][target]["binaries"]

    def records(self, target: str) -> dict[str, ArtifactRecord]:
        """name -> the artifact's build record (status, reason, resources, params, binary, sha256)."""
        cache, binaries = self._records, self.binaries(target)
        if binaries not in cache:
            entry = self.manifest["targets"][binaries]
            names = [*entry["artifacts"], *entry["pruned"]]
            cache[binaries] = {name: self._read_record(binaries, name) for name in names}
        return cache[binaries]

    def _read_record(self, binaries: str, name: str) -> ArtifactRecord:
        path = self.root / binaries / f"{name}.json"
        return ArtifactRecord.from_json(json.loads(path.read_text()), str(path))

    def shipped(self, target: str) -> dict[str, ArtifactRecord]:
        return {n: r for n, r in self.records(target).items() if r.status == "shipped"}

    def binary(self, target: str, name: str) -> bytes:
        """The binary, refused if its sha256 differs from the manifest (a tampered or mixed-up file) or its record
        was built by another Triton than the manifest's (another calling convention)."""
        binaries = self.binaries(target)
        entry = self.manifest["targets"][binaries]["artifacts"][name]
        built_with, expected = self.records(target)[name].triton_version, self.manifest["triton_version"]
        if built_with != expected:
            raise RuntimeError(f"sparse_mla_aot: {binaries}/{name} was compiled by Triton {built_with}, the package "
                               f"by Triton {expected}; its calling convention may differ: rebuild the wheel")
        path = self.root / binaries / entry["binary"]
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            raise RuntimeError(f"sparse_mla_aot: {path} has sha256 {digest[:16]}…, the manifest says "
                               f"{entry['sha256'][:16]}…; the installed package is damaged: reinstall the wheel")
        return data

    def table(self, target: str, kv_format: str, h_q: int) -> DispatchTable:
        cache = self._tables
        key = (target, kv_format, h_q)
        if key not in cache:
            path = self.root / "tables" / target / f"{table_stem(kv_format, h_q)}.json"
            if not path.exists():
                have = sorted(p.stem for p in (self.root / "tables" / target).glob("*.json"))
                raise ValueError(f"no dispatch table for target {target}, kv_format {kv_format!r}, h_q {h_q}; "
                                 f"tables for {target}: {', '.join(have) or 'none'}")
            table = parse_table(json.loads(path.read_text()), str(path))
            check_table_variants(table, {name: record.variant.kv_format
                                         for name, record in self.shipped(target).items() if record.variant},
                                 str(path))
            cache[key] = table
        return cache[key]

    def tables(self, target: str) -> list[DispatchTable]:
        return [self.table(target, *parse_table_stem(p.stem))
                for p in sorted((self.root / "tables" / target).glob("*.json"))]
