# sanitize.py against the faulty combine (call 1 hit a bug in its default deadline); the same reduced commands on
# the intact package (they pass); the sm90 ws racecheck; h64/h128 new vs landed main.
source .gpu/common.sh
SAN_VARIANTS=model1_ws_bh16_bt64_w8_s2,v32_fused_bh16_bt64_w8_s1
rm -rf /tmp/k_combine-halved && cp -a /tmp/site_new/sparse_mla_aot/kernels /tmp/k_combine-halved && cp -a .gpu/overlay/combine-halved/. /tmp/k_combine-halved/
SPARSE_MLA_AOT_KERNEL_DIR=/tmp/k_combine-halved step "fault=combine-halved sanitize" 100 new python3 bench/sanitize.py --label fault-combine-halved --tools memcheck --variants $SAN_VARIANTS --jobs 2 --per-job 1
step "intact sanitize" 100 new python3 bench/sanitize.py --label intact --tools memcheck --variants $SAN_VARIANTS --jobs 2 --per-job 1
step "intact h200_check" 120 new python3 bench/h200_check.py
step "intact peers" 80 new python3 bench/peers.py --no-jit --no-flash --shapes model1/h16/topk512+128 --batches 1,8
step "intact host_overhead" 60 new python3 bench/host_overhead.py --calls 200
step "intact compile_check" 150 new python3 bench/compile_check.py
WS=$(PYTHONPATH=/tmp/site_new python3 -c "
from sparse_mla_aot.catalog import Catalog
print(','.join(n for n, r in sorted(Catalog().shipped('sm90').items()) if r.variant and r.variant.family == 'ws'))")
step "ws racecheck sm90" 230 new python3 bench/sanitize.py --label sm90_ws --tools racecheck --jobs 16 --per-job 1 --deadline-s 200 --variants $WS
for wheel in new main; do  # FlashMLA once, beside the new wheel
  step "h64-h128 $wheel" 120 $wheel python3 bench/peers.py --no-jit --shapes model1/h64/topk512+128,v32/h64/topk2048,v32/h128/topk2048 --batches 1,8,32,64,128 $([ $wheel = main ] && echo --no-flash)
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name summary.txt -delete
cat "$SUMMARY"
