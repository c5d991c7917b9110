# Session 8, call 1: the last-wave split ("tail") against the committed main ("base").
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 540 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
SM90_TABLE_VARIANTS=$(cat variants/sm90/*.json | grep '"variant"' | sort -u | sed 's/.*: "\(.*\)",*/\1/' | paste -sd,)
guarded "tail plans sm90" 40 tail python3 .gpu/tail_plans.py
guarded "tail plans proxy" 40 tail env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 .gpu/tail_plans.py
guarded "h200_check tail" 90 tail python3 bench/h200_check.py
guarded "peers tail" 80 tail python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_tail.json" 2>/dev/null
guarded "peers base" 80 base python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_base.json" 2>/dev/null
guarded "tune tail v32 h128" 90 tail python3 -m tuning tune --target sm90 --kv-format v32 --heads 128 --out-dir "$OUT/tune"
guarded "sanitize memcheck tail" 90 tail python3 bench/sanitize.py --label sm90_tail --tools memcheck --jobs 8 --per-job 2 --deadline-s 85 --variants $SM90_TABLE_VARIANTS
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
