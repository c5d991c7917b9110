# Session 12, call 2 (same H100 as call 1, gpu_call_lazy.sh): the tunes call 1 had no time for, with the lazyall
# wheel's kernels (its sm90 model1 h16 tune ran past its 85 s there). Run from the repository root with .whl and
# .gpu carried: bash bench/logs/lazy_rescale/gpu_call_tune.sh
source .gpu/common.sh; BUDGET_S=500; source bench/logs/gpu_guard.sh; source bench/logs/lazy_rescale/tune_table.sh
tune_table sm90 model1 16 140; tune_table sm90 v32 32 85; tune_table sm89-proxy v32 32 80
tune_table sm90 model1 32 100; tune_table sm89-proxy model1 32 90
finish
