# Session 15, call 3: where the consumers' time goes, profiled alone (the consumer_only build: after the first ring's
# tiles the producer only signals full slots) and in main's kernels (none): bench/ncu_profile.py, then ncu's shared
# memory counters (wavefronts, bank conflicts, shared load/store instructions) of the same launches; first, on an H200
# only, bench/peers.py of main's wheel (.whl/cur: 5f5d8ba, sm90 + sm89-proxy) for issue 22's table.
source .gpu/common.sh; BUDGET_S=200; source bench/logs/gpu_guard.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
  guarded "peers sm90 cur" 70 cur python3 bench/peers.py --no-jit --shapes $SMALL
  guarded "peers proxy cur" 70 cur python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL
fi
M=model1/h16/topk512+128:128
guarded "ncu consumer_only" 80 consumer_only python3 bench/ncu_profile.py --point $M:ws_bh16_bt32_w4_s2x1 \
  --point $M:pingpong_bh16_bt32_w4_s2x1
SMEM=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed
for site in consumer_only none; do
  for p in $M:ws_bh16_bt32_w4_s2x1; do
    guarded "smem $site ${p%%/*}" 40 $site ncu --clock-control none -k regex:sparse_mla_split --launch-skip 3 \
      --launch-count 1 --metrics $SMEM python3 bench/ncu_profile.py --child $p
  done
done
finish
