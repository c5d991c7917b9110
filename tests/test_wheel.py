"""The wheel, built from the reduced CI grid (SPARSE_MLA_AOT_GRID, documented in setup.py and the README),
installed into a fresh venv without Triton: import (the native launcher too), manifest, tables and explain() for
every row; and a copy of the installed package, tampered with, refuses to load."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from build_tools.variant import load_targets
from sparse_mla_aot.contract import KV_FORMATS, SUPPORTED_H_Q

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGETS = sorted(name for name, target in load_targets().items() if target.default)


def _pin(requirements: str, package: str) -> str:
    """The version `requirements` pins `package` to (package==version)."""
    lines = (ROOT / requirements).read_text().splitlines()
    return next(line.split("==", 1)[1].strip() for line in lines if line.startswith(f"{package}=="))


TRITON_PIN = _pin("requirements-build.txt", "triton")  # the manifest must name the Triton the build pins
TORCH_PIN = _pin("requirements-test.txt", "torch")

CHECK = r"""
import hashlib, json, sys
import sparse_mla_aot
from sparse_mla_aot.catalog import Catalog
assert "triton" not in sys.modules, "importing sparse_mla_aot imported triton"
try:
    import triton  # noqa: F401
    raise SystemExit("triton is importable in the test venv")
except ModuleNotFoundError:
    pass
# the wheel's own native launcher, not a source tree's: imports without a driver, agrees with launch.py's packing
import os
from sparse_mla_aot import _launcher, launch
assert os.path.dirname(_launcher.__file__) == os.path.dirname(sparse_mla_aot.__file__), _launcher.__file__
assert _launcher.__file__.endswith(".abi3.so"), _launcher.__file__
assert _launcher.SPEC_BYTES == launch.SPEC_BYTES, (_launcher.SPEC_BYTES, launch.SPEC_BYTES)
try:
    _launcher.launch(b"short", 0)
    raise SystemExit("_launcher.launch accepted a spec of the wrong length")
except ValueError as error:
    assert "spec must be bytes of length" in str(error), error
