"""Artifact records for tests that need a kernel directory or a build report but no compile."""
from __future__ import annotations

from sparse_mla_aot.contract import (COMBINE_NAME, COMBINE_PARAMS, SCRATCH_PARAMS, SPLIT_PARAMS, ArtifactRecord,
                                     Resources)


def fake_record(name: str, status: str = "shipped", *, target: str = "sm90", reason: str | None = None,
                shared: int = 1000, registers: int = 128, stack_bytes: int = 0, num_warps: int = 4,
                num_stages: int = 2, triton_version: str = "3.9.0") -> ArtifactRecord:
    """A compiled record of `name` (a variant name or COMBINE_NAME) with these figures; pruned needs a reason."""
    combine = name == COMBINE_NAME
    resources = Resources(elf_arch="sm_90a", registers=registers, stack_bytes=stack_bytes, local_bytes=0,
                          shared_static_bytes=0, dynamic_shared_bytes=shared, total_shared_bytes=shared,
                          mma_instructions=() if combine else ("HGMMA.64x16x16.F32.BF16",), loop_instructions=1000,
                          loop_spill_stores=0, loop_spill_loads=0, loop_global_loads=10,
                          loop_barriers=4)
    fields = dict(name=name, kind="combine" if combine else "split", target=target, kernel_name=f"{name}_kernel",
                  num_warps=num_warps, num_stages=num_stages,
                  params=(*(COMBINE_PARAMS if combine else SPLIT_PARAMS), *SCRATCH_PARAMS), max_shared_bytes=232448,
                  binary_format="cubin", grid_dependency=True, triton_version=triton_version, ptxas_version="13.4",
                  cache_key="0" * 64, source=f"src/{name}.py", binary=f"{name}.cubin", sha256="0" * 64,
                  resources=resources, warnings=(), compile_seconds=1.0)
    if status == "shipped":
        return ArtifactRecord.shipped(**fields)
    return ArtifactRecord.pruned(reason, **fields)
