# Session 10, call B (same machine as A): the proxy steps that ran past their limits in call A, with more time.
source .gpu/common.sh; BUDGET_S=330; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "peers proxy head" 60 head python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_head.json" 2>/dev/null
guarded "peers proxy new" 70 new python3 bench/peers.py --no-jit --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_new.json" 2>/dev/null
guarded "h200_check proxy new" 80 new env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 bench/h200_check.py
guarded "sanitize ws memcheck+racecheck" 100 new python3 bench/sanitize.py --label sm90_ws --variants v32_ws_bh16_bt32_w4_s4,v32_pingpong_bh16_bt32_w4_s4,v32_ws_bh16_bt32_w8_s2,model1_ws_bh16_bt32_w8_s2 --jobs 8 --per-job 1 --deadline-s 95
finish
