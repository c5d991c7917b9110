"""CPU-only build/import test for the sparse_mla_aot._launcher C extension.

Compiles src/sparse_mla_aot/_launcher.c against the running interpreter's
headers with the limited API, imports it from pytest's tmp_path, and checks
that argument validation works without touching the CUDA driver and that the
binary has no link-time dependency on libcuda.
"""

import ctypes
import importlib.machinery
import importlib.util
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "sparse_mla_aot" / "_launcher.c"


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


# What every driver call raises where libcuda.so.1 is absent (CI, the build host): checked to the letter there.
NO_DRIVER = pytest.mark.skipif(_has_driver(), reason="a CUDA driver is installed; this checks the driver-less error")
NO_DRIVER_MESSAGE = ("sparse_mla_aot: cannot load libcuda.so.1 (libcuda.so.1: cannot open shared object file: "
                     "No such file or directory); a CUDA driver is required to launch kernels")


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
    for fn in (
        "driver_version",
        "use_device",
        "load_module",
        "get_function",
        "launch",
    ):
        assert callable(getattr(launcher, fn))


@NO_DRIVER
def test_driver_version_without_a_driver_names_libcuda(launcher):
    with pytest.raises(RuntimeError, match=f"^{re.escape(NO_DRIVER_MESSAGE)}$"):
        launcher.driver_version()


# launch(function, grid_x, grid_y, grid_z, block_x, shared_bytes, stream, arg_types, *args)
FIXED = (0x1234, 1, 1, 1, 128, 0, 0)


def test_launch_arg_count_mismatch(launcher):
    with pytest.raises(TypeError, match=r"^launch\(\): arg_types has 3 codes but 2 kernel arguments were given$"):
        launcher.launch(*FIXED, b"pil", 1, 2)


def test_launch_too_few_fixed_args(launcher):
    with pytest.raises(TypeError):
        launcher.launch(0x1234, 1, 1)


def test_launch_unknown_type_code(launcher):
    with pytest.raises(ValueError, match=r"^launch\(\): unknown arg type code 'x' at position 1 of arg_types "
                                         r"\(expected one of 'p', 'i', 'l', 'f'\)$"):
        launcher.launch(*FIXED, b"pxi", 1, 2, 3)


def test_launch_too_many_args(launcher):
    with pytest.raises(ValueError):
        launcher.launch(*FIXED, b"i" * 65, *([0] * 65))


def test_launch_int32_overflow_names_position(launcher):
    with pytest.raises(OverflowError, match=r"^launch\(\): kernel argument 2 \(type code 'i'\) is out of int32 "
                                            r"range$"):
        launcher.launch(*FIXED, b"pli", 0, 2**40, 2**31)
    with pytest.raises(OverflowError):
        launcher.launch(*FIXED, b"i", -(2**31) - 1)
    with pytest.raises(OverflowError):
        launcher.launch(*FIXED, b"l", 2**63)
    with pytest.raises(OverflowError):
        launcher.launch(*FIXED, b"p", -1)
    with pytest.raises(OverflowError):
        launcher.launch(*FIXED, b"f", 1e300)


def test_launch_bad_types(launcher):
    with pytest.raises(TypeError):
        launcher.launch(*FIXED, "pi", 0, 1)  # arg_types must be bytes
    with pytest.raises(TypeError):
        launcher.launch(*FIXED, b"i", 1.5)
    with pytest.raises(TypeError):
        launcher.launch(*FIXED, b"f", "x")
    with pytest.raises(ValueError):
        launcher.launch(0, 1, 1, 1, 128, 0, 0, b"")  # NULL function
    with pytest.raises(OverflowError):
        launcher.launch(0x1234, 0, 1, 1, 128, 0, 0, b"")  # grid_x must be >= 1


@NO_DRIVER
def test_launch_valid_args_reach_driver(launcher):
    """Fully valid arguments pass validation and reach the driver, which is absent here."""
    with pytest.raises(RuntimeError, match=f"^{re.escape(NO_DRIVER_MESSAGE)}$"):
        launcher.launch(*FIXED, b"pilf", 0x1000, -5, 2**40, 0.5)


def test_other_functions_validate_first(launcher):
    with pytest.raises(TypeError):
        launcher.load_module(0, "not bytes")
    with pytest.raises(ValueError):
        launcher.load_module(0, b"PTX without NUL")
    with pytest.raises(TypeError):
        launcher.get_function(1, b"name", 0)
    with pytest.raises(ValueError):
        launcher.get_function(0, "kernel", 0)
    with pytest.raises(TypeError):
        launcher.use_device()
    with pytest.raises(OverflowError):
        launcher.use_device(-1)


@NO_DRIVER
def test_use_device_without_a_driver_names_libcuda(launcher):
    with pytest.raises(RuntimeError, match=f"^{re.escape(NO_DRIVER_MESSAGE)}$"):
        launcher.use_device(0)


def test_no_link_time_cuda_dependency(built_so):
    undefined = _dynsyms(built_so, "--undefined-only")
    assert not [s for s in undefined if s.startswith("cu")], undefined
    # The driver is reached only through dlopen/dlsym.
    assert any(s.startswith("dlopen") for s in undefined)
    readelf = shutil.which("readelf")
    if readelf:
        dyn = subprocess.run(
            [readelf, "-d", str(built_so)], capture_output=True, text=True, check=True
        ).stdout
        needed = [l for l in dyn.splitlines() if "(NEEDED)" in l]
        assert not [l for l in needed if "libcuda" in l or "libpython" in l], needed
