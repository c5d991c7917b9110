# Session 7, call 1 (issues 23, 22). new = the committed kernels (83081c0); exp = new with (a) the wg producer in
# half-tile steps (the next half's records loaded while this half is dequantized, carried as 32-bit words; L2
# prefetch two tiles ahead) and (b) every ws/pingpong consumer thread arriving on the empty/merge barriers
# (bench/logs/ws_arrivals patch); main = the landed 61063a9. Numerics + sanitizer of exp, peers of all three.
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 570 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
WS90=model1_pingpong_bh16_bt32_w4_s2,model1_ws_bh16_bt64_w8_s2,v32_pingpong_bh16_bt32_w4_s2,v32_pingpong_bh16_bt32_w4_s4,v32_ws_bh16_bt32_w4_s4
WG=v32_wg_bh64_bt64_w4_s2,model1_wg_bh64_bt64_w4_s2
guarded "wg quick numerics exp" 40 exp python3 .gpu/wg_quick.py
guarded "h200_check exp" 60 exp python3 bench/h200_check.py
SPARSE_MLA_AOT_TARGET=sm89-proxy guarded "h200_check exp proxy" 60 exp python3 bench/h200_check.py
guarded "peers exp r1" 100 exp python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_exp_r1.json" 2>/dev/null
guarded "peers new r1" 100 new python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_new_r1.json" 2>/dev/null
guarded "peers main r1" 85 main python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_main_r1.json" 2>/dev/null
guarded "sanitize exp" 110 exp python3 bench/sanitize.py --label sm90_exp --tools memcheck,racecheck --jobs 7 --per-job 1 --deadline-s 100 --variants $WS90,$WG
guarded "peers exp r2" 100 exp python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_exp_r2.json" 2>/dev/null
guarded "peers new r2" 100 new python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_new_r2.json" 2>/dev/null
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