catalog = Catalog()
manifest = catalog.manifest
checked, explained = 0, 0
for target in manifest["targets"]:
    binaries = catalog.binaries(target)  # sm121 runs sm120's
    for name, art in manifest["targets"][binaries]["artifacts"].items():
        data = (catalog.root / binaries / art["binary"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == art["sha256"], name
        assert catalog.binary(target, name) == data
        checked += 1
    shipped = set(catalog.shipped(target))
    for table in catalog.tables(target):
        previous = 0
        for i, row in enumerate(table.rows):
            assert row.variant in shipped, (target, table.kv_format, table.h_q, row)
            batch_rows = row.max_batch_rows if row.max_batch_rows is not None else previous + 1
            text = sparse_mla_aot.explain(batch_rows, 1, table.h_q, table.kv_format, target=target)
            assert row.variant in text and f"row {i}" in text, text
            previous = batch_rows
            explained += 1
print(json.dumps({"binaries": checked, "rows": explained, "targets": sorted(manifest["targets"]),
                  "version": sparse_mla_aot.__version__, "triton": manifest["triton_version"]}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    env = dict(os.environ, SPARSE_MLA_AOT_GRID=str(ROOT / "variants" / "grid-ci.toml"),
               SPARSE_MLA_AOT_BUILD_DIR=str(tmp / "build"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp / "dist"), str(ROOT)], check=True, env=env, cwd=tmp)
    (built,) = (tmp / "dist").glob("*.whl")
    return built


def test_wheel_is_abi3_and_holds_kernels_tables_and_manifest(wheel):
    assert wheel.name.endswith("-cp310-abi3-linux_x86_64.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("sparse_mla_aot/_launcher") and n.endswith(".abi3.so") for n in names)
    manifest = json.loads(zipfile.ZipFile(wheel).read("sparse_mla_aot/kernels/manifest.json"))
    assert sorted(manifest["targets"]) == DEFAULT_TARGETS
    assert manifest["triton_version"] == TRITON_PIN
    for target, entry in manifest["targets"].items():
        declared = load_targets()[target]
        assert (entry["capability"], entry["sm_count"]) == (list(declared.capability), declared.sm_count)
        assert entry["binaries"] == declared.binaries
        assert f"sparse_mla_aot/kernels/{declared.binaries}/combine.cubin" in names
        assert any(n.startswith(f"sparse_mla_aot/kernels/tables/{target}/") for n in names)
    # one Blackwell set: sm121 runs sm120's sm_120f cubins, which the wheel holds once
    assert manifest["targets"]["sm121"]["binaries"] == "sm120"
    assert not any(n.startswith("sparse_mla_aot/kernels/sm121/") for n in names)
    assert not any(n.endswith(".py") and "/kernels/" in n for n in names)


@pytest.fixture(scope="module")
def venv_python(wheel, tmp_path_factory) -> Path:
    """A fresh venv with torch and the wheel, no Triton."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"torch=={TORCH_PIN}"], check=True)
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True)
    return venv / "bin" / "python"


def test_installed_in_a_fresh_venv_without_triton(venv_python, tmp_path):
    result = subprocess.run([str(venv_python), "-c", CHECK], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["targets"] == DEFAULT_TARGETS and summary["binaries"] > len(DEFAULT_TARGETS)
    committed = [json.loads(p.read_text()) for t in summary["targets"] for p in (ROOT / "variants" / t).glob("*.json")]
    assert len(committed) == len(DEFAULT_TARGETS) * len(KV_FORMATS) * len(SUPPORTED_H_Q)  # one per supported shape
    assert summary["rows"] == sum(len(table["rows"]) for table in committed)


TAMPERED = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import sparse_mla_aot
from sparse_mla_aot.catalog import Catalog
assert sparse_mla_aot.__file__.startswith(sys.argv[1]), sparse_mla_aot.__file__
catalog = Catalog()
errors = {}
intact = next(name for name in catalog.manifest["targets"]["sm90"]["artifacts"] if name != "combine")
for what, (target, name) in (("sha256", ("sm90", "combine")), ("triton", ("sm120", "combine")),
                             ("shared", ("sm121", "combine")), ("intact", ("sm90", intact))):
    try:
        catalog.binary(target, name)
        errors[what] = None
    except RuntimeError as error:
        errors[what] = str(error)
try:
    catalog.target_for_capability((8, 0))
except RuntimeError as error:
    errors["hardware"] = str(error)
print(json.dumps(errors))
"""


def test_a_tampered_copy_of_the_installed_package_refuses_to_load(venv_python, tmp_path):
    installed = subprocess.run([str(venv_python), "-c", "import sparse_mla_aot, os; "
                                "print(os.path.dirname(sparse_mla_aot.__file__))"],
                               capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    copy = tmp_path / "site"
    shutil.copytree(installed, copy / "sparse_mla_aot")
    kernels = copy / "sparse_mla_aot" / "kernels"
    cubin = kernels / "sm90" / "combine.cubin"
    data = bytearray(cubin.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    cubin.write_bytes(bytes(data))
    record_path = kernels / "sm120" / "combine.json"
    record = json.loads(record_path.read_text())
    record["triton_version"] = "3.6.0"
    record_path.write_text(json.dumps(record))
    result = subprocess.run([str(venv_python), "-c", TAMPERED, str(copy)], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert "sm90/combine.cubin has sha256" in errors["sha256"] and "reinstall the wheel" in errors["sha256"]
    assert f"compiled by Triton 3.6.0, the package by Triton {TRITON_PIN}" in errors["triton"]
    assert errors["shared"] == errors["triton"]  # sm121 runs sm120's binaries and records
    assert errors["intact"] is None
    assert "no kernels for compute capability 8.0" in errors["hardware"]
    assert all(f"{t} (compute capability" in errors["hardware"] for t in DEFAULT_TARGETS)


def test_the_faulty_copies_of_a_wheel_load_but_are_wrong_or_refused(wheel, tmp_path):
    """bench/faulty_kernels.py (how the GPU scripts are shown to fail): the halved combine kernel passes the
    package's integrity checks (it loads and runs: only numerics catch it); the swapped tables are refused."""
    from sparse_mla_aot.catalog import Catalog
    from sparse_mla_aot.contract import COMBINE_NAME

    made = subprocess.run([sys.executable, str(ROOT / "bench" / "faulty_kernels.py"), str(wheel), "--out",
                           str(tmp_path)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    intact = tmp_path / "intact"
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith("sparse_mla_aot/kernels/"):
                archive.extract(name, intact)
    intact_catalog = Catalog(intact / "sparse_mla_aot" / "kernels")
    halved, swapped = Catalog(tmp_path / "combine-halved"), Catalog(tmp_path / "table-format")
    for target in DEFAULT_TARGETS:
        binary = halved.binary(target, COMBINE_NAME)  # the manifest's sha256 follows the new binary
        assert binary != intact_catalog.binary(target, COMBINE_NAME)
        assert halved.records(target)[COMBINE_NAME].sha256 == hashlib.sha256(binary).hexdigest()
        table = intact_catalog.tables(target)[0]
        with pytest.raises(ValueError, match=r"row 0 names (v32|model1)_\w+, (a (v32|model1) variant; the table is "
                                             r"for kv_format|which is not a shipped split variant)"):
            swapped.table(target, table.kv_format, table.h_q)
    assert not list(tmp_path.glob(".*"))  # no staging folder left behind
