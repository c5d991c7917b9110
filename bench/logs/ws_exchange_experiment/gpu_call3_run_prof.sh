# Where the ws kernels' time goes (Nsight Compute, pipe utilization and stalls), the current kernels (head) beside ws2.
source .gpu/common.sh
P="--point model1/h16/topk512+128:128:ws_bh16_bt64_w8_s2x1 --point v32/h16/topk2048:128:ws_bh16_bt64_w8_s4x1"
for wheel in head ws2; do
  step "ncu $wheel" 150 $wheel python3 bench/ncu_profile.py $P --top 16 --out "$OUT/ncu_$wheel"
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name summary.txt -delete
cat "$SUMMARY"
