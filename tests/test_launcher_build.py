"""CPU tests of the sparse_mla_aot._launcher C extension: built against the running interpreter's headers with
the limited API and imported from tmp_path; argument and spec checks without a driver; no link-time dependency on
libcuda; and its driver calls (context handling, argument buffers, errors) against a stand-in libcuda.so.1
(tests/native/)."""

import ctypes.util
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from sparse_mla_aot.launch import CONTEXT, KERNEL_SPEC, MAX_POINTERS, SPEC_BYTES
from tests.native.fake_driver_checks import CHECKS

FAKE_DRIVER_CHECKS = sorted(CHECKS)

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "sparse_mla_aot" / "_launcher.c"


@pytest.fixture(scope="module")
def built_so(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not available")
    out = tmp_path_factory.mktemp("launcher") / "_launcher.abi3.so"
    cmd = [
        gcc,
        "-shared",
        "-fPIC",
        "-O2",
        "-Wall",
        "-Werror",
        "-DPy_LIMITED_API=0x030A0000",
        "-I",
        sysconfig.get_paths()["include"],
        str(SRC),
        "-o",
        str(out),
        "-ldl",  # dlopen lives in libc on glibc >= 2.34; harmless otherwise
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"compile failed:\n{' '.join(cmd)}\n{proc.stderr}"
    return out


@pytest.fixture(scope="module")
def launcher(built_so):
    name = "sparse_mla_aot._launcher"
    loader = importlib.machinery.ExtensionFileLoader(name, str(built_so))
    spec = importlib.util.spec_from_file_location(name, str(built_so), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _dynsyms(so, *flags):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    out = subprocess.run(
        [nm, "-D", *flags, str(so)], capture_output=True, text=True, check=True
    ).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def test_init_symbol_matches_module_name(built_so):
    # ExtensionFileLoader looks up PyInit_<last component of the name>.
    defined = _dynsyms(built_so, "--defined-only")
    assert "PyInit__launcher" in defined


def test_import_without_gpu(launcher):
    assert launcher.__name__ == "sparse_mla_aot._launcher"
    assert [n for n in dir(launcher) if not n.startswith("_")] == ["SPEC_BYTES", "launch", "load_function",
                                                                    "primary_context", "wave"]
    assert launcher.SPEC_BYTES == SPEC_BYTES  # launch.py packs what the C code reads


def spec(context=0x1000, split=None, combine=None) -> bytes:
    """A launch spec from fields (each kernel: function, grid, block_x, shared_bytes, programmatic, arg_bytes,
    slots, args)."""
    def kernel(function=0x2000, grid=(1, 1, 1), block_x=128, shared_bytes=0, programmatic=0, arg_bytes=16,
               slots=((0, 0, 0),), args=b""):
        flat = [v for slot in slots for v in slot]
        return KERNEL_SPEC.pack(function, *grid, block_x, shared_bytes, programmatic, arg_bytes, len(slots), *flat,
                                *[0] * (3 * MAX_POINTERS - len(flat)), args)
    return CONTEXT.pack(context) + kernel(**(split or {})) + kernel(**(combine or {}))


@pytest.mark.parametrize("bad, message", [
    ({"split": {"function": 0}}, "kernel 0 of the spec is malformed"),
    ({"combine": {"grid": (1, 0, 1)}}, "kernel 1 of the spec is malformed"),
    ({"split": {"grid": (2**32, 1, 1)}}, "kernel 0 of the spec is malformed"),
    ({"split": {"block_x": 2048}}, "kernel 0 of the spec is malformed"),
    ({"split": {"arg_bytes": 264}}, "kernel 0 of the spec is malformed"),
    ({"combine": {"programmatic": 2}}, "kernel 1 of the spec is malformed"),  # a flag: 0 or 1
    ({"split": {"slots": ((4, 0, 0),)}}, "kernel 0 of the spec is malformed"),  # not 8-byte aligned
    ({"split": {"slots": ((16, 0, 0),)}}, "kernel 0 of the spec is malformed"),  # past arg_bytes
    ({"combine": {"slots": ((0, 1, 0),)}}, "kernel 1 of the spec is malformed"),  # source 1 of 1 pointer
    ({"context": 0}, "the spec's context is NULL"),
])
def test_launch_refuses_a_malformed_spec_before_the_driver(launcher, bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        launcher.launch(spec(**bad), 0, 0x7000)


def test_launch_checks_its_arguments(launcher):
    with pytest.raises(ValueError, match=rf"spec must be bytes of length {SPEC_BYTES}"):
        launcher.launch(spec()[:-1], 0, 0x7000)
    with pytest.raises(ValueError, match=rf"spec must be bytes of length {SPEC_BYTES}"):
        launcher.launch(bytearray(spec()), 0, 0x7000)
    with pytest.raises(TypeError, match=r"launch\(\) takes 2 to 18 positional arguments \(1 given\)"):
        launcher.launch(spec())
    with pytest.raises(TypeError, match=r"launch\(\) takes 2 to 18 positional arguments \(19 given\)"):
        launcher.launch(spec(), 0, *[0] * 17)
    with pytest.raises(TypeError, match=r"launch\(\): stream must be an int, not <class 'NoneType'>"):
        launcher.launch(spec(), None, 0x7000)
    with pytest.raises(OverflowError, match=r"launch\(\): a pointer must be in \[0, 18446744073709551615\]"):
        launcher.launch(spec(), 0, -1)
    with pytest.raises(TypeError, match=r"launch\(\): a pointer must be an int, not <class 'float'>"):
        launcher.launch(spec(), 0, 1.0)


def test_valid_spec_reaches_the_driver(launcher):
    """Everything valid: on this driverless machine the error names libcuda.so.1 (a machine with a driver has
    no context 0x1000)."""
    if ctypes.util.find_library("cuda"):
        pytest.skip("a CUDA driver is installed")
    with pytest.raises(RuntimeError, match=r"cannot load libcuda\.so\.1 .*a CUDA driver is required"):
        launcher.launch(spec(), 0, 0x7000)
    with pytest.raises(RuntimeError, match=r"cannot load libcuda\.so\.1"):
        launcher.primary_context(0)


def test_other_functions_validate_first(launcher):
    with pytest.raises(TypeError, match=r"primary_context\(\) takes exactly one argument \(0 given\)"):
        launcher.primary_context()
    with pytest.raises(OverflowError, match=r"primary_context\(\): device must be in \[0, 2147483647\]"):
        launcher.primary_context(-1)
    with pytest.raises(OverflowError, match=r"load_function\(\): context must be in"):
        launcher.load_function(0, b"\x7fELF", "k", 0)
    for image in ("not bytes", b"", b"PTX without NUL"):
        with pytest.raises(ValueError, match=r"image must be bytes: an ELF cubin or NUL-terminated PTX"):
            launcher.load_function(0x1000, image, "k", 0)
    for name in (b"k", "a\0b"):
        with pytest.raises(TypeError, match=r"name must be a str without NUL characters"):
            launcher.load_function(0x1000, b"ptx\0", name, 0)
    with pytest.raises(OverflowError, match=r"dynamic_shared_bytes must be in \[0, 2147483647\]"):
        launcher.load_function(0x1000, b"ptx\0", "k", 2**31)


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    """tests/native/fake_libcuda.c built as libcuda.so.1 in a folder of its own."""
    folder = tmp_path_factory.mktemp("fake_driver")
    proc = subprocess.run([shutil.which("gcc") or "gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
                           "-Wl,-soname,libcuda.so.1", str(REPO / "tests" / "native" / "fake_libcuda.c"), "-o",
                           str(folder / "libcuda.so.1")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.mark.parametrize("check", FAKE_DRIVER_CHECKS)
def test_with_a_stand_in_driver(built_so, fake_driver, check):
    """tests/native/fake_driver_checks.py, in a process whose dlopen("libcuda.so.1") finds the stand-in."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_driver), PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "src")]))
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "native" / "fake_driver_checks.py"), str(built_so),
                           str(fake_driver / "libcuda.so.1"), check], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"{check}: ok"


def test_no_link_time_cuda_dependency(built_so):
    undefined = _dynsyms(built_so, "--undefined-only")
    assert not [s for s in undefined if s.startswith("cu")], undefined
    # The driver is reached only through dlopen/dlsym.
    assert any(s.startswith("dlopen") for s in undefined)
    readelf = shutil.which("readelf")
    assert readelf, "readelf (binutils, beside the gcc that built the extension) reads its NEEDED entries"
    dyn = subprocess.run([readelf, "-d", str(built_so)], capture_output=True, text=True, check=True).stdout
    needed = [line for line in dyn.splitlines() if "(NEEDED)" in line]
    assert any("libc.so" in line for line in needed), dyn  # the entries were read: the C library is one
    assert not [line for line in needed if "libcuda" in line or "libpython" in line], needed
