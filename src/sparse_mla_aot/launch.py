"""Per-device kernels and launch specs. Modules load once per device (prepare() or the first eager call), never
under CUDA-graph capture. Each kernel's argument-buffer layout comes from its recorded signature at load; a plan's
launch spec holds both kernels with every scalar argument already in place, so a call only adds pointers (the
native launcher writes them into the buffers and launches split + combine)."""
from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import COMBINE_NAME, COMBINE_PARAMS, SCRATCH_PARAMS, SPLIT_PARAMS, ArtifactRecord, Param

SCALAR_FORMATS = {"i32": "i", "i64": "q", "fp32": "f"}
# Triton's global/profile scratch pointers (contract.SCRATCH_PARAMS) are unused (size 0) by these kernels: NULL.
SCRATCH_POINTERS = len(SCRATCH_PARAMS)
# _launcher.c's launch_spec, little-endian, every field 8 bytes: the context, then per kernel its function, grid
# x/y/z, block_x, shared bytes, programmatic (1: a programmatic dependent launch of the kernel before it), argument
# bytes, pointer count, MAX_POINTERS (offset, source, addend) slots and the argument buffer. A second kernel of all
# zeros (function 0) is none: a one-split plan launches the split kernel alone. The native module reports its size
# (SPEC_BYTES); DeviceKernels refuses another.
MAX_ARG_BYTES, MAX_POINTERS = 256, 16
KERNEL_SPEC = struct.Struct(f"<9Q{3 * MAX_POINTERS}Q{MAX_ARG_BYTES}s")
CONTEXT = struct.Struct("<Q")
SPEC_BYTES = CONTEXT.size + 2 * KERNEL_SPEC.size


@dataclass(frozen=True)
class Pointer:
    """A pointer argument of a spec: launch()'s pointer argument number `source`, plus `addend` bytes."""

    source: int
    addend: int = 0


@dataclass(frozen=True)
class LoadedKernel:
    name: str
    block_h: int  # 0 for the combine kernel
    block_t: int
    function: int
    block_x: int
    shared_bytes: int
    # Compiled with grid-dependency control (its record's grid_dependency): a combine kernel that waits for the
    # split grid itself, so it may be a programmatic dependent launch (docs/design.md#programmatic-dependent-launch).
    grid_dependency: bool
    layout: tuple[tuple[str, int], ...]  # per parameter: struct format, byte offset in the argument buffer
    arg_bytes: int
    # How many programs of it the device runs at once (SMs x programs per SM, the driver's occupancy); 0: unknown.
    wave: int = 0


