# Session 9, call A: issue 23's acceptance run. The landed main (61063a9, the issues' baseline) against final (HEAD)
# in one call, FlashMLA beside final; the proxy's 16-32-head shapes likewise; numerics, memcheck and racecheck.
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 570 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
TABLE=model1_fused_bh16_bt32_w4_s1,model1_fused_bh16_bt64_w4_s1,model1_fused_bh16_bt64_w8_s1,model1_fused_bh32_bt64_w4_s1,model1_fused_bh32_bt64_w8_s3,model1_fused_bh64_bt64_w8_s1,model1_pingpong_bh16_bt32_w4_s2,model1_wg_bh64_bt64_w4_s2,model1_ws_bh16_bt64_w8_s2,v32_fused_bh16_bt64_w4_s1,v32_fused_bh16_bt64_w8_s1,v32_fused_bh64_bt64_w8_s1,v32_pingpong_bh16_bt32_w4_s2,v32_pingpong_bh16_bt32_w4_s4,v32_wg_bh64_bt64_w4_s2,v32_ws_bh16_bt32_w4_s4
guarded "peers landed" 80 landed python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_landed.json" 2>/dev/null
guarded "peers final" 85 final python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_final.json" 2>/dev/null
guarded "peers proxy landed" 60 landed python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_landed.json" 2>/dev/null
guarded "peers proxy final" 60 final python3 bench/peers.py --no-jit --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_final.json" 2>/dev/null
guarded "h200_check final" 60 final python3 bench/h200_check.py
guarded "sanitize wg memcheck+racecheck" 90 final python3 bench/sanitize.py --label sm90_wg --variants v32_wg_bh64_bt64_w4_s2,model1_wg_bh64_bt64_w4_s2 --jobs 8 --per-job 1 --deadline-s 80
guarded "sanitize tables memcheck" 60 final python3 bench/sanitize.py --label sm90_tables --tools memcheck --variants $TABLE --jobs 16 --per-job 1 --deadline-s 55
guarded "ncu v32 h128 4 and 8 rows" 45 final python3 bench/ncu_profile.py --point v32/h128/topk2048:4 --point v32/h128/topk2048:8
guarded "h200_check proxy final" 70 final env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 bench/h200_check.py
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
