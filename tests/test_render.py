import dataclasses
import ast

import jinja2
import pytest

from build_tools import kernels, render
from build_tools.variant import Variant, get_target, is_buildable, load_grid, variant_from_name

BASE = Variant("v32", 16, 16, 4, 2)


def test_every_grid_variant_renders_to_valid_python_with_its_parameters():
    variants = load_grid()
    assert len(variants) == 2 * 3 * 3 * 3 * 4
    for variant in variants:
        rendered = render.render_split(variant)
        tree = ast.parse(rendered.source)
        names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
        assert rendered.kernel_name in names
        assert f"variant {variant.name}:" in rendered.source.splitlines()[1]
        assert f"tl.arange(0, {variant.block_h})" in rendered.source
        assert "autotune" not in rendered.source


def test_name_encodes_every_field():
    for field in dataclasses.fields(Variant):
        value = getattr(BASE, field.name)
        changed = dataclasses.replace(BASE, **{field.name: "model1" if field.name == "kv_format" else value * 2})
        assert changed.name != BASE.name, field.name


def test_a_name_parses_back_into_its_variant():
    for variant in load_grid():
        assert variant_from_name(variant.name) == variant
    with pytest.raises(ValueError, match="not a variant name"):
        variant_from_name("v32_bh16_bt64_w8")


def test_generated_source_carries_provenance():
    source = render.render_split(BASE).source
    assert "templates/sparse_mla_split.py.j2" in source.splitlines()[0]
    assert render.template_hash(render.SPLIT_TEMPLATE) in source


def test_a_source_names_the_hash_of_its_own_templates_only():
    assert render.template_files(render.SPLIT_TEMPLATE) == ["kv_chunks.j2", render.SPLIT_TEMPLATE]
    assert render.template_files(render.COMBINE_TEMPLATE) == [render.COMBINE_TEMPLATE]
    assert render.template_hash(render.COMBINE_TEMPLATE) in render.render_combine().source
    assert render.template_hash(render.SPLIT_TEMPLATE) not in render.render_combine().source


def test_dot_dtype_is_a_render_parameter():
    assert "tl.float32" in render.render_split(BASE, dot_dtype="float32").source
    assert ".to(tl.bfloat16)" in render.render_split(BASE).source
    with pytest.raises(ValueError, match="dot_dtype"):
        render.render_split(BASE, dot_dtype="float16x")


def test_layouts_share_one_template_and_differ_only_in_the_tile_block():
    v32 = render.render_split(BASE).source
    model1 = render.render_split(dataclasses.replace(BASE, kv_format="model1")).source
    assert "* 656" in v32 and "* 656" not in model1
    assert "* 576" in model1 and "<< 23" in model1


def test_kernel_signature_comes_from_the_param_list():
    source = render.render_split(BASE).source
    assert f"({', '.join(p.name for p in kernels.SPLIT_PARAMS)}):" in source
    assert f"({', '.join(p.name for p in kernels.COMBINE_PARAMS)}):" in render.render_combine().source


def test_missing_template_variable_fails_loudly(tmp_path, monkeypatch):
    (tmp_path / "bad.j2").write_text("{{ not_given }}")
    monkeypatch.setenv(render.paths.TEMPLATES_DIR_ENV, str(tmp_path))
    with pytest.raises(jinja2.UndefinedError):
        render._environment().get_template("bad.j2").render()


def test_is_buildable_is_the_only_pre_compile_rule():
    sm120 = get_target("sm120")
    assert all(is_buildable(v, sm120)[0] for v in load_grid())
    ok, reason = is_buildable(dataclasses.replace(BASE, block_t=128), sm120)
    assert not ok and "block_t=128" in reason
    ok, reason = is_buildable(dataclasses.replace(BASE, block_h=8), sm120)
    assert not ok and "block_h=8" in reason
