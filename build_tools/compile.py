"""Stage 2: AOT-compile one rendered kernel for one target with triton.compile (no GPU needed). Triton makes the
PTX, with two passes of ours on the way (operand_stores on the TTGIR, ptx_barriers on the PTX); the cubin stage is
ours (`assemble`): the same ptxas and flags as Triton 3.9's, but for the target's arch as targets.toml names it (a
family arch such as sm_120f, which Triton cannot name; docs/design.md#targets) and without debug sections."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from build_tools import operand_stores, ptx_barriers
from build_tools.render import RenderedKernel
from build_tools.variant import Target
from sparse_mla_aot.contract import Param


# Explicit, so the result does not depend on TRITON_* environment defaults (3.9 warns its default will change).
COMPILE_OPTIONS = {"enable_fp_fusion": True}
# A variant's num_stages is its tiles in flight, which the rendered source implements (2 and 3 ask for Triton's
# pipeliner on the tile loop itself, `tl.range(..., num_stages=2 or 3)`); the compile-wide option stays at one
# stage, so no other loop is pipelined (docs/design.md#performance).
TRITON_NUM_STAGES = 1
# Triton 3.9's make_cubin runs ptxas with `-lineinfo -v --regAllocOptLevel=2` (and --fmad=false without fp fusion);
# ours runs the first two, then the target's ptxas_options (Triton's --regAllocOptLevel=2 unless targets.toml says
# otherwise: ptxas_flags). -suppress-debug-info drops the line tables and the two copies of the PTX text that
# -lineinfo embeds (about 2/3 of a cubin, holding the build directory's path) and changes no instruction.
PTXAS_FLAGS = ("-lineinfo", "-suppress-debug-info", "-v")
PTX_TARGET_LINE = re.compile(r"^\.target sm_\w+", flags=re.MULTILINE)
# What ptxas (-v) says it lost, e.g. "(C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized
# due to insufficient register resources for the function '...'" or "(C7515) ... in the function '...' in line 1811":
# the artifact's warnings, never dropped.
PTXAS_PERFORMANCE_NOTE = re.compile(
    r"\((C\d+)\) Potential Performance Loss: (.+?)(?: (?:for|in) the function '[^']*'(?: in line \d+)?)?\.?$",
    flags=re.MULTILINE)


@dataclass(frozen=True)
class CompiledKernel:
    binary: bytes  # what ships: the cubin ELF, or PTX text for ptx targets
    cubin: bytes  # always the cubin: resources and SASS are read from it
    kernel_name: str  # the symbol inside the binary
    shared_bytes: int  # dynamic shared memory to launch with (Triton's metadata)
    num_warps: int
    num_stages: int
    triton_version: str
    ptxas_notes: tuple[str, ...]  # ptxas's performance-loss notes (performance_notes)


def signature(params: tuple[Param, ...]) -> dict[str, str]:
    return {p.name: p.type for p in params}


def divisibility_attrs(params: tuple[Param, ...]) -> dict[tuple[int], list]:
    """Triton's attrs form: {(arg_index,): [["tt.divisibility", 16]]}."""
    return {(i,): [["tt.divisibility", 16]] for i, p in enumerate(params) if p.divisible_by == 16}


