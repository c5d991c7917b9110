"""Stage 1: render one concrete Triton source per variant from the Jinja templates."""
from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2

from build_tools import kernels, paths
from build_tools.variant import Variant

SPLIT_TEMPLATE = "sparse_mla_split.py.j2"
COMBINE_TEMPLATE = "sparse_mla_combine.py.j2"
DOT_DTYPES = {"bfloat16": "tl.bfloat16", "float32": "tl.float32"}


@dataclass(frozen=True)
class RenderedKernel:
    name: str  # artifact name: the variant name, or "combine"
    kernel_name: str  # the @triton.jit function's name
    source: str
    params: tuple[kernels.Param, ...]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(paths.TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.globals["raise"] = _raise
    return env


def _raise(message: str):
    raise jinja2.TemplateError(message)


def templates_hash() -> str:
    """Content hash of every template file: part of each rendered file's provenance and cache key."""
    digest = hashlib.sha256()
    for path in sorted(paths.TEMPLATES_DIR.glob("*.j2")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
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


def render_split(variant: Variant | AutotunedBlocks, dot_dtype: str = "bfloat16") -> RenderedKernel:
    """bfloat16 dot operands for compiled variants; float32 for the interpreter (its bf16 tl.dot is broken).
    An AutotunedBlocks renders the same template with BLOCK_H and BLOCK_T as trailing constexpr parameters."""
    kernel_name = f"sparse_mla_split_{variant.name}"
    params = [p.name for p in kernels.SPLIT_PARAMS]
    if isinstance(variant, AutotunedBlocks):
        params += [f"{variant.block_h}: tl.constexpr", f"{variant.block_t}: tl.constexpr"]
    source = _environment().get_template(SPLIT_TEMPLATE).render(
        template=SPLIT_TEMPLATE,
        template_hash=templates_hash(),
        variant=variant,
        dot_dtype=_dot_dtype(dot_dtype),
        kernel_name=kernel_name,
        params=params,
        d_qk=kernels.D_QK[variant.kv_format],
        layout=kernels.LAYOUTS[variant.kv_format],
    )
    return RenderedKernel(variant.name, kernel_name, source, kernels.SPLIT_PARAMS)


def render_combine() -> RenderedKernel:
    kernel_name = "sparse_mla_combine"
    source = _environment().get_template(COMBINE_TEMPLATE).render(
        template=COMBINE_TEMPLATE,
        template_hash=templates_hash(),
        kernel_name=kernel_name,
        params=[p.name for p in kernels.COMBINE_PARAMS],
        max_splits=kernels.MAX_SPLITS,
        num_warps=kernels.COMBINE_NUM_WARPS,
    )
    return RenderedKernel(kernels.COMBINE_NAME, kernel_name, source, kernels.COMBINE_PARAMS)


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
