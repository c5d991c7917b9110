"""Checks of the native launcher against the stand-in driver (fake_libcuda.c). tests/test_launcher_build.py runs
each in a fresh process whose LD_LIBRARY_PATH finds the stand-in:

    python fake_driver_checks.py LAUNCHER_SO FAKE_LIBCUDA CHECK      # prints "CHECK: ok"
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import struct
import sys
import threading

DEVICE0, DEVICE1 = 0x1000, 0x1001  # the stand-in's primary contexts
STREAM = 0x5000


class Record(ctypes.Structure):
    _fields_ = [("function", ctypes.c_size_t), ("context", ctypes.c_size_t), ("stream", ctypes.c_size_t),
                ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("programmatic", ctypes.c_uint),
                ("arg_bytes", ctypes.c_size_t), ("args", ctypes.c_ubyte * 256)]


def _load(launcher_so: str, fake_so: str):
    loader = importlib.machinery.ExtensionFileLoader("sparse_mla_aot._launcher", launcher_so)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
        "sparse_mla_aot._launcher", launcher_so, loader=loader))
    loader.exec_module(module)
    fake = ctypes.CDLL(fake_so)
    fake.fake_record.restype = ctypes.POINTER(Record)
    fake.fake_current.restype = ctypes.c_size_t
    fake.fake_set_current.argtypes = [ctypes.c_size_t]
    return module, fake


def _kernels(launcher, context: int):
    """The real split and combine kernels' layouts, loaded through the launcher (the stand-in hands out
    functions); the combine kernel compiled with grid-dependency control."""
    from sparse_mla_aot.contract import COMBINE_PARAMS, SCRATCH_PARAMS, SPLIT_PARAMS
    from sparse_mla_aot.launch import LoadedKernel, argument_layout

    kernels = []
    for name, params, shared in (("split", SPLIT_PARAMS, 60_000), ("combine", COMBINE_PARAMS, 0)):
        function = launcher.load_function(context, b"\x7fELF fake cubin", f"{name}_kernel", shared)
        kernels.append((LoadedKernel(name, 16, 16, function, 128, shared, name == "combine",
                                     *argument_layout((*params, *SCRATCH_PARAMS))), params))
    return kernels


def _values(params, base: int) -> tuple:
    """Distinct values per parameter: Pointer(i, addend) for pointers, numbers for the scalars."""
    from sparse_mla_aot.launch import Pointer

    return tuple(Pointer(i % 4, 16 * i) if p.type.startswith("*") else (base + i + 0.5 if p.type == "fp32" else
                 -(base + i) if p.type == "i32" else 2**40 + base + i) for i, p in enumerate(params))


def argument_buffers(launcher, fake) -> None:
    """Both kernels launch once each, in order, with each argument at its layout offset: pointers filled from
    this call's pointer arguments (plus their addends), scalars as packed, scratch pointers NULL; the split kernel
    as an ordinary launch, the combine kernel as a programmatic dependent launch (the PDL attribute, value 1)."""
    from sparse_mla_aot.launch import CONTEXT, Pointer, kernel_spec

    context = launcher.primary_context(0)
    kernels = _kernels(launcher, context)
    grids = ((3, 2, 7), (3, 16, 1))
    spec = CONTEXT.pack(context) + b"".join(
        kernel_spec(k, grid, _values(params, 100 * n), programmatic=n == 1)
        for n, ((k, params), grid) in enumerate(zip(kernels, grids)))
    pointers = (0x10_0000, 0x20_0000, 0x30_0000, 0x40_0000)
    launcher.launch(spec, STREAM, *pointers)
    assert fake.fake_launches() == 2
    for n, ((kernel, params), grid) in enumerate(zip(kernels, grids)):
        record = fake.fake_record(n).contents
        assert (record.function, record.context, record.stream) == (kernel.function, DEVICE0, STREAM)
        assert (tuple(record.grid), tuple(record.block), record.shared) == (grid, (128, 1, 1), kernel.shared_bytes)
        assert record.arg_bytes == kernel.arg_bytes
        assert record.programmatic == (kernel.name == "combine")
        args = bytes(record.args[:record.arg_bytes])
        for value, (fmt, offset), param in zip((*_values(params, 100 * n), 0, 0), kernel.layout,
                                               (*params, None, None)):
            got = struct.unpack_from("<" + fmt, args, offset)[0]
            if isinstance(value, Pointer):
                value = pointers[value.source] + value.addend
            assert got == value, (param, fmt, offset, got, value)


def one_split_launches_the_split_kernel_alone(launcher, fake) -> None:
    """A spec whose combine slot is all zeros (launch.DeviceKernels.launch_spec for a one-split plan) makes one
    launch, the split kernel's, with its arguments in place."""
    from sparse_mla_aot.launch import CONTEXT, KERNEL_SPEC, kernel_spec

    context = launcher.primary_context(0)
    (split, params), _ = _kernels(launcher, context)
    spec = CONTEXT.pack(context) + kernel_spec(split, (5, 1, 1), _values(params, 0)) + bytes(KERNEL_SPEC.size)
    launcher.launch(spec, STREAM, 1, 2, 3, 4)
    assert fake.fake_launches() == 1
    record = fake.fake_record(0).contents
    assert (record.function, tuple(record.grid), record.arg_bytes) == (split.function, (5, 1, 1), split.arg_bytes)


