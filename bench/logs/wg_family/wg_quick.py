"""Quick numerics of the forced wg variants (1 and 3 splits) before anything else runs."""
import sys, time, torch
from sparse_mla_aot import sparse_mla_decode
from sparse_mla_aot.contract import Variant
from sparse_mla_aot.dispatch import force_spec, forcing
from sparse_mla_aot.reference import check_close, make_inputs, reference_sparse_mla_decode
fails = 0
for kv, shape in (("v32", dict(h_q=128, topk=1024)), ("model1", dict(h_q=64, topk=512, extra_topk=128)),
                  ("v32", dict(h_q=64, topk=2048)), ("model1", dict(h_q=16, topk=256, extra_topk=64))):
    inputs = make_inputs(3, 2, kv_format=kv, with_sink=True, with_topk_length=True, seed=7, device="cuda", **shape)
    ref_out, ref_lse = reference_sparse_mla_decode(**inputs)
    for splits in (1, 3):
        v = Variant(kv, "wg", 64, 64, 4, 2)
        out = torch.full((*inputs["q"].shape[:3], 512), float("nan"), dtype=torch.bfloat16, device="cuda")
        lse = torch.full(inputs["q"].shape[:3], float("nan"), dtype=torch.float32, device="cuda")
        t0 = time.time()
        with forcing(force_spec(v, splits)):
            sparse_mla_decode(**inputs, out=out, lse=lse)
        torch.cuda.synchronize()
        r = check_close(out.float(), lse, ref_out.float(), ref_lse.float())
        fails += not r["ok"]
        print(kv, shape, splits, f"{time.time()-t0:.2f}s", r, flush=True)
print("FAIL" if fails else "all passed", fails)
sys.exit(1 if fails else 0)
