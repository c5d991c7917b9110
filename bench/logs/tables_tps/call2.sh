# Session 14, call 2: proxy sweeps of v32 h16 / h32 with main's kernels (wheel .whl/cur), the sm90 model1 h32 table
# re-tuned, then bench/peers.py of cur (every table of calls 1-2 installed) and of .whl/new on the proxy, and of cur on
# sm90 with FlashMLA padded. Run from the repository root with .whl and .gpu carried: bash bench/logs/tables_tps/call2.sh
source .gpu/common.sh; BUDGET_S=300; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
mkdir -p "$OUT/tables/sm90" "$OUT/tables/sm89-proxy"
for t in sm90 sm89-proxy; do cp bench/logs/tables_tps/call1/tables/$t/*.json /tmp/site_cur/sparse_mla_aot/kernels/tables/$t/; done
tune() {  # tune TARGET FORMAT HEADS LIMIT: the table goes into $OUT/tables/TARGET and cur's site
  guarded "tune $1 $2 h$3" $4 cur env SPARSE_MLA_AOT_TARGET=$1 python3 -m tuning tune --target $1 --kv-format $2 \
    --heads $3 --out-dir "$OUT/tune"
  cp variants/$1/$2_h$3.json "$OUT/tables/$1/" && cp variants/$1/$2_h$3.json /tmp/site_cur/sparse_mla_aot/kernels/tables/$1/
}
tune sm89-proxy v32 16 65
tune sm89-proxy v32 32 65
tune sm90 model1 32 150
finish
