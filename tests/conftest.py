import os
import sys
from pathlib import Path

# Triton decides interpreter-or-compiler for its own @jit library functions when it is first imported, so the
# interpreter tests need this before anything imports triton. Compile workers clear it (build._compile_worker_init).
os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "src"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
