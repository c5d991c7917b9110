import ast
import dataclasses
import math
import tomllib

import jinja2
import pytest

from build_tools import paths, render
from build_tools.compile import compile_options
from build_tools.variant import (MAX_ACCUMULATOR_REGISTERS, accumulator_registers, get_target, is_buildable, load_grid,
                                 load_targets, programs_per_sm)
from sparse_mla_aot import plan
from sparse_mla_aot.contract import (COMBINE_PARAMS, D_V, FAMILIES, LAYOUTS, SPLIT_PARAMS, TILES_IN_FLIGHT,
                                     VARIANT_FIELDS, WS_PRODUCER_WARPS, Variant)

BASE = Variant("v32", "fused", 16, 16, 4, 2)


def test_every_grid_variant_renders_to_valid_python_with_its_parameters():
    variants = load_grid()
    grid = tomllib.loads(paths.GRID_FILE.read_text())
    expected = sum(math.prod(len({**grid["axes"], **axes}[f]) for f in VARIANT_FIELDS if f != "family")
                   for axes in grid["family"].values())
    assert len(variants) == len(set(variants)) == expected
    assert {v.family for v in variants} == set(FAMILIES)
    for variant in variants:
        rendered = render.render_split(variant)
        tree = ast.parse(rendered.source)
        names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
        assert rendered.kernel_name in names
        assert f"variant {variant.name}:" in rendered.source.splitlines()[1]
        assert "autotune" not in rendered.source
        if variant.family == "fused":
            assert f"tl.arange(0, {variant.block_h})" in rendered.source
        else:  # producer warps beside the consumer groups, a ring of num_stages slots of block_t tokens
            workers = [variant.num_warps] * (variant.consumer_groups - 1) + [WS_PRODUCER_WARPS]
            assert f"], {workers})" in rendered.source  # setmaxnreg only where the target has it
            assert f"[{variant.num_stages}, {variant.block_t}, 512]" in rendered.source
            assert f"warps_per_cta=[{variant.num_warps}, 1" in rendered.source


def test_a_ws_variant_moves_registers_to_its_consumers_only_where_the_target_can():
    variant = Variant("model1", "ws", 16, 64, 8, 2)
    with_registers = f"], [{WS_PRODUCER_WARPS}], [{render.WS_PRODUCER_REGISTERS[1]}])"
    assert with_registers in render.render_split(variant, register_reallocation=True).source
    assert f"], [{WS_PRODUCER_WARPS}])" in render.render_split(variant).source


def test_a_4_warp_ws_variant_shares_its_multiprocessor_where_the_target_says_so():
    """Two 8-warp ws programs per SM on sm90: 128 registers per thread at launch (the register file over two such
    programs), 24 of them the producer's, 232 the consumer warpgroup's (docs/design.md#two-ws-programs-per-
    multiprocessor). Other families, the 8-warp ws variants and the other targets keep one program's worth."""
    sm90, sm120 = get_target("sm90"), get_target("sm120")
    ws = Variant("v32", "ws", 16, 32, 4, 4)
    assert programs_per_sm(ws, sm90) == 2
    assert programs_per_sm(ws, sm120) == programs_per_sm(ws, get_target("sm121")) == 1
    assert programs_per_sm(Variant("v32", "ws", 16, 64, 8, 2), sm90) == 1
    assert programs_per_sm(Variant("v32", "pingpong", 16, 32, 4, 4), sm90) == 1
    producer = render.WS_SHARED_SM_PRODUCER_REGISTERS
    shared = render.render_split(ws, register_reallocation=True, programs_per_sm=2).source
    assert f"], [{WS_PRODUCER_WARPS}], [{producer}])" in shared and "programs_per_sm=2" in shared
    assert "programs_per_sm" not in render.render_split(ws, register_reallocation=True).source
    launch = compile_options(sm90, ws.num_warps, ws.launch_warps, 2)["maxnreg"]
    assert "maxnreg" not in compile_options(sm90, ws.num_warps, ws.launch_warps)
    assert launch == 128 and 2 * 32 * ws.launch_warps * launch <= 64 * 1024
    assert 2 * launch - producer == 232 and producer % 8 == 0 and producer >= 24  # a warpgroup each; setmaxnreg's rules


