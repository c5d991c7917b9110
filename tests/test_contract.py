"""The build-runtime contract (docs/design.md#the-build-runtime-contract): layouts, table names and the typed
artifact record, whose JSON form is strict."""
import json
import re

import pytest

from sparse_mla_aot.contract import (LAYOUTS, RECORD_SCHEMA, SPLIT_ARG_NAMES, SPLIT_PARAMS, ArtifactRecord, Variant,
                                     parse_table_stem, table_stem)
from tests.fakes import fake_record

NAME = Variant("model1", "fused", 16, 32, 4, 2).name


@pytest.mark.parametrize("kv_format", list(LAYOUTS))
def test_each_layout_tiles_its_token_record_without_gaps_or_overlaps(kv_format):
    layout = LAYOUTS[kv_format]
    widths = [c.width for c in layout.chunks]
    assert [c.dim for c in layout.chunks] == [sum(widths[:i]) for i in range(len(widths))]
    assert sum(c.width for c in layout.chunks) == layout.d_qk
    value_bytes = sorted((c.byte, c.byte + c.width * (2 if c.scale == "none" else 1)) for c in layout.chunks)
    fp32_scales = sorted((c.scale_byte, c.scale_byte + 4) for c in layout.chunks if c.scale == "fp32")
    spans = sorted(value_bytes + fp32_scales)
    assert all(end == start for (_, end), (start, _) in zip(spans, spans[1:])) and spans[0][0] == 0
    assert spans[-1][1] == layout.record_bytes
    assert layout.record_bytes + layout.scale_record_bytes == layout.bytes_per_token


def test_table_names_round_trip_and_refuse_other_names():
    assert parse_table_stem(table_stem("model1", 64)) == ("model1", 64)
    for bad in ("model1_64", "v33_h16", "v32_hx"):
        with pytest.raises(ValueError, match=rf"^'{bad}' is not a table name <kv_format>_h<h_q>"):
            parse_table_stem(bad)


def test_the_runtime_packs_arguments_in_the_order_the_kernels_declare():
    assert SPLIT_ARG_NAMES == tuple(p.name for p in SPLIT_PARAMS)


def test_a_record_round_trips_through_json_and_knows_its_variant():
    record = fake_record(NAME)
    again = ArtifactRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.variant == Variant("model1", "fused", 16, 32, 4, 2)
    assert record.to_json()["schema"] == RECORD_SCHEMA
    assert fake_record("combine").variant is None


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw.update(grid="(b * s_q, h_q, 1)"), "unknown keys ['grid'] and lacks keys []"),
    (lambda raw: raw.pop("sha256"), "unknown keys [] and lacks keys ['sha256']"),
    (lambda raw: raw["resources"].update(mma_instructions_twice=[]), "resources has unknown keys"),
    (lambda raw: raw["params"][0].pop("divisible_by"), "param has unknown keys [] and lacks keys ['divisible_by']"),
    (lambda raw: raw.update(schema=RECORD_SCHEMA - 1), f"has schema {RECORD_SCHEMA - 1}; this code reads schema "
                                                      f"{RECORD_SCHEMA}: rebuild"),
    (lambda raw: raw.update(status="maybe"), "status 'maybe' must be one of ('shipped', 'pruned')"),
    (lambda raw: raw.update(reason="too big"), "a pruned record has a reason, a shipped one none"),
])
def test_from_json_refuses_a_record_that_breaks_the_schema_naming_its_source(change, message):
    raw = fake_record(NAME).to_json()
    change(raw)
    with pytest.raises(ValueError, match=rf"^x\.json: .*{re.escape(message)}"):
        ArtifactRecord.from_json(raw, "x.json")
