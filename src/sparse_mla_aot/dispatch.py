"""Pick (split variant, num_splits, programmatic combine) for a call: a forced variant if one is in force (forcing(),
else SPARSE_MLA_AOT_FORCE), else the target's table row for batch_rows = b * s_q (docs/design.md#dispatch). Depends
on shapes only."""
from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from sparse_mla_aot import paths
from sparse_mla_aot.catalog import Catalog, DispatchTable
from sparse_mla_aot.contract import FAMILIES, VARIANT_FIELDS, Variant, table_stem

FORCED_VARIANT_FIELDS = VARIANT_FIELDS[1:]  # the kv_format comes from the call
FORCE_FIELDS = (*(f for f in FORCED_VARIANT_FIELDS if f != "family"), "num_splits")  # family is optional
# May be left out: family (default "fused", the family forcing had before there were two); programmatic_combine
# (default 0; 1 launches the combine kernel as a programmatic dependent launch where it was compiled for it,
# docs/design.md#programmatic-dependent-launch).
OPTIONAL_FORCE_FIELDS = ("family", "programmatic_combine")
DEFAULT_FORCED_FAMILY = "fused"
_FROM_ENVIRONMENT = object()
_forced: ContextVar[object] = ContextVar("sparse_mla_aot_forced", default=_FROM_ENVIRONMENT)


@dataclass(frozen=True)
class Choice:
    variant: str
    num_splits: int
    table: DispatchTable | None  # None when forced
    row: int
    forced_by: str | None = None
    programmatic_combine: bool = False

    @property
    def why(self) -> str:
        """Built only when asked (explain, errors): the per-call path never formats strings."""
        if self.table is None:
            return f"forced by {paths.FORCE_ENV}={self.forced_by}"
        t, bound = self.table, self.table.rows[self.row].max_batch_rows
        where = f"<= {bound}" if bound is not None else "> every bound (last row)"
        return (f"table {t.target}/{table_stem(t.kv_format, t.h_q)} ({t.provenance.get('kind', '?')}) row {self.row}: "
                f"batch_rows {where}")


def force_spec(variant: Variant, num_splits: int, programmatic_combine: bool = False) -> str:
    """The SPARSE_MLA_AOT_FORCE value that pins `variant` at `num_splits` (and the combine kernel's launch)."""
    return (",".join(f"{f}={getattr(variant, f)}" for f in FORCED_VARIANT_FIELDS) + f",num_splits={num_splits}"
            + (",programmatic_combine=1" if programmatic_combine else ""))


@contextmanager
def forcing(spec: str | None):
    """Calls in this context (this thread or task) use `spec` (a SPARSE_MLA_AOT_FORCE value) or, for None, the
    dispatch table, whatever the environment says: how tune and ab pin variants without editing os.environ."""
    token = _forced.set(spec)
    try:
        yield
    finally:
        _forced.reset(token)


# os.environ's backing dict (bytes on POSIX): the per-call path reads the environment, and a lookup here costs
# ~50 ns where os.environ.get costs ~1 us. Assignments through os.environ update it; the runtime is Linux-only.
ENVIRON = os.environ._data
_FORCE_KEY = os.fsencode(paths.FORCE_ENV)


def forcing_in_effect() -> object:
    """A cheap hashable token of what forces dispatch now: forcing()'s spec, else SPARSE_MLA_AOT_FORCE's raw bytes
    (None for the table either way). Calls with equal tokens choose alike: the per-call plan cache keys on it."""
    spec = _forced.get()
    return ENVIRON.get(_FORCE_KEY) if spec is _FROM_ENVIRONMENT else spec


def forced_spec() -> str | None:
    """The spec in force: forcing()'s, else SPARSE_MLA_AOT_FORCE's; None or empty: the table."""
    token = forcing_in_effect()
    return os.fsdecode(token) if isinstance(token, bytes) else token


