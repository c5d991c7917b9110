"""Stage 2: AOT-compile one rendered kernel for one target with triton.compile (no GPU needed)."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from build_tools import kernels
from build_tools.render import RenderedKernel
from build_tools.variant import Target


# Explicit, so the result does not depend on TRITON_* environment defaults (3.9 warns its default will change).
COMPILE_OPTIONS = {"enable_fp_fusion": True}
TRITON_NUM_STAGES = 1


@dataclass(frozen=True)
class CompiledKernel:
    binary: bytes  # what ships: the cubin ELF, or PTX text for ptx targets
    cubin: bytes  # always the cubin: resources and SASS are read from it
    kernel_name: str  # the symbol inside the binary
    shared_bytes: int  # dynamic shared memory to launch with (Triton's metadata)
    num_warps: int
    num_stages: int
    triton_version: str


def compile_options(target: Target, num_warps: int) -> dict:
    """Every Triton option a kernel of `target` is compiled with (part of its cache key)."""
    return {"num_warps": num_warps, "num_stages": TRITON_NUM_STAGES, **COMPILE_OPTIONS, **target.compile_options}


def load_jit_function(source_path: Path, kernel_name: str):
    """Import a rendered source file and return its @triton.jit function (the file name is the module key)."""
    module_name = f"sparse_mla_aot_rendered.{source_path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, source_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return getattr(module, kernel_name)


def compile_kernel(rendered: RenderedKernel, source_path: Path, target: Target, num_warps: int,
                   num_stages: int) -> CompiledKernel:
    """Compile with explicit signature and divisibility hints (recorded in the variant JSON). num_stages is the
    variant's tiles in flight, which the rendered source implements; Triton's own pipeliner is left at 1 stage
    (with more it staged the gathers in a one-deep buffer waited at the next loop top, which lost on the H200)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = load_jit_function(source_path, rendered.kernel_name)
    source = ASTSource(fn, kernels.signature(rendered.params), constexprs={},
                       attrs=kernels.divisibility_attrs(rendered.params))
    compiled = triton.compile(source, target=GPUTarget("cuda", target.triton_arch, 32),
                              options=compile_options(target, num_warps))
    cubin = compiled.asm["cubin"]
    binary = compiled.asm["ptx"].encode() if target.binary == "ptx" else cubin
    return CompiledKernel(binary=binary, cubin=cubin, kernel_name=compiled.metadata.name,
                          shared_bytes=compiled.metadata.shared, num_warps=num_warps,
                          num_stages=num_stages, triton_version=triton.__version__)
