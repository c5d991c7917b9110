"""Stage 1: render one concrete Triton source per variant from the Jinja templates."""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2
import jinja2.meta

from build_tools import paths, ws_layouts
from sparse_mla_aot.contract import (COMBINE_NAME, COMBINE_PARAMS, D_V, LAYOUTS, MAX_SPLITS, SPLIT_PARAMS,
                                     WS_PRODUCER_WARPS, Param, Variant)

SPLIT_TEMPLATE = "sparse_mla_split.py.j2"
WS_SPLIT_TEMPLATE = "sparse_mla_split_ws.py.j2"  # the ws family's (docs/design.md#the-ws-family-producer-warps-and-a-ring)
WG_SPLIT_TEMPLATE = "sparse_mla_split_wg.py.j2"  # the wg family's (docs/design.md#the-wg-family-warpgroup-mmas-on-sm90)
COMBINE_TEMPLATE = "sparse_mla_combine.py.j2"
# Registers per thread of the producer warps (setmaxnreg, from sm_90; a multiple of 8) by consumer groups: their
# addresses and masks for a tile's copies fit without spilling at 88; the consumers get the rest of the register
# file. With two consumer groups the producer gets fewer, and the second group WS_CONSUMER_REGISTERS (the first,
# Triton's default partition, what is left).
WS_PRODUCER_REGISTERS = {1: 88, 2: 24}
# A 4-warp ws program that shares its multiprocessor with another (build_tools.variant.programs_per_sm) launches at
# 128 registers per thread: its producer warpgroup gets 24, its consumer warpgroup the other 232.
WS_SHARED_SM_PRODUCER_REGISTERS = 24
WS_CONSUMER_REGISTERS = 240
# The wg family: registers per thread of its second consumer warpgroup and of its producer warpgroup; the first
# consumer (the default partition: QK^T, the softmax and P) gets what they leave of 3 x 168, the register file over
# 384 threads: 192. Below 160 for the second consumer ptxas drops setmaxnreg altogether.
WG_CONSUMER_REGISTERS = 160
WG_PRODUCER_REGISTERS = 152
COMBINE_NUM_WARPS = 4
DOT_DTYPES = {"bfloat16": "tl.bfloat16", "float32": "tl.float32"}


@dataclass(frozen=True)
class RenderedKernel:
    name: str  # artifact name: the variant name, or COMBINE_NAME
    kernel_name: str  # the @triton.jit function's name
    source: str
    params: tuple[Param, ...]


def _environment() -> jinja2.Environment:
    return _environment_for(paths.templates_dir())


@functools.lru_cache(maxsize=None)
def _environment_for(templates_dir: Path) -> jinja2.Environment:
    """One environment per directory: it caches compiled templates (a fresh one per kernel made rendering the grid
    take 4 s instead of 0.1 s) and reloads a template whose file changed."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.globals["raise"] = _raise
    return env


def _raise(message: str):
    raise jinja2.TemplateError(message)


def template_files(name: str) -> list[str]:
    """A template and every template it imports or includes, transitively, sorted."""
    env, found, pending = _environment(), set(), [name]
    while pending:
        current = pending.pop()
        if current not in found:
            found.add(current)
            pending.extend(_referenced_templates(env, env.loader.get_source(env, current)[0]))
    return sorted(found)


@functools.lru_cache(maxsize=None)
def _referenced_templates(env: jinja2.Environment, source: str) -> tuple[str, ...]:
    """Keyed by the template's text: parsed once per content, not once per rendered kernel."""
    return tuple(jinja2.meta.find_referenced_templates(env.parse(source)))


def template_hash(name: str) -> str:
    """Content hash of the templates a kernel is rendered from: its provenance line. Only those, so that editing
    one template changes the sources it renders and no others (each changed source is a recompile)."""
    digest = hashlib.sha256()
    for file in template_files(name):
        digest.update(file.encode() + b"\0" + (paths.templates_dir() / file).read_bytes())
    return digest.hexdigest()[:16]


def _dot_dtype(dot_dtype: str) -> str:
    if dot_dtype not in DOT_DTYPES:
        raise ValueError(f"dot_dtype must be one of {list(DOT_DTYPES)}; got {dot_dtype!r}")
    return DOT_DTYPES[dot_dtype]


@dataclass(frozen=True)
class AutotunedBlocks:
    """Stands in for a Variant when rendering for the JIT peer (bench/peers.py): the block sizes become the
    constexpr parameters BLOCK_H / BLOCK_T and warps / stages are left to @triton.autotune."""

    kv_format: str
    block_h: str = "BLOCK_H"
    block_t: str = "BLOCK_T"
    num_warps: str = "(autotuned)"
    num_stages: int = 1  # tiles in flight of the rendering; autotune picks Triton's own num_stages

    @property
    def name(self) -> str:
        return f"{self.kv_format}_autotuned"


def kernel_name(artifact: str) -> str:
    """The @triton.jit function's name in an artifact's source."""
    return "sparse_mla_combine" if artifact == COMBINE_NAME else f"sparse_mla_split_{artifact}"


def read_rendered(artifact: str, source_path: Path) -> RenderedKernel:
    """An artifact's source as the render step wrote it."""
    params = COMBINE_PARAMS if artifact == COMBINE_NAME else SPLIT_PARAMS
    return RenderedKernel(artifact, kernel_name(artifact), source_path.read_text(), params)


