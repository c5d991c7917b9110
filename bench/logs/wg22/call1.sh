# Session 22, call 1 (issue 22): on an H200, session 21's call 3 (issue 22's table for main on both targets, the
# gathers' ceiling, ncu, then the sm90 16-32-head re-tunes); on any other GPU, session 21's call 4 (the ring8 gate:
# pingpong s2/s4/s8 tuned in one run per shape, then memcheck and racecheck of the s8 cubins), since call 2 already
# measured main's table and the ceilings on an H100. Run from the repository root with .whl and .gpu carried.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/logs/wg21/call3.sh
fi
BUDGET_S_OVERRIDE=${BUDGET_S_OVERRIDE:-500} exec bash bench/logs/wg21/call4.sh