def compile_errors() -> tuple[type[Exception], ...]:
    """What Triton raises when a variant does not compile (front end, resources, ptxas): a result the build reports
    as a pruned variant. Anything else is a bug and fails the build."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    return CompilationError, OutOfResources, PTXASError


def target_options(target: Target) -> dict:
    """The Triton options every kernel of `target` shares (in its toolchain, hence every cache key)."""
    return {"num_stages": TRITON_NUM_STAGES, **COMPILE_OPTIONS, **target.compile_options}


REGISTER_FILE = 65536  # 32-bit registers per multiprocessor on every target (sm_89, sm_90, sm_120)


def compile_options(target: Target, num_warps: int, launch_warps: int | None = None,
                    programs_per_sm: int = 1) -> dict:
    """Every Triton option a kernel of `target` is compiled with. launch_warps: a warp-specialized kernel's warps at
    launch (its partitions'; num_warps is the default partition's): a target's maxnreg is capped so that a program
    of that many threads still fits the register file (sm120's 255 would not launch 384 threads), or that many
    programs_per_sm (build_tools.variant.programs_per_sm)."""
    options = {"num_warps": num_warps, **target_options(target)}
    if launch_warps and ("maxnreg" in options or programs_per_sm > 1):
        options["maxnreg"] = min(options.get("maxnreg", 255),
                                 REGISTER_FILE // (programs_per_sm * 32 * launch_warps) // 8 * 8)
    return options


def load_jit_function(source_path: Path, kernel_name: str):
    """Import a rendered source file and return its @triton.jit function (the file name is the module key)."""
    module_name = f"sparse_mla_aot_rendered.{source_path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, source_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return getattr(module, kernel_name)


def ptxas_flags(ptxas_options: tuple[str, ...], enable_fp_fusion: bool) -> tuple[str, ...]:
    """PTXAS_FLAGS and a target's ptxas_options, plus --fmad=false where Triton's make_cubin adds it (a target's
    compile_options may turn fp fusion off)."""
    return (*PTXAS_FLAGS, *ptxas_options, *(() if enable_fp_fusion else ("--fmad=false",)))


def performance_notes(ptxas_output: str) -> tuple[str, ...]:
    """ptxas's "Potential Performance Loss" notes, once each and without the function's name, e.g. "ptxas C7512:
    wgmma.mma_async instructions are serialized due to insufficient register resources"."""
    return tuple(dict.fromkeys(f"ptxas {code}: {text}" for code, text in PTXAS_PERFORMANCE_NOTE.findall(ptxas_output)))


def assemble(ptx: str, cubin_arch: str, ptxas: str, flags: tuple[str, ...]) -> tuple[bytes, tuple[str, ...]]:
    """PTX -> cubin for cubin_arch, and ptxas's performance notes. Triton writes `.target sm_<N>a`; a family arch
    needs its own `.target` line (ptxas refuses sm_120a PTX for sm_120f)."""
    from triton.runtime.errors import PTXASError

    with tempfile.TemporaryDirectory() as tmp:
        source, cubin = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        source.write_text(PTX_TARGET_LINE.sub(f".target {cubin_arch}", ptx, count=1))
        command = [ptxas, *flags, f"--gpu-name={cubin_arch}", str(source), "-o", str(cubin)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise PTXASError(f"ptxas exited with {result.returncode} for {cubin_arch}:\n{result.stderr}")
        return cubin.read_bytes(), performance_notes(result.stdout + result.stderr)


def ir_passes() -> list[str]:
    """The ids of our passes over Triton's IR, in the toolchain and in the hook's cache key."""
    return [operand_stores.PASS_ID, ptx_barriers.PASS_ID]


def _with_operand_stores_hoisted(module):
    """The TTGIR module after operand_stores, parsed back in its own context (Triton's Python IR bindings cannot
    move an operation)."""
    from triton._C.libtriton import ir

    text, moved = operand_stores.hoist_operand_stores(module.str())
    if not moved:
        return module
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ttgir"
        path.write_text(text)
        hoisted = ir.parse_mlir_module(str(path), module.context)
    hoisted.context = module.context  # what Triton's later stages build their pass managers in
    return hoisted


@dataclass(frozen=True)
class AssembleStage:
    """A Triton pipeline hook that passes Triton's TTGIR through operand_stores and its PTX through ptx_barriers (so
    the PTX a ptx target ships and the cubin agree), and replaces the cubin stage with `assemble`, whose
    performance notes go into the kernel's metadata ("ptxas_notes"). Called without arguments, Triton asks for the
    hook's cache key, so nothing cached by Triton's own stages is taken for ours."""

    cubin_arch: str
    ptxas_options: tuple[str, ...]

    def __call__(self, backend=None, stages=None, options=None, language=None, capability=None):
        if backend is None:
            # (--fmad=false needs no place here: enable_fp_fusion is in Triton's own options hash)
            flags = " ".join(ptxas_flags(self.ptxas_options, True))
            key = f"sparse_mla_aot.assemble+notes:{':'.join(ir_passes())}:{self.cubin_arch}:{flags}"
            return key, key
        from triton.backends.nvidia.compiler import get_ptxas

        ptxas = get_ptxas(backend.target.arch).path
        flags = ptxas_flags(self.ptxas_options, options.enable_fp_fusion)
        make_ttgir, make_ptx = stages["ttgir"], stages["ptx"]
        stages["ttgir"] = lambda src, metadata: _with_operand_stores_hoisted(make_ttgir(src, metadata))
        stages["ptx"] = lambda src, metadata: ptx_barriers.drop_redundant_barriers(make_ptx(src, metadata))[0]

        def make_cubin(ptx, metadata):
            cubin, metadata["ptxas_notes"] = assemble(ptx, self.cubin_arch, ptxas, flags)
            return cubin

        stages["cubin"] = make_cubin


def compile_kernel(rendered: RenderedKernel, source_path: Path, target: Target, num_warps: int, num_stages: int,
                   launch_warps: int, programs_per_sm: int = 1) -> CompiledKernel:
    """Compile with explicit signature and divisibility hints (recorded in the variant JSON). A Gluon source (the ws
    family) compiles the same way, as a GluonASTSource; num_warps is its default partition's, launch_warps all of
    its partitions', which the compiled kernel must launch with; programs_per_sm caps its registers so that many fit
    a multiprocessor (the rendered source says so, hence the cache key)."""
    if programs_per_sm > 1 and f"programs_per_sm={programs_per_sm}" not in rendered.source:
        raise ValueError(f"{rendered.name}: compiling for {programs_per_sm} programs per multiprocessor needs a source "
                         "rendered for them (render_split's programs_per_sm)")
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource

    fn = load_jit_function(source_path, rendered.kernel_name)
    source_type = GluonASTSource if fn.is_gluon() else ASTSource
    source = source_type(fn, signature(rendered.params), constexprs={}, attrs=divisibility_attrs(rendered.params))
    specialized = launch_warps if launch_warps != num_warps else None
    with knobs.runtime.scope():
        knobs.runtime.add_stages_inspection_hook = AssembleStage(target.cubin_arch, target.ptxas_options)
        compiled = triton.compile(source, target=GPUTarget("cuda", target.triton_arch, 32),
                                  options=compile_options(target, num_warps, specialized, programs_per_sm))
    if compiled.metadata.num_warps != launch_warps:
        raise RuntimeError(f"{rendered.name} compiled to {compiled.metadata.num_warps} warps per program; its "
                           f"variant launches {launch_warps} (contract.Variant.launch_warps)")
    cubin = compiled.asm["cubin"]
    binary = compiled.asm["ptx"].encode() if target.binary == "ptx" else cubin
    return CompiledKernel(binary=binary, cubin=cubin, kernel_name=compiled.metadata.name,
                          shared_bytes=compiled.metadata.shared, num_warps=launch_warps,
                          num_stages=num_stages, triton_version=triton.__version__,
                          ptxas_notes=tuple(compiled.metadata.ptxas_notes))
