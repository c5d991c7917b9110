# tune_table TARGET FMT HEADS LIMIT: re-tunes one table with the lazyall wheel's kernels (sourced after gpu_guard.sh).
# The tune writes variants/TARGET/FMT_hHEADS.json on the device; a copy comes back as $OUT/tables/TARGET_FMT_hHEADS.json.
tune_table() {
  local target=$1 fmt=$2 h=$3 limit=$4; mkdir -p "$OUT/tables"
  guarded "tune $target $fmt h$h" "$limit" lazyall env SPARSE_MLA_AOT_TARGET=$target \
    python3 -m tuning tune --target $target --kv-format $fmt --heads $h --out-dir "$OUT/tune_$target"
  cp variants/$target/${fmt}_h$h.json "$OUT/tables/${target}_${fmt}_h$h.json" 2>/dev/null
}