def argument_layout(params: tuple[Param, ...]) -> tuple[tuple[tuple[str, int], ...], int]:
    """Each recorded parameter's struct format and offset, naturally aligned as in the kernel's parameter space,
    and the buffer's size."""
    layout, offset = [], 0
    for p in params:
        fmt = "Q" if p.type.startswith("*") else SCALAR_FORMATS[p.type]
        size = struct.calcsize(fmt)
        offset = -(-offset // size) * size
        layout.append((fmt, offset))
        offset += size
    return tuple(layout), offset


def kernel_spec(kernel: LoadedKernel, grid: tuple[int, int, int], values: tuple, programmatic: bool = False) -> bytes:
    """One kernel of a launch spec. values: the arguments in parameter order less the scratch pointers, each a
    number (packed now) or a Pointer (a slot the launcher fills per call). programmatic: a programmatic dependent
    launch of the kernel before it, which only a kernel compiled to wait for that grid may be."""
    if programmatic and not kernel.grid_dependency:
        raise ValueError(f"kernel {kernel.name} was not compiled with grid-dependency control: it cannot be a "
                         f"programmatic dependent launch")
    if len(values) + SCRATCH_POINTERS != len(kernel.layout):
        raise ValueError(f"kernel {kernel.name} takes {len(kernel.layout) - SCRATCH_POINTERS} arguments before its "
                         f"scratch pointers; got {len(values)}")
    args, slots = bytearray(kernel.arg_bytes), []
    for i, ((fmt, offset), value) in enumerate(zip(kernel.layout, values)):
        if isinstance(value, Pointer):
            if fmt != "Q":  # the launcher writes 8 bytes there: a scalar slot's neighbour would be overwritten
                raise ValueError(f"kernel {kernel.name} argument {i} is a scalar ({fmt!r}); got {value}, a pointer")
            slots += (offset, value.source, value.addend)
        else:
            struct.pack_into("<" + fmt, args, offset, value)
    if kernel.arg_bytes > MAX_ARG_BYTES or len(slots) > 3 * MAX_POINTERS:
        raise ValueError(f"kernel {kernel.name}: {kernel.arg_bytes} argument bytes and {len(slots) // 3} pointers; "
                         f"the launcher holds at most {MAX_ARG_BYTES} and {MAX_POINTERS}")
    return KERNEL_SPEC.pack(kernel.function, *grid, kernel.block_x, kernel.shared_bytes,
                            int(programmatic), kernel.arg_bytes,
                            len(slots) // 3, *slots, *[0] * (3 * MAX_POINTERS - len(slots)), bytes(args))


def _check_signature(record: ArtifactRecord) -> None:
    expected = (*(COMBINE_PARAMS if record.name == COMBINE_NAME else SPLIT_PARAMS), *SCRATCH_PARAMS)
    if record.params != expected:
        raise RuntimeError(f"sparse_mla_aot: kernel {record.name} was built with parameters "
                           f"{[p.name for p in record.params]}; this runtime packs {[p.name for p in expected]}: "
                           f"the wheel's kernels and runtime come from different builds")


class DeviceKernels:
    """The loaded kernels of one device (in its primary context); loading happens outside capture, under a lock.
    launcher: the native module, or a stand-in with the same functions (tests)."""

    def __init__(self, catalog: Catalog, device_index: int, target: str, launcher=None):
        if launcher is None:
            from sparse_mla_aot import _launcher as launcher  # the native extension; imported when a GPU is used
        if launcher.SPEC_BYTES != SPEC_BYTES:
            raise RuntimeError(f"sparse_mla_aot: the native launcher takes {launcher.SPEC_BYTES}-byte launch specs, "
                               f"launch.py packs {SPEC_BYTES}: they come from different builds; reinstall the wheel")
        self.launcher = launcher
        self.catalog = catalog
        self.device_index = device_index
        self.target = target
        self.context = launcher.primary_context(device_index)
        self.kernels: dict[str, LoadedKernel] = {}
        self._lock = threading.Lock()

    def load(self, names) -> None:
        records = self.catalog.records(self.target)
        with self._lock:
            for name in names:
                if name in self.kernels:
                    continue
                record = records.get(name)
                if record is None or record.status != "shipped":
                    why = "no such kernel in this wheel" if record is None else f"pruned: {record.reason}"
                    raise KeyError(f"sparse_mla_aot: kernel {name} cannot be loaded for {self.target} ({why})")
                _check_signature(record)
                image = self.catalog.binary(self.target, name)
                if record.binary_format == "ptx":
                    image += b"\0"
                shared_bytes = record.resources.dynamic_shared_bytes
                function = self.launcher.load_function(self.context, image, record.kernel_name, shared_bytes)
                variant = record.variant
                block_x = 32 * record.num_warps
                self.kernels[name] = LoadedKernel(name, variant.block_h if variant else 0,
                                                  variant.block_t if variant else 0, function,
                                                  block_x, shared_bytes,
                                                  record.grid_dependency,
                                                  *argument_layout(record.params),
                                                  self.launcher.wave(self.context, function, block_x, shared_bytes))

    def load_tables(self) -> None:
        """Every variant the target's tables name, plus the combine kernel."""
        names = {COMBINE_NAME}
        for table in self.catalog.tables(self.target):
            names.update(row.variant for row in table.rows)
        self.load(sorted(names))

    def launch_spec(self, split: LoadedKernel, split_grid: tuple[int, int, int], split_values: tuple,
                    combine: tuple[tuple[int, int, int], tuple] | None, programmatic_combine: bool = False) -> bytes:
        """The bytes launcher.launch takes: this device's context, the split kernel, then the combine kernel
        (grid, values), or for None an empty slot (function 0), which the launcher skips. programmatic_combine
        (a table row's choice) takes effect where the combine kernel was compiled for it, and is ignored elsewhere
        (the sm89 proxy)."""
        combine_kernel = self.kernels[COMBINE_NAME]
        combine_spec = (bytes(KERNEL_SPEC.size) if combine is None
                        else kernel_spec(combine_kernel, *combine,
                                         programmatic=programmatic_combine and combine_kernel.grid_dependency))
        return CONTEXT.pack(self.context) + kernel_spec(split, split_grid, split_values) + combine_spec
