# Session 10, call A: numerics of every ws / pingpong variant of new (the v32 QK^T groups; the new ws block_t 32,
# 8-warp variants); new against HEAD (head) and the landed main at the tables' own choices, sm90 and the proxy,
# FlashMLA beside new; memcheck and racecheck of the changed and new variants.
source .gpu/common.sh; BUDGET_S=450; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
SANITIZE=v32_ws_bh16_bt32_w4_s4,v32_pingpong_bh16_bt32_w4_s4,v32_pingpong_bh16_bt32_w4_s2,v32_ws_bh16_bt32_w8_s2,model1_ws_bh16_bt32_w8_s2,v32_ws_bh32_bt32_w8_s2
guarded "h200_check new" 45 new python3 bench/h200_check.py
guarded "h200_check proxy new" 45 new env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 bench/h200_check.py
guarded "peers landed" 40 landed python3 bench/peers.py --no-jit --no-flash --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_landed.json" 2>/dev/null
guarded "peers head" 40 head python3 bench/peers.py --no-jit --no-flash --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_head.json" 2>/dev/null
guarded "peers new" 50 new python3 bench/peers.py --no-jit --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_new.json" 2>/dev/null
guarded "peers proxy landed" 35 landed python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_landed.json" 2>/dev/null
guarded "peers proxy head" 35 head python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_head.json" 2>/dev/null
guarded "peers proxy new" 40 new python3 bench/peers.py --no-jit --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_new.json" 2>/dev/null
guarded "sanitize ws memcheck+racecheck" 60 new python3 bench/sanitize.py --label sm90_ws --variants $SANITIZE --jobs 12 --per-job 1 --deadline-s 55
finish
