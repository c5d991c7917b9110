# Session 9, call B: the rows where call A had final slower than the landed main (v32 h128 at 2 and 4 rows, model1
# h32 at 96 rows; the proxy at 4 rows), measured in turns without FlashMLA in the process; and at v32 h128's 2 and
# 4 rows the table's choice against the wg kernel at 16 splits, alternated in one process (tuning ab).
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 400 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
for r in 1 2 3; do
  for w in landed final; do
    guarded "turn$r sm90 $w" 40 $w python3 bench/peers.py --no-jit --no-flash --shapes v32/h128/topk2048,model1/h32/topk512+128 --batches 1,2,4,8,96; mv "$OUT/peers_sm90.json" "$OUT/peers_turn${r}_$w.json" 2>/dev/null
  done
done
for r in 1 2; do
  for w in landed final; do
    guarded "turn$r proxy $w" 40 $w python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes model1/h16/topk512+128,model1/h32/topk512+128 --batches 2,4,8; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_turn${r}_$w.json" 2>/dev/null
  done
done
guarded "ab table vs wg x16 v32 h128" 60 final python3 -m tuning ab --a table --b family=wg,block_h=64,block_t=64,num_warps=4,num_stages=2,num_splits=16 --kv-format v32 --heads 128 --batches 2,4 --rounds 20
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