def parse_force(spec: str) -> dict[str, int | str]:
    """'block_h=16,block_t=16,num_warps=8,num_stages=2,num_splits=16' -> dict; every FORCE_FIELDS field required,
    family (one of FAMILIES, default fused) and programmatic_combine (0 or 1) optional."""
    fields: dict[str, int | str] = {"family": DEFAULT_FORCED_FAMILY, "programmatic_combine": 0}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in FORCE_FIELDS + OPTIONAL_FORCE_FIELDS:
            raise ValueError(f"{paths.FORCE_ENV}: {part!r} is not field=value with a field among "
                             f"{FORCE_FIELDS + OPTIONAL_FORCE_FIELDS}")
        if key == "family":
            if value not in FAMILIES:
                raise ValueError(f"{paths.FORCE_ENV}: family must be one of {FAMILIES}; got {value!r}")
            fields[key] = value
            continue
        try:
            fields[key] = int(value)
        except ValueError:
            raise ValueError(f"{paths.FORCE_ENV}: {key} must be an integer; got {value!r}") from None
    missing = [f for f in FORCE_FIELDS if f not in fields]
    if missing:
        raise ValueError(f"{paths.FORCE_ENV}={spec!r} lacks {missing}; example: "
                         f"block_h=16,block_t=16,num_warps=4,num_stages=2,num_splits=8")
    if fields["num_splits"] < 1:
        raise ValueError(f"{paths.FORCE_ENV}: num_splits must be >= 1; got {fields['num_splits']}")
    if fields["programmatic_combine"] not in (0, 1):
        raise ValueError(f"{paths.FORCE_ENV}: programmatic_combine must be 0 or 1; "
                         f"got {fields['programmatic_combine']}")
    return fields


def _neighbours(catalog: Catalog, target: str, kv_format: str, fields: dict[str, int]) -> list[str]:
    """Shipped variants that differ from the requested one in exactly one field."""
    result = []
    for name, record in catalog.shipped(target).items():
        v = record.variant
        if v and v.kv_format == kv_format and sum(getattr(v, f) != fields[f] for f in FORCED_VARIANT_FIELDS) == 1:
            result.append(name)
    return sorted(result)


def forced_choice(catalog: Catalog, target: str, kv_format: str, spec: str) -> Choice:
    fields = parse_force(spec)
    name = Variant(kv_format, *(fields[f] for f in FORCED_VARIANT_FIELDS)).name
    record = catalog.records(target).get(name)
    if record is None or record.status != "shipped":
        why = (f"was pruned for {target}: {record.reason}" if record is not None
               else f"is not in the wheel's grid for {target}")
        near = _neighbours(catalog, target, kv_format, fields)
        raise ValueError(f"{paths.FORCE_ENV}: variant {name} {why}; shipped neighbours: "
                         f"{', '.join(near) or 'none'}")
    return Choice(name, fields["num_splits"], None, 0, spec, bool(fields["programmatic_combine"]))


def choose(catalog: Catalog, target: str, kv_format: str, h_q: int, batch_rows: int) -> Choice:
    spec = forced_spec()
    if spec:
        return forced_choice(catalog, target, kv_format, spec)
    table = catalog.table(target, kv_format, h_q)
    i = table.row_for(batch_rows)
    row = table.rows[i]
    return Choice(row.variant, row.num_splits, table, i, programmatic_combine=row.programmatic_combine)


def explain(batch_rows: int, h_q: int, kv_format: str, *, target: str, catalog: Catalog | None = None) -> str:
    """Which variant and split count a call of this shape uses on `target`, and why, with the variant's figures."""
    catalog = catalog or Catalog()
    choice = choose(catalog, target, kv_format, h_q, batch_rows)
    resources = catalog.records(target)[choice.variant].resources  # every shipped record has them
    return (f"{choice.variant}, num_splits={choice.num_splits} (clamped at run time to the tile count; rows that fill "
            f"whole waves of the GPU run unsplit): "
            f"batch_rows {batch_rows}: {choice.why}; {resources.total_shared_bytes:,} B shared, "
            f"{resources.registers} registers")