def render_split(variant: Variant | AutotunedBlocks, dot_dtype: str = "bfloat16",
                 grid_dependency: bool = False, wgmma: bool = False,
                 register_reallocation: bool = False, programs_per_sm: int = 1) -> RenderedKernel:
    """The variant's family's template. fused: bfloat16 dot operands for compiled variants, float32 for the
    interpreter (its bf16 tl.dot is broken); an AutotunedBlocks renders the same template with BLOCK_H and BLOCK_T as
    trailing constexpr parameters. grid_dependency: let the combine kernel launch early (griddepcontrol; targets
    from sm_90, never the interpreter, which has no such instruction). wgmma: the target's dots are warpgroup MMAs
    (sm90), so a fused block_h 64, 8-warp variant splits QK across its two warpgroups
    (docs/design.md#qk-split-across-warpgroups). register_reallocation: the target has setmaxnreg (sm_90 and up),
    so a ws or wg kernel moves registers from its producer warps to its consumers. programs_per_sm: a ws kernel's
    programs meant to share a multiprocessor (build_tools.variant.programs_per_sm), which sets its producer's
    registers."""
    if getattr(variant, "family", None) == "wg":
        return _render_wg(variant, grid_dependency, register_reallocation)
    if getattr(variant, "consumer_groups", 0):
        return _render_ws(variant, grid_dependency, register_reallocation, programs_per_sm)
    params = [p.name for p in SPLIT_PARAMS]
    if isinstance(variant, AutotunedBlocks):
        params += [f"{variant.block_h}: tl.constexpr", f"{variant.block_t}: tl.constexpr"]
    source = _environment().get_template(SPLIT_TEMPLATE).render(
        template=SPLIT_TEMPLATE,
        template_hash=template_hash(SPLIT_TEMPLATE),
        variant=variant,
        dot_dtype=_dot_dtype(dot_dtype),
        grid_dependency=grid_dependency,
        wgmma=wgmma,
        kernel_name=kernel_name(variant.name),
        params=params,
        d_qk=LAYOUTS[variant.kv_format].d_qk,
        d_v=D_V,
        layout=LAYOUTS[variant.kv_format],
    )
    return RenderedKernel(variant.name, kernel_name(variant.name), source, SPLIT_PARAMS)


def _render_ws(variant: Variant, grid_dependency: bool, register_reallocation: bool,
               programs_per_sm: int) -> RenderedKernel:
    producer_registers = (WS_SHARED_SM_PRODUCER_REGISTERS if programs_per_sm > 1
                          else WS_PRODUCER_REGISTERS[variant.consumer_groups])
    return _render_gluon(WS_SPLIT_TEMPLATE, variant, grid_dependency, register_reallocation,
                         programs_per_sm=programs_per_sm, producer_registers=producer_registers,
                         consumer_registers=WS_CONSUMER_REGISTERS, ws=ws_layouts.placement(variant),
                         fp8_row=ws_layouts.FP8_ROW)


def _render_wg(variant: Variant, grid_dependency: bool, register_reallocation: bool) -> RenderedKernel:
    return _render_gluon(WG_SPLIT_TEMPLATE, variant, grid_dependency, register_reallocation,
                         producer_registers=WG_PRODUCER_REGISTERS, consumer_registers=WG_CONSUMER_REGISTERS,
                         rope_in_v=LAYOUTS[variant.kv_format].rope.in_v)


def _render_gluon(template: str, variant: Variant, grid_dependency: bool, register_reallocation: bool,
                  **family) -> RenderedKernel:
    """A Gluon family's split kernel: what every such template takes, plus the family's own (`family`)."""
    layout = LAYOUTS[variant.kv_format]
    source = _environment().get_template(template).render(
        template=template,
        template_hash=template_hash(template),
        variant=variant,
        grid_dependency=grid_dependency,
        register_reallocation=register_reallocation,
        producer_warps=WS_PRODUCER_WARPS,
        kernel_name=kernel_name(variant.name),
        params=[p.name for p in SPLIT_PARAMS],
        d_qk=layout.d_qk,
        d_v=D_V,
        layout=layout,
        **family,
    )
    return RenderedKernel(variant.name, kernel_name(variant.name), source, SPLIT_PARAMS)


def render_combine(grid_dependency: bool = False) -> RenderedKernel:
    """grid_dependency: wait for the split grid through griddepcontrol, so that the runtime can launch this kernel
    as a programmatic dependent launch (targets from sm_90)."""
    source = _environment().get_template(COMBINE_TEMPLATE).render(
        template=COMBINE_TEMPLATE,
        grid_dependency=grid_dependency,
        template_hash=template_hash(COMBINE_TEMPLATE),
        kernel_name=kernel_name(COMBINE_NAME),
        params=[p.name for p in COMBINE_PARAMS],
        max_splits=MAX_SPLITS,
        d_v=D_V,
        num_warps=COMBINE_NUM_WARPS,
    )
    return RenderedKernel(COMBINE_NAME, kernel_name(COMBINE_NAME), source, COMBINE_PARAMS)


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temp file in the same directory, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_if_different(path: Path, text: str) -> bool:
    """Keep mtimes (and importers' caches) stable on no-op rebuilds; returns True when written."""
    data = text.encode()
    if path.exists() and path.read_bytes() == data:
        return False
    write_atomic(path, data)
    return True
