# Session 13, call 4: branch two-per-sm (lazy-rescale's ws consumer + two 4-warp ws programs per SM on sm90), wheel
# .whl/tps (grid-ci, sm90 + proxy). Numerics on both targets, the sm90 16-32-head tables re-tuned with its kernels and
# installed into its site on the device, then bench/peers.py of main's wheel (.whl/new) and tps in one call.
# Run from the repository root with .whl and .gpu carried: bash bench/logs/consumer_chains/call4.sh
source .gpu/common.sh; BUDGET_S=570; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
mkdir -p "$OUT/tables"
guarded "h200_check sm90 tps" 60 tps python3 bench/h200_check.py
guarded "h200_check proxy tps" 70 tps env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 bench/h200_check.py
for spec in v32/32 model1/32 v32/16 model1/16; do
  IFS=/ read -r fmt h <<<"$spec"
  guarded "tune sm90 $fmt h$h" 100 tps env SPARSE_MLA_AOT_TARGET=sm90 python3 -m tuning tune --target sm90 \
    --kv-format $fmt --heads $h --out-dir "$OUT/tune"
  cp variants/sm90/${fmt}_h$h.json "$OUT/tables/" && cp variants/sm90/${fmt}_h$h.json /tmp/site_tps/sparse_mla_aot/kernels/tables/sm90/
  if [ "$spec" = "v32/16" ]; then  # the peers before the last tune, in case it runs out of time
    guarded "peers sm90 new" 45 new python3 bench/peers.py --no-jit --no-flash --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_new.json" 2>/dev/null
    guarded "peers sm90 tps" 55 tps python3 bench/peers.py --no-jit --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_tps.json" 2>/dev/null
  fi
done
guarded "peers sm90 tps after model1 h16" 40 tps python3 bench/peers.py --no-jit --no-flash --shapes model1/h16/topk512+128; mv "$OUT/peers_sm90.json" "$OUT/peers_tps_model1_h16.json" 2>/dev/null
finish
