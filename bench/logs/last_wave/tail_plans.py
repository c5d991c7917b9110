"""For every table of the device's target: at each batch size, the table's choice and the plan's split rows
(unsplit_rows of the batch's rows), with the variant's wave, so a reader sees which launches the last-wave split
changes."""
import sys
import torch
import sparse_mla_aot
from sparse_mla_aot import dispatch, ops
from sparse_mla_aot.plan import make_plan
from sparse_mla_aot.reference import make_inputs
from sparse_mla_aot.validation import check_arguments

target = sparse_mla_aot.prepare()
kernels = ops._kernels_for(torch.cuda.current_device())
cat = ops.catalog()
print(f"target {target} device {torch.cuda.get_device_name()}")
print(f"{'table':<14} {'b':>4} {'variant':<28} {'S':>3} {'wave':>5} {'units':>6} {'unsplit':>7} {'S_eff':>5}")
for table in cat.tables(target):
    for b in (1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 128):
        ch = dispatch.choose(cat, target, table.kv_format, table.h_q, b)
        kernels.load([ch.variant])
        k = kernels.kernels[ch.variant]
        hb = -(-table.h_q // k.block_h)
        topk = 2048 if table.kv_format == "v32" else 512
        call = check_arguments(**make_inputs(b, 1, table.h_q, topk, table.kv_format, extra_topk=0 if table.kv_format == "v32" else 128, seed=0, num_blocks=64))
        plan = make_plan(call, ch.variant, k.block_h, k.block_t, ch.num_splits, k.wave)
        flag = " *" if 0 < plan.unsplit_rows < b or (ch.num_splits > 1 and plan.num_splits == 1) else ""
        print(f"{table.kv_format}_h{table.h_q:<8} {b:>4} {ch.variant:<28} {ch.num_splits:>3} {k.wave:>5} {b*hb:>6} {plan.unsplit_rows:>7} {plan.num_splits:>5}{flag}")
