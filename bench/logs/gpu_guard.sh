# The GPU call scripts' budget and end, sourced after .gpu/common.sh (bench/logs/issue24_faults/gpu_common.sh):
# guarded LABEL LIMIT SITE cmd... runs step() within what is left of the call's BUDGET_S seconds; finish packs $OUT
# into logs.tgz beside summary.txt and prints the summary.
T0=$(date +%s)
guarded() { local left=$(( BUDGET_S - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
finish() { cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +; cat "$SUMMARY"; }
