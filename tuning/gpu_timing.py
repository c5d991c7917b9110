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

L2_BYTES = 60 * 2**20  # the H200's L2 (50 MB on an H100): timed replays must read from DRAM, not from here
ROTATION_BYTES = 2 * L2_BYTES  # each timed replay reads at least this many distinct cache bytes (expected)
GENERATED_TOKENS = 262144  # random tokens quantized once (on the GPU); the cache repeats them
CACHE_COPIES = 4  # ... this many times: 1M tokens (600-690 MB), so a replay's draws rarely meet twice
CACHE_TOKENS = GENERATED_TOKENS * CACHE_COPIES
PAGE = 64  # tokens per page of both caches


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


def distinct_bytes(shape: Shape, batch_rows: int, sets: int) -> float:
    """The cache bytes one replay of `sets` calls is expected to read at least once: the main set's tokens are
    uniform draws over CACHE_TOKENS, so draws = sets * rows * topk cover tokens * (1 - exp(-draws / tokens)) of it;
    the extra set's windows (InputSets.extra_windows) are as many uniform draws of PAGE-aligned runs."""
    per_token = BYTES_PER_TOKEN[shape.kv_format]
    covered = 0.0
    for count in (shape.topk, shape.extra_topk):
        draws = sets * batch_rows * count
        covered += CACHE_TOKENS * per_token * -math.expm1(-draws / CACHE_TOKENS) if count else 0.0
    return covered


def set_count(shape: Shape, batch_rows: int) -> int:
    """The fewest rotating sets (at least 2) whose replay reads ROTATION_BYTES distinct cache bytes."""
    sets = 2
    while distinct_bytes(shape, batch_rows, sets) < ROTATION_BYTES:
        sets *= 2
    low, high = sets // 2, sets
    while high - low > 1:  # the smallest count in (low, high] that still reaches it
        middle = (low + high) // 2
        low, high = (middle, high) if distinct_bytes(shape, batch_rows, middle) < ROTATION_BYTES else (low, middle)
    return max(2, high)


class InputSets:
    """Shared caches (the extra set's as large as the main one, like an engine's window cache across layers and
    steps) and set_count(shape, rows) rotating sets of q, indices and window positions per batch size."""

    def __init__(self, shape: Shape, seed: int = 0):
        self.shape = shape
        base = make_inputs(1, 1, shape.h_q, shape.topk, shape.kv_format, num_blocks=GENERATED_TOKENS // PAGE,
                           extra_topk=shape.extra_topk, with_sink=True, device="cuda", seed=seed)
        base["k_cache"] = repeat_pages(base["k_cache"], CACHE_COPIES)
        if shape.extra_topk:  # a cache of its own, as large as the main one
            extra = make_inputs(1, 1, 1, PAGE, shape.kv_format, num_blocks=GENERATED_TOKENS // PAGE, device="cuda",
                                seed=seed + 1)["k_cache"]
            base["extra_k_cache"] = repeat_pages(extra, CACHE_COPIES)
        self.base = base
        self.generator = torch.Generator(device="cuda").manual_seed(seed)

    def sets_for(self, batch_rows: int) -> list[dict]:
        s = self.shape
        sets = []
        for _ in range(set_count(s, batch_rows)):
            inputs = dict(self.base)
            inputs["q"] = torch.randn((batch_rows, 1, s.h_q, D_QK[s.kv_format]), device="cuda",
                                      generator=self.generator).to(torch.bfloat16)
            inputs["indices"] = torch.randint(0, CACHE_TOKENS, (batch_rows, 1, s.topk), device="cuda",
                                              generator=self.generator, dtype=torch.int32)
            if s.extra_topk:
                inputs["extra_indices"] = self.extra_windows(batch_rows)
            sets.append(inputs)
        return sets

    def extra_windows(self, batch_rows: int) -> torch.Tensor:
        """Each row's extra set as an engine's sliding window holds it: extra_topk consecutive tokens from a
        page-aligned start."""
        pages = CACHE_TOKENS // PAGE - -(-self.shape.extra_topk // PAGE)
        start = torch.randint(0, pages + 1, (batch_rows, 1, 1), device="cuda", generator=self.generator) * PAGE
        return (start + torch.arange(self.shape.extra_topk, device="cuda")).to(torch.int32)


def repeat_pages(cache: torch.Tensor, copies: int) -> torch.Tensor:
    """A cache of `copies` times the pages, each copy at its own addresses, with the same page-blocked strides (a
    model1 view's page stride is its padded page, not its row count)."""
    blocks, page_size, heads, width = cache.shape
    storage = cache.as_strided((blocks, cache.stride(0)), (cache.stride(0), 1))
    flat = storage.repeat(copies, 1)
    return flat.as_strided((blocks * copies, page_size, heads, width), cache.stride())


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


def replay_in_turns(graphs: list[torch.cuda.CUDAGraph], calls_per_replay: int, rounds: int,
                    per_round: int) -> list[list[float]]:
    """Per-call times of each graph, replayed in turns (per_round replays of each, `rounds` times), so drift over
    the measurement (clocks, temperature) hits every graph alike; measured one after another, the same launch
    differed by 3% at 1 row (bench/RESULTS.md, 2026-12-06)."""
    times: list[list[float]] = [[] for _ in graphs]
    for _ in range(rounds):
        for graph, graph_times in zip(graphs, times):
            graph_times += replay_times_us(graph, calls_per_replay, per_round)
    return times


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