def an_ordinary_combine_launch_has_no_attribute(launcher, fake) -> None:
    """A combine kernel not marked programmatic (a table row that measured it slower, or the sm89 proxy's PTX,
    which cannot wait through griddepcontrol) is launched without the PDL attribute: stream order alone keeps it
    after the split kernel."""
    from sparse_mla_aot.launch import CONTEXT, kernel_spec

    context = launcher.primary_context(0)
    (split, split_params), (combine, combine_params) = _kernels(launcher, context)
    spec = (CONTEXT.pack(context) + kernel_spec(split, (5, 1, 1), _values(split_params, 0))
            + kernel_spec(combine, (1, 16, 1), _values(combine_params, 0)))
    launcher.launch(spec, STREAM, 1, 2, 3, 4)
    assert fake.fake_launches() == 2
    assert [fake.fake_record(n).contents.programmatic for n in range(2)] == [0, 0]


def context_switches(launcher, fake) -> None:
    """A thread without a context gets the device's and keeps it; a thread on another device's context launches
    on the spec's and gets its own back; a thread already on it makes no cuCtxSetCurrent call."""
    from sparse_mla_aot.launch import CONTEXT, kernel_spec

    context = launcher.primary_context(0)
    (split, sp), (combine, cp) = _kernels(launcher, context)
    spec = CONTEXT.pack(context) + kernel_spec(split, (1, 1, 1), _values(sp, 0)) + kernel_spec(
        combine, (1, 1, 1), _values(cp, 0))
    seen = {}

    def fresh_thread():
        launcher.launch(spec, STREAM, 1, 2, 3, 4)
        seen["context_after"] = fake.fake_current()

    thread = threading.Thread(target=fresh_thread)
    thread.start()
    thread.join()
    assert seen["context_after"] == DEVICE0 and fake.fake_record(1).contents.context == DEVICE0

    fake.fake_set_current(DEVICE1)  # the caller switched to device 1 (torch.cuda.set_device(1))
    launcher.launch(spec, STREAM, 1, 2, 3, 4)
    assert fake.fake_record(3).contents.context == DEVICE0 and fake.fake_current() == DEVICE1

    fake.fake_set_current(DEVICE0)
    calls = fake.fake_set_current_calls()
    launcher.launch(spec, STREAM, 1, 2, 3, 4)
    assert fake.fake_set_current_calls() == calls and fake.fake_launches() == 6


def errors_restore_the_callers_context(launcher, fake) -> None:
    """Driver errors name the call and the kernel, and the caller's context is current again afterwards."""
    from sparse_mla_aot.launch import CONTEXT, kernel_spec

    context = launcher.primary_context(0)
    (split, sp), (combine, cp) = _kernels(launcher, context)
    spec = CONTEXT.pack(context) + kernel_spec(split, (1, 1, 1), _values(sp, 0)) + kernel_spec(
        combine, (1, 1, 1), _values(cp, 0))
    fake.fake_set_current(DEVICE1)
    fake.fake_fail_launch(1)
    _raises(lambda: launcher.launch(spec, STREAM, 1, 2, 3, 4),
            "cuLaunchKernelEx (split kernel) failed: CUDA_ERROR_INVALID_VALUE [CUresult 1]")
    assert fake.fake_current() == DEVICE1 and fake.fake_launches() == 0
    fake.fake_fail_launch(0)
    _raises(lambda: launcher.load_function(context, b"ptx\0", "missing", 0),
            "cuModuleGetFunction for kernel 'missing' failed: CUDA_ERROR_INVALID_VALUE")
    _raises(lambda: launcher.load_function(context, b"ptx\0", "big", 300_000),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=300000) for kernel 'big' (more than the device's "
            "opt-in limit?) failed: CUDA_ERROR_INVALID_VALUE")
    assert fake.fake_current() == DEVICE1
    _raises(lambda: launcher.primary_context(7), "getting the device's primary context failed: CUDA_ERROR_OTHER")


def wave_counts_the_contexts_device(launcher, fake) -> None:
    """wave() is the multiprocessors of the context's device times the programs one holds, and leaves the
    caller's context current."""
    context0, context1 = launcher.primary_context(0), launcher.primary_context(1)
    function = launcher.load_function(context0, b"\x7fELF fake cubin", "split_kernel", 60_000)
    fake.fake_set_current(DEVICE1)
    assert launcher.wave(context0, function, 384, 60_000) == 132 * 3  # 3 x 60,000 B fit 232,448
    assert launcher.wave(context1, function, 384, 0) == 66 * 5  # 5 x 384 threads fit 2,048
    assert fake.fake_current() == DEVICE1
    _raises(lambda: launcher.wave(context0, function, 0, 0), "wave(): block_x must be in [1, 1024]", OverflowError)
    _raises(lambda: launcher.wave(0, function, 128, 0), "wave(): context must be in", OverflowError)


def _raises(fn, message: str, error_type: type[Exception] = RuntimeError) -> None:
    try:
        fn()
    except error_type as error:
        assert str(error).startswith(message), (str(error), message)
    else:
        raise AssertionError(f"no error; expected {message!r}")


CHECKS = {f.__name__: f for f in (argument_buffers, one_split_launches_the_split_kernel_alone,
                                   an_ordinary_combine_launch_has_no_attribute, context_switches,
                                   errors_restore_the_callers_context, wave_counts_the_contexts_device)}

if __name__ == "__main__":
    launcher_so, fake_so, check = sys.argv[1:]
    CHECKS[check](*_load(launcher_so, fake_so))
    print(f"{check}: ok")
