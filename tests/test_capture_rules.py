"""docs/design.md#runtime-rules on CPU: a first call under CUDA-graph capture never loads kernels (clear error instead);
a forced variant that is not loaded cannot be loaded under capture either."""
import pytest
import torch

from sparse_mla_aot import ops
from sparse_mla_aot.reference import make_inputs


@pytest.fixture
def capturing(monkeypatch):
    """Pretend the inputs are on cuda:0 and a graph capture is in progress."""
    monkeypatch.setattr(ops, "check_devices", lambda call: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    monkeypatch.setattr(ops, "_devices", {})


def test_first_call_under_capture_is_a_clear_error_not_a_load(capturing, monkeypatch):
    monkeypatch.setattr(ops, "prepare", lambda index: pytest.fail("prepare() ran under capture"))
    with pytest.raises(RuntimeError, match=r"first called under CUDA-graph capture.*prepare\(device\)"):
        ops.sparse_mla_decode(**make_inputs(1, 1, 16, 64, "model1"))


def test_an_unloaded_variant_is_not_loaded_under_capture(capturing, monkeypatch):
    class Loaded:
        catalog, target, kernels = None, "sm90", {}

        def load(self, names):
            pytest.fail("loaded a module under capture")

    monkeypatch.setitem(ops._devices, 0, Loaded())
    monkeypatch.setattr(ops.dispatch, "choose", lambda *a: ops.dispatch.Choice("v32_fused_bh16_bt16_w8_s2", 8, None, 0,
                                                                            "forced"))
    with pytest.raises(RuntimeError, match=r"v32_fused_bh16_bt16_w8_s2 .* cannot be loaded under CUDA-graph capture"):
        ops.sparse_mla_decode(**make_inputs(1, 1, 16, 64, "v32"))
