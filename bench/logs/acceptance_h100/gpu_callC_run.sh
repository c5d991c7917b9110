# Session 9, call C: re-tune the sm90 tables of the 16-32-head shapes and re-sweep the proxy's (the kernels changed
# since their tunes: every consumer thread arriving, 2026-12-06; the last-wave split), with final (ef1dd1f's kernels).
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 500 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
mkdir -p "$OUT/variants/sm90" "$OUT/variants/sm89-proxy"
for shape in "model1 16" "model1 32" "v32 16" "v32 32"; do
  set -- $shape
  guarded "tune sm90 $1 h$2" 95 final python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  cp variants/sm90/$1_h$2.json "$OUT/variants/sm90/" 2>/dev/null
done
for shape in "v32 16" "v32 32" "model1 16" "model1 32"; do
  set -- $shape
  guarded "tune proxy $1 h$2" 70 final env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 -m tuning tune --target sm89-proxy --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  cp variants/sm89-proxy/$1_h$2.json "$OUT/variants/sm89-proxy/" 2>/dev/null
done
cat "$SUMMARY"