def test_a_wg_variant_leaves_its_softmax_warpgroup_the_most_registers():
    """The PV warpgroup and the producer are worker partitions with set counts; the softmax warpgroup (the default
    partition) gets what they leave of 3 x 168 (the register file over 384 threads), and holds S and P besides its
    half of the accumulator."""
    variant = Variant("v32", "wg", 64, 64, 4, 2)
    pv, producer = render.WG_CONSUMER_REGISTERS, render.WG_PRODUCER_REGISTERS
    assert f"], [4, {WS_PRODUCER_WARPS}], [{pv}, {producer}])" in render.render_split(
        variant, register_reallocation=True).source
    assert f"], [4, {WS_PRODUCER_WARPS}])" in render.render_split(variant).source
    softmax = 3 * (64 * 1024 // (32 * variant.launch_warps) // 8 * 8) - pv - producer
    assert pv % 8 == 0 and producer % 8 == 0 and softmax >= pv >= 32 * 4  # the accumulator half: 128
    assert variant.launch_warps == 12


def _barrier_counts(tree: ast.AST) -> dict[str, int]:
    """Each mbarrier's arrival count, from the rendered source's mbarrier.init calls: {barrier name: count}."""
    return {ast.unparse(c.args[0].func.value): ast.literal_eval(c.keywords[0].value) for c in ast.walk(tree)
            if isinstance(c, ast.Call) and ast.unparse(c.func) == "mbarrier.init"}


def _arrived_barriers(tree: ast.AST) -> set[str]:
    """The barriers that `tree` arrives on with _arrive (every thread)."""
    return {ast.unparse(c.args[0].func.value) for c in ast.walk(tree)
            if isinstance(c, ast.Call) and ast.unparse(c.func) == "_arrive"}


@pytest.mark.parametrize("block_h", [16, 32, 64])
@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_every_wg_barrier_counts_the_threads_that_arrive_on_it(kv_format, block_h):
    """Every thread of a partition arrives on the barriers it hands over with (_arrive), so each mbarrier's count
    must be the threads of the partitions that arrive on it: one fewer and a phase completes before a warp is
    done, one more and the waiter hangs. Read from the rendered source: which partition function arrives on which
    barrier, each partition's warps from the warp_specialize call, the counts from mbarrier.init."""
    variant = Variant(kv_format, "wg", block_h, 64, 4, 2)
    rendered = render.render_split(variant, register_reallocation=True)
    functions = {f.name: f for f in ast.parse(rendered.source).body if isinstance(f, ast.FunctionDef)}
    kernel = functions[rendered.kernel_name]
    (specialize,) = [c for c in ast.walk(kernel) if isinstance(c, ast.Call) and ast.unparse(c.func).endswith(
        "warp_specialize")]
    partitions = [entry.elts[0].id for entry in specialize.args[0].elts]
    warps = [variant.num_warps] + [ast.literal_eval(w) for w in specialize.args[1].elts]
    arrivals: dict[str, int] = {}
    for name, partition_warps in zip(partitions, warps):
        for barrier in _arrived_barriers(functions[name]):
            arrivals[barrier] = arrivals.get(barrier, 0) + 32 * partition_warps
    assert _barrier_counts(kernel) == arrivals == {"full": 128, "empty": 256, "p_full": 128, "p_empty": 128}


@pytest.mark.parametrize("block_h", [16, 32])
def test_a_narrow_wg_variant_puts_the_tokens_on_wgmmas_rows_and_the_heads_on_its_n(block_h):
    """At block_h 16 and 32 the accumulators are S^T [tokens, heads] and O^T [V's columns, heads]: wgmma's N is the
    head block, so none of its 64 rows is padding; the QK^T wgmma reads the slot's K as A and q^T as B, and PV reads
    V^T (the slot, transposed) and P^T."""
    source = render.render_split(Variant("v32", "wg", block_h, 64, 4, 2), register_reallocation=True).source
    (s_acc,) = [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assign)
                and ast.unparse(n.targets[0]) == "S_ACC"]
    assert "instr_shape=[16, %d, 16]" % block_h in ast.unparse(s_acc)
    assert "warpgroup_mma(k, q_tile.permute([1, 0]), gl.zeros([64, %d]" % block_h in source
    assert "v.permute([1, 0]), p_tile.permute([1, 0])" in source
    wide = render.render_split(Variant("v32", "wg", 64, 64, 4, 2), register_reallocation=True).source
    assert "instr_shape=[16, 64, 16]" in wide and "warpgroup_mma(q_tile, k.permute([1, 0])" in wide


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_the_wg_prefetch_covers_every_line_of_a_record_at_any_16_byte_alignment(kv_format):
    """The wg producer pulls each record into L2 with one prefetch per 128-byte line at fixed offsets from the
    record's address, which is 16-byte aligned anywhere in a line: at every such alignment the prefetched lines
    must be exactly the lines the record's bytes lie in (one missed and that load waits on DRAM)."""
    source = render.render_split(Variant(kv_format, "wg", 64, 64, 4, 2), register_reallocation=True).source
    (offsets,) = [ast.literal_eval(c.iter) for c in ast.walk(ast.parse(source))
                  if isinstance(c, ast.comprehension) and ast.unparse(c.target) == "offset"]
    record_bytes = LAYOUTS[kv_format].record_bytes
    for start in range(0, 128, 16):
        assert {(start + o) // 128 for o in offsets} == {(start + b) // 128 for b in range(record_bytes)}, start


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_the_wg_prefetch_skips_tokens_whose_index_is_minus_one(kv_format):
    """An invalid token's record address is token 0's: prefetched, every program's -1 indices queue on the same L2
    lines (1.3x the time of v32 h32 at 128 rows with half the indices -1, bench/RESULTS.md). Every prefetch the
    asm generator writes must be predicated on its own token's index >= 0."""
    source = render.render_split(Variant(kv_format, "wg", 64, 64, 4, 2), register_reallocation=True).source
    (generator,) = [f for f in ast.parse(source).body if isinstance(f, ast.FunctionDef) and f.name == "_prefetch_records"]
    generator.decorator_list = []
    namespace: dict = {}
    exec(compile(ast.Module([generator], []), "<wg>", "exec"), namespace)
    groups = (("$0", "$1"), ("$2", "$3"), ("$4", "$5")) if LAYOUTS[kv_format].scale_record_bytes else (
        ("$0", "$1"), ("$2", "$3"))
    lines = [line.strip() for line in namespace["_prefetch_records"]((), groups).splitlines()]
    predicates = {index: f"valid{k}" for k, index in enumerate(groups[0])}
    assert {f"setp.ge.s32 {p}, {index}, 0;" for index, p in predicates.items()} <= set(lines)
    prefetches = [line for line in lines if "prefetch" in line]
    addresses = [a for group in groups[1:] for a in group]
    assert len(prefetches) >= len(addresses)
    for line in prefetches:
        predicate, _, address = line.partition(" prefetch.global.L2 [")
        token = [k for group in groups[1:] for k, a in enumerate(group) if address.startswith(a + "]") or
                 address.startswith(a + "+")]
        assert token and predicate == f"@valid{token[0]}", line


@pytest.mark.parametrize("family, num_warps", [("ws", 4), ("ws", 8), ("pingpong", 4)])
def test_every_ws_consumer_thread_arrives_on_the_barriers_it_releases(family, num_warps):
    """A ws or pingpong slot is read by one consumer group (pingpong's groups take alternate tiles), and every thread
    of it arrives on the slot's empty barrier after its own reads (_arrive), as pingpong's second group does on the
    merge barrier after its stores; so each count is one group's threads: one fewer and the producer refills a slot
    a warp still reads, one more and it waits forever. No consumer arrives with Gluon's one-thread mbarrier.arrive."""
    variant = Variant("model1", family, 16, 32, num_warps, 2)
    tree = ast.parse(render.render_split(variant, register_reallocation=True).source)
    counts, arrived = _barrier_counts(tree), _arrived_barriers(tree)
    group = 32 * num_warps
    assert arrived == ({"empty", "merged"} if family == "pingpong" else {"empty"})
    assert {barrier: counts[barrier] for barrier in arrived} == {barrier: group for barrier in arrived}
    assert not [c for c in ast.walk(tree) if isinstance(c, ast.Call) and ast.unparse(c.func) == "mbarrier.arrive"]


def test_a_pingpong_variant_gives_its_second_group_and_producer_registers_that_fit_the_register_file():
    """The second consumer group and the producer are worker partitions with set counts; the first group (the
    default partition) gets the same as the second. setmaxnreg waits until its registers are free, so counts over the
    register file would hang every program."""
    variant = Variant("model1", "pingpong", 16, 32, 4, 2)
    consumers, producer = render.WS_CONSUMER_REGISTERS, render.WS_PRODUCER_REGISTERS[2]
    source = render.render_split(variant, register_reallocation=True).source
    assert f"], [4, {WS_PRODUCER_WARPS}], [{consumers}, {producer}])" in source
    assert "def _second_consumer(" in source and "range(FIRST_TILE, n_tiles, 2)" in source
    assert 2 * 32 * variant.num_warps * consumers + 32 * WS_PRODUCER_WARPS * producer <= 64 * 1024
    assert consumers % 8 == 0 and producer % 8 == 0 and producer >= 24  # setmaxnreg's granule and minimum
    assert variant.launch_warps == 12
    single = render.render_split(Variant("model1", "ws", 16, 32, 4, 2), register_reallocation=True).source
    assert "_second_consumer" not in single and "range(FIRST_TILE, n_tiles, 1)" in single


def test_name_encodes_every_field():
    for field in dataclasses.fields(Variant):
        value = getattr(BASE, field.name)
        other = {"kv_format": "model1", "family": "ws"}.get(field.name, value * 2 if isinstance(value, int) else None)
        changed = dataclasses.replace(BASE, **{field.name: other})
        assert changed.name != BASE.name, field.name


def test_every_grid_name_parses_back_to_its_variant():
    for variant in load_grid():
        assert Variant.parse(variant.name) == variant
    for bad in ("v32_fused_bh16_bt16_w4", "v33_bh16_bt16_w4_s2", "v32_fused_bh16_bt16_w4_s2_x", "combine"):
        with pytest.raises(ValueError, match=rf"^'{bad}' is not a variant name like v32_fused_bh16_bt32_w4_s2"):
            Variant.parse(bad)


def test_the_combine_kernel_reduces_the_runtime_s_max_splits_over_d_v():
    """The combine kernel holds one lane per split partial: rendered with a smaller count than the runtime's launch
    plan may ask for, it would drop splits without an error."""
    source = render.render_combine().source
    assert f"splits = tl.arange(0, {plan.MAX_SPLITS})" in source
    assert f"cols = tl.arange(0, {D_V})" in source


def test_the_combine_template_takes_its_widths_from_the_contract(monkeypatch):
    monkeypatch.setattr(render, "MAX_SPLITS", 32)
    monkeypatch.setattr(render, "D_V", 256)
    source = render.render_combine().source
    assert "splits = tl.arange(0, 32)" in source and "tl.zeros([256]" in source
    assert "512" not in source and "tl.arange(0, 64)" not in source  # no width left as a literal in the template


def test_generated_source_carries_provenance():
    source = render.render_split(BASE).source
    assert "templates/sparse_mla_split.py.j2" in source.splitlines()[0]
    assert render.template_hash(render.SPLIT_TEMPLATE) in source


def test_a_source_names_the_hash_of_its_own_templates_only():
    assert render.template_files(render.SPLIT_TEMPLATE) == ["finalize.j2", "kv_chunks.j2", "program.j2",
                                                            render.SPLIT_TEMPLATE]
    assert render.template_files(render.WS_SPLIT_TEMPLATE) == ["finalize.j2", "program.j2", render.WS_SPLIT_TEMPLATE]
    assert render.template_files(render.COMBINE_TEMPLATE) == ["finalize.j2", render.COMBINE_TEMPLATE]
    assert render.template_hash(render.COMBINE_TEMPLATE) in render.render_combine().source
    assert render.template_hash(render.SPLIT_TEMPLATE) not in render.render_combine().source


def test_dot_dtype_is_a_render_parameter():
    assert "tl.float32" in render.render_split(BASE, dot_dtype="float32").source
    assert ".to(tl.bfloat16)" in render.render_split(BASE).source
    with pytest.raises(ValueError, match="dot_dtype"):
        render.render_split(BASE, dot_dtype="float16x")


def test_grid_dependency_control_is_rendered_only_where_asked():
    """The split kernel lets the combine kernel launch from its first statement (when there is one); the combine
    kernel waits for the split grid before its first load. Neither is there by default (the interpreter and the
    sm89 proxy have no griddepcontrol)."""
    split, combine = render.render_split(BASE, grid_dependency=True).source, render.render_combine(True).source
    assert split.index("tl.extra.cuda.gdc_launch_dependents()") < split.index("program = tl.program_id(0)")
    assert split.index("if num_splits > 1:") < split.index("tl.extra.cuda.gdc_launch_dependents()")
    assert combine.index("tl.extra.cuda.gdc_wait()") < combine.index("tl.load(")
    assert "gdc_" not in render.render_split(BASE).source + render.render_combine().source
    assert "gdc_" not in render.render_split(BASE, dot_dtype="float32").source


def test_only_targets_from_sm90_compile_grid_dependency_control():
    targets = load_targets()
    assert {name: t.grid_dependency for name, t in targets.items()} == {
        "sm120": True, "sm121": True, "sm90": True, "sm89-proxy": False}


def test_layouts_share_one_template_and_differ_only_in_the_tile_block():
    v32 = render.render_split(BASE).source
    model1 = render.render_split(dataclasses.replace(BASE, kv_format="model1")).source
    assert "* 656" in v32 and "* 656" not in model1
    assert "* 576" in model1 and "<< 23" in model1


def test_kernel_signature_comes_from_the_param_list():
    source = render.render_split(BASE).source
    assert f"({', '.join(p.name for p in SPLIT_PARAMS)}):" in source
    assert f"({', '.join(p.name for p in COMBINE_PARAMS)}):" in render.render_combine().source


def test_missing_template_variable_fails_loudly(tmp_path, monkeypatch):
    (tmp_path / "bad.j2").write_text("{{ not_given }}")
    monkeypatch.setenv(render.paths.TEMPLATES_DIR_ENV, str(tmp_path))
    with pytest.raises(jinja2.UndefinedError):
        render._environment().get_template("bad.j2").render()


def test_is_buildable_is_the_only_pre_compile_rule():
    sm120 = get_target("sm120")
    for variant in (v for v in load_grid() if v.family == "fused"):
        ok, reason = is_buildable(variant, sm120)
        fits = variant.block_h * D_V // (32 * variant.num_warps) <= MAX_ACCUMULATOR_REGISTERS
        assert ok == fits, variant.name
        if not ok:
            assert f"needs {accumulator_registers(variant)} registers per thread at {variant.num_warps} warps" in reason
    assert is_buildable(Variant("v32", "fused", 64, 32, 8, 2), sm120)[0]
    assert not is_buildable(Variant("v32", "fused", 64, 32, 4, 2), sm120)[0]  # 256 accumulator registers per thread
    ok, reason = is_buildable(dataclasses.replace(BASE, num_stages=4), sm120)
    assert not ok and f"num_stages=4 (tiles in flight) must be one of {TILES_IN_FLIGHT}" in reason
    ok, reason = is_buildable(dataclasses.replace(BASE, block_t=128), sm120)
    assert not ok and "block_t=128" in reason
    ok, reason = is_buildable(dataclasses.replace(BASE, block_h=8), sm120)
    assert not ok and "block_h=8" in reason


def test_the_ws_family_rules_name_their_reason():
    sm90 = get_target("sm90")
    ws = Variant("model1", "ws", 16, 64, 8, 2)
    assert is_buildable(ws, sm90) == (True, None)
    # fewer rope token groups than warps: warps share a group (ws_layouts.placement)
    assert is_buildable(dataclasses.replace(ws, block_t=32), sm90) == (True, None)
    assert is_buildable(dataclasses.replace(ws, block_t=16), sm90) == (True, None)
    cases = {
        dataclasses.replace(ws, num_stages=3): "num_stages=3 (ring slots) must be one of (2, 4)",
        dataclasses.replace(ws, num_warps=2): "num_warps=2 (consumer warps) must be one of (4, 8)",
        dataclasses.replace(ws, block_h=32, num_warps=4): "needs 128 registers per consumer thread at 4 warps > 64",
    }
    for variant, reason in cases.items():
        ok, why = is_buildable(variant, sm90)
        assert not ok and reason in why, (variant.name, why)
    assert [v.name for v in load_grid() if v.family == "ws" and is_buildable(v, sm90)[0]] == [
        f"{kv}_ws_bh{bh}_bt{bt}_w{w}_s{s}" for kv in ("v32", "model1")
        for bh, bt, w in ((16, 32, 4), (16, 32, 8), (16, 64, 4), (16, 64, 8), (32, 32, 8), (32, 64, 8))
        for s in (2, 4)]


def test_the_wg_family_is_sm90s_one_shape_and_names_its_reason_elsewhere():
    wg = Variant("v32", "wg", 64, 64, 4, 2)
    assert is_buildable(wg, get_target("sm90")) == (True, None)
    for target in ("sm120", "sm89-proxy"):
        ok, why = is_buildable(wg, get_target(target))
        assert not ok and f"the wg family needs warpgroup MMAs (sm_90); {target} has none" == why
    ok, why = is_buildable(dataclasses.replace(wg, block_t=32, num_stages=4), get_target("sm90"))
    assert not ok and "got {'block_t': 32, 'num_stages': 4}" in why
    assert is_buildable(dataclasses.replace(wg, block_h=16), get_target("sm90")) == (True, None)
    assert is_buildable(dataclasses.replace(wg, block_h=32), get_target("sm90")) == (True, None)
    ok, why = is_buildable(dataclasses.replace(wg, block_h=128), get_target("sm90"))
    assert not ok and why == "block_h=128 must be one of (16, 32, 64) in the wg family"
    assert [v.name for v in load_grid() if v.family == "wg"] == [
        f"{kv}_wg_bh{bh}_bt64_w4_s2" for kv in ("v32", "model1") for bh in (16, 32, 64)]


@pytest.mark.parametrize("tiles_in_flight", [2, 3])
def test_tiles_in_flight_hand_the_tile_loop_to_tritons_pipeline(tiles_in_flight):
    """num_stages 2 and 3 are the stage count of Triton's software pipeline on the tile loops (gathers one or two
    tiles ahead); 1 gathers inside a plain loop. Every variant loads the next tile's indices inside the loop."""
    pipelined = render.render_split(dataclasses.replace(BASE, num_stages=tiles_in_flight)).source
    in_place = render.render_split(dataclasses.replace(BASE, num_stages=1)).source
    assert pipelined.count(f"num_stages={tiles_in_flight}):") == 2  # the main set's and the extra set's loops
    assert "for tile in range(tile_begin, main_end):" in in_place and "tl.range(" not in in_place
    for source in (pipelined, in_place):
        loop_body = source.split("for tile in ", 1)[1].split("m_new =", 1)[0]
        assert loop_body.index("raw0 = tl.load(") < loop_body.index("next_idx = tl.load(") < loop_body.index("tl.dot(")


@pytest.mark.parametrize("kv_format", ["v32", "model1"])
def test_the_qk_chain_starts_with_the_bf16_chunk_and_sums_every_chunk_once(kv_format):
    """The bf16 (rope) chunk's dot comes first, so Triton stages its operand beside the dequantized ones under one
    CTA barrier (docs/design.md#redundant-cta-barriers-a-ptx-pass)."""
    from sparse_mla_aot.contract import LAYOUTS

    chunks = LAYOUTS[kv_format].chunks
    source = render.render_split(dataclasses.replace(BASE, kv_format=kv_format)).source
    loop_body = source.split("for tile in ", 1)[1].split("m_new =", 1)[0]
    chain = [line.strip() for line in loop_body.splitlines() if line.strip().startswith("s = tl.dot(")]
    bf16 = [i for i, c in enumerate(chunks) if c.scale == "none"]
    order = [*bf16, *(i for i in range(len(chunks)) if i not in bf16)]
    assert chain == [f"s = tl.dot(q{i}, tl.trans(k{i}), s)" for i in order]


def test_qk_is_split_across_warpgroups_only_for_two_warpgroups_on_wgmma_without_the_pipeliner():
    """sm90 (wgmma), block_h 64, 8 warps, tiles in flight 1: each QK dot in a one-trip loop; not elsewhere."""
    def split(variant, wgmma=True):
        source = render.render_split(variant, wgmma=wgmma).source
        loops = source.count("for _ in range(0, one):")
        assert loops in (0, 2 * len(LAYOUTS[variant.kv_format].chunks))  # every QK dot, in both set loops
        return loops > 0

    from sparse_mla_aot.contract import LAYOUTS

    for kv_format in ("v32", "model1"):
        wide = Variant(kv_format, "fused", 64, 64, 8, 1)
        assert split(wide)
        assert not split(wide, wgmma=False)  # sm120 and the proxy: mma.sync
        for pipelined in (2, 3):  # Triton's pipeliner skips a loop holding loops
            assert not split(dataclasses.replace(wide, num_stages=pipelined))
        assert not split(dataclasses.replace(wide, block_h=32)) and not split(Variant(kv_format, "fused", 16, 64, 8, 1))
    assert [t for t in load_targets().values() if t.wgmma] == [get_target("sm90")]
