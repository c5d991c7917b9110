"""Per-device kernel handles: modules loaded once (prepare() or the first eager call) through the native
launcher, never under CUDA-graph capture; launches go to the caller's stream."""
from __future__ import annotations

import threading
from dataclasses import dataclass

from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import COMBINE_NAME, COMBINE_PARAMS, SCRATCH_PARAMS, SPLIT_PARAMS, ArtifactRecord, Param

ARG_TYPE_CODES = {"i32": "i", "i64": "l", "fp32": "f"}
SCRATCH_POINTERS = (0,) * len(SCRATCH_PARAMS)  # Triton's global/profile scratch: unused (size 0) by these kernels


@dataclass(frozen=True)
class LoadedKernel:
    name: str
    block_h: int  # 0 for the combine kernel
    block_t: int
    function: int
    block_x: int
    shared_bytes: int
    arg_types: bytes


def arg_type_codes(params: tuple[Param, ...]) -> bytes:
    """The launcher's per-argument codes from the recorded signature: p(ointer), i32, i64, f32."""
    return "".join("p" if p.type.startswith("*") else ARG_TYPE_CODES[p.type] for p in params).encode()


def _check_signature(record: ArtifactRecord) -> None:
    expected = (*(COMBINE_PARAMS if record.name == COMBINE_NAME else SPLIT_PARAMS), *SCRATCH_PARAMS)
    if record.params != expected:
        raise RuntimeError(f"sparse_mla_aot: kernel {record.name} was built with parameters "
                           f"{[p.name for p in record.params]}; this runtime packs {[p.name for p in expected]}: "
                           f"the wheel's kernels and runtime come from different builds")


class DeviceKernels:
    """The loaded kernels of one device; loading happens outside capture, under a lock."""

    def __init__(self, catalog: Catalog, device_index: int, target: str):
        from sparse_mla_aot import _launcher  # the native extension; imported when a GPU is first used

        self._launcher = _launcher
        self.catalog = catalog
        self.device_index = device_index
        self.target = target
        self.kernels: dict[str, LoadedKernel] = {}
        self._lock = threading.Lock()

    def load(self, names) -> None:
        records = self.catalog.records(self.target)
        with self._lock:
            for name in names:
                if name in self.kernels:
                    continue
                record = records[name]
                _check_signature(record)
                image = self.catalog.binary(self.target, name)
                if record.binary_format == "ptx":
                    image += b"\0"
                shared_bytes = record.resources.dynamic_shared_bytes
                module = self._launcher.load_module(self.device_index, image)
                function = self._launcher.get_function(module, record.kernel_name, shared_bytes)
                variant = record.variant
                self.kernels[name] = LoadedKernel(name, variant.block_h if variant else 0,
                                                  variant.block_t if variant else 0, function,
                                                  32 * record.num_warps, shared_bytes, arg_type_codes(record.params))

    def load_tables(self) -> None:
        """Every variant the target's tables name, plus the combine kernel."""
        names = {COMBINE_NAME}
        for table in self.catalog.tables(self.target):
            names.update(row.variant for row in table.rows)
        self.load(sorted(names))

    def use_device(self) -> None:
        """A thread that never touched CUDA has no current context: give it this device's (primary) one."""
        self._launcher.use_device(self.device_index)

    def launch(self, k: LoadedKernel, grid: tuple[int, int, int], stream: int, args: tuple) -> None:
        self._launcher.launch(k.function, grid[0], grid[1], grid[2], k.block_x, k.shared_bytes, stream, k.arg_types,
                         *args, *SCRATCH_POINTERS)
