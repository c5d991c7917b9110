"""sparse_mla_aot: prebuilt (AOT-compiled) sparse-MLA decode kernels with a batch-size dispatcher.

Importing the package imports neither Triton nor torch and loads nothing onto a GPU (build tools read its
catalog without torch). The public functions load on first attribute access, which also registers the
torch custom op `torch.ops.sparse_mla_aot.sparse_mla_decode`; prepare() loads kernels before graph capture."""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {"sparse_mla_decode": "ops", "prepare": "ops", "explain": "ops", "flash_mla_with_kvcache": "ops",
            "sparse_mla_decode_op": "custom_op"}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sparse_mla_aot' has no attribute {name!r}")
    importlib.import_module("sparse_mla_aot.custom_op")  # registers the custom op alongside the plain function
    value = getattr(importlib.import_module(f"sparse_mla_aot.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
