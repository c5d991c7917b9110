# Call 3: the proxy's numerics (every shipped ws / pingpong variant of sm89-proxy) and one Nsight Compute profile of
# the pingpong kernel where the sm90 table takes it (v32 h16, 128 rows).
source .gpu/common.sh
step "h200_check proxy" 80 new env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 bench/h200_check.py
step "ncu pingpong v32 h16" 110 new python3 bench/ncu_profile.py --point v32/h16/topk2048:128:pingpong_bh16_bt32_w4_s4x1 --point v32/h16/topk2048:128:ws_bh16_bt64_w8_s2x1
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
