"""Timing on a GPU host, shared by `tune` and `ab` (METHOD: random inputs, CUDA events, warm-up, graph replay,
median of many, inputs rotated over sets larger than L2). Uses the installed runtime's cubins: no Triton."""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Callable

import torch

import sparse_mla_aot
from sparse_mla_aot.contract import BYTES_PER_TOKEN, D_QK, D_V
from sparse_mla_aot.reference import make_inputs

CACHE_TOKENS = 262144  # one shared cache of ~150 MB: the gathers land mostly outside the H200's 60 MB L2
ROTATION_BYTES = 120 * 2**20  # each timed replay touches at least this much distinct cache (2x L2)
MAX_SETS = 32


@dataclass(frozen=True)
class Shape:
    kv_format: str
    h_q: int
    topk: int
    extra_topk: int

    @property
    def label(self) -> str:
        extra = f"+{self.extra_topk}" if self.extra_topk else ""
        return f"{self.kv_format}/h{self.h_q}/topk{self.topk}{extra}"

    @classmethod
    def parse(cls, label: str) -> "Shape":
        """The inverse of label: 'model1/h64/topk512+128' -> Shape('model1', 64, 512, 128)."""
        match = re.fullmatch(r"(v32|model1)/h(\d+)/topk(\d+)(?:\+(\d+))?", label)
        if match is None:
            raise ValueError(f"shape must look like v32/h128/topk2048 or model1/h64/topk512+128; got {label!r}")
        kv_format, h_q, topk, extra = match.groups()
        return cls(kv_format, int(h_q), int(topk), int(extra or 0))


class InputSets:
    """A shared cache (+ extra cache, sink) and `count` rotating sets of q, indices and lengths per batch size."""

    def __init__(self, shape: Shape, seed: int = 0):
        self.shape = shape
        self.base = make_inputs(1, 1, shape.h_q, shape.topk, shape.kv_format, num_blocks=CACHE_TOKENS // 64,
                                extra_topk=shape.extra_topk, with_sink=True, device="cuda", seed=seed)
        self.generator = torch.Generator(device="cuda").manual_seed(seed)

    def sets_for(self, batch_rows: int) -> list[dict]:
        s = self.shape
        per_call = batch_rows * (s.topk + s.extra_topk) * BYTES_PER_TOKEN[s.kv_format]
        count = max(2, min(MAX_SETS, math.ceil(ROTATION_BYTES / per_call)))
        sets = []
        for _ in range(count):
            inputs = dict(self.base)
            inputs["q"] = torch.randn((batch_rows, 1, s.h_q, D_QK[s.kv_format]), device="cuda",
                                      generator=self.generator).to(torch.bfloat16)
            inputs["indices"] = self._indices(batch_rows, s.topk, CACHE_TOKENS)
            if s.extra_topk:
                extra = self.base["extra_k_cache"]
                inputs["extra_indices"] = self._indices(batch_rows, s.extra_topk, extra.shape[0] * extra.shape[1])
            sets.append(inputs)
        return sets

    def _indices(self, batch_rows: int, count: int, tokens: int) -> torch.Tensor:
        return torch.randint(0, tokens, (batch_rows, 1, count), device="cuda", generator=self.generator,
                             dtype=torch.int32)


def capture(sets: list[dict], decode: Callable | None = None, warmups: int = 2) -> torch.cuda.CUDAGraph:
    """One graph that decodes every set once (decode: the installed op unless given; wrap in dispatch.forcing to
    pin a variant), replayed `warmups` times. The eager call first loads (or, for a JIT peer, compiles and tunes)
    outside capture."""
    decode = decode or sparse_mla_aot.sparse_mla_decode
    decode(**sets[0])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for inputs in sets:
            decode(**inputs)
    for _ in range(warmups):
        graph.replay()
    return graph


def replay_times_us(graph: torch.cuda.CUDAGraph, calls_per_replay: int, replays: int) -> list[float]:
    """Per-call device time of each replay (event pair around it, divided by the calls it holds)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for start, end in zip(starts, ends):
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 / calls_per_replay for s, e in zip(starts, ends)]


def summary(times: list[float]) -> dict:
    ordered = sorted(times)
    n = len(ordered)
    return {"median_us": ordered[n // 2], "p10_us": ordered[n // 10], "p90_us": ordered[(n * 9) // 10], "n": n}


def measure_ceilings() -> dict:
    """The H200's copy bandwidth (bytes read + written, 1 GiB copy) and bf16 matmul rate (8192^3), medians of 20."""
    src = torch.randn(2**28, device="cuda")
    dst = torch.empty_like(src)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def median_ms(fn) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    copy_ms = median_ms(lambda: dst.copy_(src))
    mm_ms = median_ms(lambda: a @ b)
    return {"copy_bytes_per_s": 2 * src.numel() * 4 / (copy_ms / 1e3), "bf16_flops_per_s": 2 * 8192**3 / (mm_ms / 1e3)}


def floor_us(shape: Shape, batch_rows: int, ceilings: dict) -> float:
    """No kernel beats max(bytes it must move / copy bandwidth, its matmul FLOPs / bf16 matrix rate): the gathered
    cache records, q, out and lse; QK^T over d_qk and PV over d_v per head and token."""
    tokens = batch_rows * (shape.topk + shape.extra_topk)
    per_head = D_QK[shape.kv_format] * 2 + D_V * 2 + 4  # q (bf16), out (bf16), lse (fp32)
    moved = tokens * BYTES_PER_TOKEN[shape.kv_format] + batch_rows * shape.h_q * per_head
    flops = 2 * tokens * shape.h_q * (D_QK[shape.kv_format] + D_V)
    return max(moved / ceilings["copy_bytes_per_s"], flops / ceilings["bf16_flops_per_s"]) * 1e6
