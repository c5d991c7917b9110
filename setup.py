"""Builds the wheel: compiles (or reuses) every variant of the default targets with build_tools, stages the
shipped binaries, records, tables and manifest into sparse_mla_aot/kernels/, and builds the native launcher
(C, limited API: one cp310-abi3 wheel for CPython >= 3.10 and any torch; no link to libcuda or torch).

Options (environment): SPARSE_MLA_AOT_TARGETS (comma list, default: the targets marked default in
variants/targets.toml), SPARSE_MLA_AOT_GRID (a reduced grid TOML, used by the CI wheel test),
SPARSE_MLA_AOT_JOBS (compile processes, default: all cores)."""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
VERSION = "0.1.0"


class BuildKernels(build_py):
    """build_py that also builds and stages the kernels (a no-op rebuild when nothing changed)."""

    def run(self):
        super().run()
        sys.path[:0] = [str(ROOT), str(ROOT / "src")]
        from build_tools.package import size_lines, stage
        from build_tools.variant import load_targets

        targets = os.environ.get("SPARSE_MLA_AOT_TARGETS")
        targets = targets.split(",") if targets else [n for n, t in load_targets().items() if t.default]
        command = [sys.executable, "-m", "build_tools", "build", "--target", ",".join(targets), "--quiet-table",
                   "--jobs", os.environ.get("SPARSE_MLA_AOT_JOBS", str(os.cpu_count() or 1))]
        if os.environ.get("SPARSE_MLA_AOT_GRID"):
            command += ["--grid", os.environ["SPARSE_MLA_AOT_GRID"]]
        # A child process: it runs ninja, whose edges run `python -m build_tools`, not this setup script.
        subprocess.run(command, check=True, cwd=ROOT)
        kernels = Path(self.build_lib) / "sparse_mla_aot" / "kernels"
        for line in size_lines(stage(targets, kernels, VERSION), kernels):
            print(line, flush=True)


setup(
    name="sparse-mla-aot",
    version=VERSION,
    description="Prebuilt sparse-MLA decode kernels (Triton AOT cubins) with a batch-size dispatcher",
    package_dir={"": "src"},
    packages=find_packages("src"),
    python_requires=">=3.10",
    install_requires=["torch>=2.11"],
    ext_modules=[Extension(
        "sparse_mla_aot._launcher", ["src/sparse_mla_aot/_launcher.c"],
        define_macros=[("Py_LIMITED_API", "0x030A0000")], py_limited_api=True, libraries=["dl"],
        extra_compile_args=["-O2", "-Wall", "-Werror"],
    )],
    cmdclass={"build_py": BuildKernels},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    zip_safe=False,
)
