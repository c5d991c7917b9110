"""The runtime's per-call path on CPU tensors (no GPU, no driver): a kernel folder whose records carry the real
kernel signatures and a table per (kv_format, h_q), a Python stand-in for the native launcher that records each
launch, a decoder of launch specs, and the switches that let ops run with "cpu" as the device type."""
from __future__ import annotations

import functools
import json
import struct
from pathlib import Path

import pytest
import torch

from sparse_mla_aot import launch, ops, paths, validation
from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import COMBINE_PARAMS, SCRATCH_PARAMS, SPLIT_PARAMS, SUPPORTED_H_Q, Variant, table_stem
from sparse_mla_aot.launch import CONTEXT, KERNEL_SPEC, MAX_POINTERS, DeviceKernels
from tests.test_dispatch import VARIANTS, write_kernel_dir

STREAM = 0x5000
FAKE_WAVE = 7  # programs the fake device runs at once: larger grids split only the rows past its last whole wave
TABLE_SPLITS = (64, 4, 1)  # per table row; 64 exceeds small token counts, exercising the clamp


def write_runtime_kernel_dir(root: Path) -> Path:
    """write_kernel_dir's fake wheel (records with the real parameter lists) with tables for every kv_format and
    h_q; the middle row of each launches its combine kernel as a programmatic dependent launch."""
    root = write_kernel_dir(root)
    for kv_format in ("v32", "model1"):
        shipped = sorted(Variant(*key).name for key, status in VARIANTS.items()
                         if status == "shipped" and key[0] == kv_format)
        for h_q in SUPPORTED_H_Q:
            rows = [{"max_batch_rows": bound, "variant": shipped[i % len(shipped)], "num_splits": splits,
                     "programmatic_combine": i == 1}
                    for i, (bound, splits) in enumerate(zip((1, 4, None), TABLE_SPLITS))]
            table = {"target": "sm90", "kv_format": kv_format, "h_q": h_q,
                     "provenance": {"kind": "heuristic", "rule": "test tables"}, "rows": rows}
            (root / "tables" / "sm90" / f"{table_stem(kv_format, h_q)}.json").write_text(json.dumps(table))
    return root


class FakeLauncher:
    """The native launcher's functions, recording launches instead of making them."""

    SPEC_BYTES = launch.SPEC_BYTES

    def __init__(self):
        self.launches: list[tuple[bytes, int, tuple[int, ...]]] = []
        self.loaded: list[str] = []

    def primary_context(self, device: int) -> int:
        return 0x1000 + device

    def load_function(self, context: int, image: bytes, name: str, dynamic_shared_bytes: int) -> int:
        self.loaded.append(name)
        return 0x2000 + len(self.loaded)

    def wave(self, context: int, function: int, block_x: int, dynamic_shared_bytes: int) -> int:
        return FAKE_WAVE

    def launch(self, spec: bytes, stream: int, *pointers: int) -> None:
        assert len(spec) == self.SPEC_BYTES
        self.launches.append((spec, stream, pointers))


class FakeCachingAllocator:
    """PyTorch's raw caching-allocator entry points (what ops takes the split workspace from) on CPU memory:
    records each block's address, size and stream, and which are still live."""

    def __init__(self):
        self.blocks: list[tuple[int, int, int]] = []  # (address, bytes, stream), in allocation order
        self.live: dict[int, torch.Tensor] = {}

    def raw_alloc(self, size: int, stream: int) -> int:
        block = torch.full((size,), 0xAB, dtype=torch.uint8)
        self.live[block.data_ptr()] = block
        self.blocks.append((block.data_ptr(), size, stream))
        return block.data_ptr()

    def raw_delete(self, address: int) -> None:
        del self.live[address]  # KeyError: freed twice, or never allocated here


def use_cpu_runtime(monkeypatch: pytest.MonkeyPatch, root: Path, launcher,
                    allocator: FakeCachingAllocator) -> DeviceKernels:
    """ops with CPU tensors in the role of one CUDA device (a tensor elsewhere, e.g. on meta, is on another
    device; the CPU device has index None, which is also the current device), the kernels of `root` loaded through
    `launcher`, workspaces from `allocator`, an empty plan cache and no environment settings."""
    kernels = DeviceKernels(Catalog(root), 0, "sm90", launcher)
    kernels.load_tables()  # as prepare() does
    monkeypatch.setattr(ops, "check_devices", functools.partial(validation.check_devices, device_type="cpu"))
    monkeypatch.setattr(ops, "_kernels_for", lambda index: kernels)
    monkeypatch.setattr(ops, "_plans", {})
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: STREAM, raising=False)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: None, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_cudaCachingAllocator_raw_alloc", allocator.raw_alloc, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_cudaCachingAllocator_raw_delete", allocator.raw_delete, raising=False)
    monkeypatch.delenv(paths.FORCE_ENV, raising=False)
    monkeypatch.delenv(paths.CHECK_ENV, raising=False)
    return kernels


def decode_spec(spec: bytes, pointers: tuple[int, ...], kernels: DeviceKernels) -> dict:
    """What the native launcher would launch for these pointers: the context, and per kernel (split, combine) its
    function, grid, block, shared bytes, whether it is a programmatic dependent launch, and named arguments read back
    through the kernel's layout; combine None where its slot is empty (function 0: a one-split plan)."""
    (context,) = CONTEXT.unpack_from(spec)
    result = {"context": context}
    for i, name in enumerate(("split", "combine")):
        fields = KERNEL_SPEC.unpack_from(spec, CONTEXT.size + i * KERNEL_SPEC.size)
        function, gx, gy, gz, block_x, shared, programmatic, arg_bytes, count = fields[:9]
        if name == "combine" and function == 0:
            result[name] = None
            continue
        slots, args = fields[9:9 + 3 * MAX_POINTERS], bytearray(fields[-1][:arg_bytes])
        for offset, source, addend in zip(slots[0:3 * count:3], slots[1:3 * count:3], slots[2:3 * count:3]):
            struct.pack_into("<Q", args, offset, pointers[source] + addend)
        kernel = next(k for k in kernels.kernels.values() if k.function == function)
        params = COMBINE_PARAMS if name == "combine" else SPLIT_PARAMS
        values = {p.name: struct.unpack_from("<" + fmt, args, offset)[0]
                  for p, (fmt, offset) in zip((*params, *SCRATCH_PARAMS), kernel.layout)}
        result[name] = {"kernel": kernel.name, "grid": (gx, gy, gz), "block_x": block_x, "shared_bytes": shared,
                        "programmatic": bool(programmatic), "args": values}
    return result
