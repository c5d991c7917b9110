"""Device time of the dispatched op per batch size (CUDA-graph replay, CUDA events, median of many), inputs
rotated over 16 index/query sets that gather from one cache several times larger than L2; beside the floor
from the measured copy bandwidth and bf16 matrix rate. Prints a table; writes JSON to $OUT/decode_time.json.

    python bench/decode_time.py                # on a GPU host with sparse_mla_aot installed
"""
from __future__ import annotations

import json
import os
import statistics

import torch

import sparse_mla_aot
from sparse_mla_aot.kv_cache import KV_FORMAT_DIMS as D_QK
from sparse_mla_aot.reference import make_inputs
from sparse_mla_aot.validation import BYTES_PER_TOKEN

SHAPES = {  # name: (kv_format, h_q, topk, extra_topk)
    "v32/h128/topk2048": ("v32", 128, 2048, 0),
    "model1/h64/topk512+128": ("model1", 64, 512, 128),
    "model1/h16/topk512": ("model1", 16, 512, 0),
}
BATCHES = (1, 8, 32, 64, 128)
CACHE_TOKENS = 262144
SETS = 16
REPLAYS = 200


def measure_ceilings() -> dict:
    """Copy bandwidth (bytes read + written) and bf16 matmul rate on random data, medians of 20."""
    src = torch.randn(2**28, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def median_ms(fn):
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


def time_shape(base: dict, kv_format: str, h_q: int, topk: int, extra_topk: int, batch: int) -> dict:
    """base holds the shared cache (CACHE_TOKENS tokens), sink and extra cache; q and indices rotate."""
    gen = torch.Generator(device="cuda").manual_seed(batch)
    graphs, outputs = [], []
    for _ in range(SETS):
        inputs = dict(base)
        inputs["q"] = torch.randn((batch, 1, h_q, D_QK[kv_format]), device="cuda", generator=gen).to(torch.bfloat16)
        inputs["indices"] = torch.randint(0, CACHE_TOKENS, (batch, 1, topk), device="cuda", generator=gen,
                                          dtype=torch.int32)
        if extra_topk:
            extra_tokens = inputs["extra_k_cache"].shape[0] * inputs["extra_k_cache"].shape[1]
            inputs["extra_indices"] = torch.randint(0, extra_tokens, (batch, 1, extra_topk), device="cuda",
                                                    generator=gen, dtype=torch.int32)
        sparse_mla_aot.sparse_mla_decode(**inputs)  # eager first: loads any variant the table names
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs.append(sparse_mla_aot.sparse_mla_decode(**inputs))
        graphs.append(graph)
    for graph in graphs:
        graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPLAYS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPLAYS)]
    for i in range(REPLAYS):
        starts[i].record()
        graphs[i % SETS].replay()
        ends[i].record()
    torch.cuda.synchronize()
    times_us = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    tokens = batch * (topk + extra_topk)
    return {"median_us": times_us[REPLAYS // 2], "p10_us": times_us[REPLAYS // 10],
            "p90_us": times_us[REPLAYS * 9 // 10], "tokens": tokens,
            "explain": sparse_mla_aot.explain(batch, 1, h_q, kv_format)}


def main() -> None:
    sparse_mla_aot.prepare()
    ceilings = measure_ceilings()
    results = {"device": torch.cuda.get_device_name(), "ceilings": ceilings, "shapes": {}}
    print(f"{results['device']}: copy {ceilings['copy_bytes_per_s'] / 1e12:.2f} TB/s, "
          f"bf16 matmul {ceilings['bf16_flops_per_s'] / 1e12:.0f} TFLOP/s")
    for name, (kv_format, h_q, topk, extra_topk) in SHAPES.items():
        print(f"\n{name}\n  {'b':>4} {'median us':>10} {'p10':>8} {'p90':>8} {'floor us':>9} {'floor/ours':>10}  variant")
        rows = []
        base = make_inputs(1, 1, h_q, topk, kv_format, num_blocks=CACHE_TOKENS // 64, extra_topk=extra_topk,
                           with_sink=True, device="cuda", seed=h_q)
        for batch in BATCHES:
            r = time_shape(base, kv_format, h_q, topk, extra_topk, batch)
            bytes_moved = r["tokens"] * BYTES_PER_TOKEN[kv_format] + batch * h_q * (D_QK[kv_format] * 2 + 512 * 2 + 4)
            flops = 2 * batch * h_q * (topk + extra_topk) * (D_QK[kv_format] + 512)
            floor_us = max(bytes_moved / ceilings["copy_bytes_per_s"], flops / ceilings["bf16_flops_per_s"]) * 1e6
            r.update(batch=batch, floor_us=floor_us, bytes=bytes_moved, flops=flops)
            rows.append(r)
            print(f"  {batch:>4} {r['median_us']:>10.1f} {r['p10_us']:>8.1f} {r['p90_us']:>8.1f} {floor_us:>9.1f} "
                  f"{floor_us / r['median_us']:>10.2f}  {r['explain'].split(',')[0]}, "
                  f"{r['explain'].split(',')[1].split('(')[0].strip()}")
        results["shapes"][name] = rows
    with open(os.path.join(os.environ.get("OUT", "."), "decode_time.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
