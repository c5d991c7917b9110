"""Kernel logic under the Triton interpreter (float32 dot operands; docs/design.md#verifying-sm120-without-an-sm120)
against the reference."""
import pytest
import torch

from build_tools.interpret import interpret_decode
from sparse_mla_aot.contract import Variant
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode

CASES = {
    "plain": dict(b=2, s_q=1, h_q=16, topk=128),
    "sink_and_inf_sink": dict(b=2, s_q=1, h_q=16, topk=128, with_sink=True, inf_sink=True),
    "topk_length": dict(b=3, s_q=1, h_q=16, topk=192, with_topk_length=True),
    "extra_set": dict(b=2, s_q=1, h_q=16, topk=128, extra_topk=64, extra_page_size=61, with_topk_length=True),
    "all_invalid_row": dict(b=2, s_q=2, h_q=16, topk=64, invalid_row=True, with_sink=True),
    "mtp_s_q_2_page_61": dict(b=2, s_q=2, h_q=16, topk=64, page_size=61),
    "h_q_64": dict(b=1, s_q=1, h_q=64, topk=64),
}
# Fixed per layout, so a failure replays exactly (hash() of a str is salted per process).
SEEDS = {"v32": 101, "model1": 202}


def _inputs(kv_format, case):
    case = dict(case)
    inf_sink, invalid_row = case.pop("inf_sink", False), case.pop("invalid_row", False)
    inputs = make_inputs(kv_format=kv_format, seed=SEEDS[kv_format], **case)
    if inf_sink:
        inputs["attn_sink"][0] = float("inf")
    if invalid_row:
        inputs["indices"][0, 1] = -1
    return inputs


def _check(case, inputs, out, lse):
    figures = check_close(out.float(), lse, *reference_sparse_mla_decode(**inputs))
    assert figures["ok"], figures["failures"]
    if case == "all_invalid_row":
        assert torch.all(out[0, 1] == 0) and torch.all(lse[0, 1] == float("inf"))
    if case == "sink_and_inf_sink":
        assert torch.all(out[:, :, 0] == 0)


@pytest.mark.parametrize("tiles_in_flight", [1, 2])
@pytest.mark.parametrize("kv_format", ["v32", "model1"])
@pytest.mark.parametrize("case", list(CASES))
def test_interpreter_matches_reference(kv_format, case, tiles_in_flight):
    inputs = _inputs(kv_format, CASES[case])
    block_h = 64 if inputs["q"].shape[2] == 64 else 16
    out, lse = interpret_decode(Variant(kv_format, "fused", block_h, 32, 4, tiles_in_flight), 3, **inputs)
    _check(case, inputs, out, lse)


@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("kv_format", ["v32", "model1"])
@pytest.mark.parametrize("case", ["sink_and_inf_sink", "all_invalid_row", "h_q_64"])
def test_one_split_writes_the_result_and_head_blocks_decode_their_program(kv_format, case, num_splits):
    """One split: the split kernel writes out and lse itself (sink, empty rows) with no combine. h_q 64 in blocks of
    16: four head blocks per (row, split) in the one launch axis."""
    inputs = _inputs(kv_format, CASES[case])
    out, lse = interpret_decode(Variant(kv_format, "fused", 16, 32, 4, 1), num_splits, **inputs)
    _check(case, inputs, out, lse)


@pytest.mark.parametrize("tiles_in_flight", [1, 2])
@pytest.mark.parametrize("num_splits", [1, 2, 64])
def test_split_counts_agree_including_empty_splits(num_splits, tiles_in_flight):
    inputs = _inputs("model1", CASES["extra_set"])
    out, lse = interpret_decode(Variant("model1", "fused", 16, 16, 4, tiles_in_flight), num_splits, **inputs)
    figures = check_close(out.float(), lse, *reference_sparse_mla_decode(**inputs))
    assert figures["ok"], figures["failures"]


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_rows_past_the_last_whole_wave_split_and_the_others_write_their_results(kv_format):
    """6 rows x 2 head blocks as on a GPU of 5 programs at once: rows 0-4 run unsplit and write out and lse
    themselves, row 5 (the second query of a sequence whose first is unsplit) runs 3 splits and the combine; with
    per-sequence lengths and a sink."""
    inputs = make_inputs(b=3, s_q=2, h_q=32, topk=128, kv_format=kv_format, seed=SEEDS[kv_format], with_sink=True,
                         with_topk_length=True, **({"extra_topk": 64} if kv_format == "model1" else {}))
    out, lse = interpret_decode(Variant(kv_format, "fused", 16, 32, 4, 1), 3, wave=5, **inputs)
    figures = check_close(out.float(), lse, *reference_sparse_mla_decode(**inputs))
    assert figures["ok"], figures["failures"]


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_jit_peer_rendering_with_block_size_constexprs_matches_reference(kv_format):
    """bench/peers.py autotunes this rendering on a GPU; here its logic runs with one config's block sizes."""
    inputs = _inputs(kv_format, CASES["extra_set"] if kv_format == "model1" else CASES["sink_and_inf_sink"])
    out, lse = interpret_decode(Variant(kv_format, "fused", 16, 32, 4, 2), 3, block_sizes_as_constexprs=True, **inputs)
    figures = check_close(out.float(), lse, *reference_sparse_mla_decode(**inputs))
    assert figures["ok"], figures["failures"]


@pytest.mark.parametrize("tiles_in_flight", [1, 2])
@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_qk_split_across_warpgroups_as_rendered_for_sm90_matches_reference(kv_format, tiles_in_flight):
    """sm90's block_h 64, 8-warp rendering (build_tools.render, wgmma): with tiles in flight 1 each QK dot sits in a
    one-trip loop; with 2 the tile loop is Triton's pipeline and QK is not split."""
    inputs = make_inputs(b=2, s_q=1, h_q=64, topk=128, kv_format=kv_format, seed=SEEDS[kv_format], with_sink=True,
                         with_topk_length=True, **({"extra_topk": 64} if kv_format == "model1" else {}))
    out, lse = interpret_decode(Variant(kv_format, "fused", 64, 32, 8, tiles_in_flight), 3, wgmma=True, **inputs)
    figures = check_close(out.float(), lse, *reference_sparse_mla_decode(**inputs))
    assert figures["ok"], figures["failures"]
