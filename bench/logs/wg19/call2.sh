# Session 19, call 2 (issue 22), prepared; not run in session 19 (no device was lent). After call 1: compute-sanitizer
# (memcheck, racecheck) of the candidates' changed variants (hsovl's two halves are ovl's and hs's), and ncu profiles
# of main's and pp's block_h 16 variants at 128 rows (one split). Same wheels as call1.sh; run from the repository
# root with .whl, .ovl and .gpu carried.
source .gpu/common.sh; BUDGET_S=570; source bench/logs/gpu_guard.sh
# The sites other than main come as overlays of main's install (the working tree's 64 MiB carry limit): each
# .ovl/<site>/ holds that wheel's cubins that differ from main's, their records and its manifest (README.md here).
for o in .ovl/*/; do s=$(basename "$o"); rm -rf /tmp/site_$s; cp -r /tmp/site_main /tmp/site_$s && cp -r "$o". /tmp/site_$s/; done
V=v32_wg_bh16_bt64_w4_s2,v32_wg_bh32_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2,model1_wg_bh32_bt64_w4_s2
V16=v32_wg_bh16_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2
for site in pp hspp; do
  guarded "sanitize sm90 $site" 70 $site python3 bench/sanitize.py --label sm90_$site --variants $V16 --jobs 2 --per-job 1 --deadline-s 60
done
for site in ovl hs; do
  guarded "sanitize sm90 $site" 80 $site python3 bench/sanitize.py --label sm90_$site --variants $V --jobs 4 --per-job 1 --deadline-s 70
done
guarded "sanitize sm90 s3" 60 s3 python3 bench/sanitize.py --label sm90_s3 --variants model1_wg_bh16_bt64_w4_s2 --jobs 2 --per-job 1 --deadline-s 50
for site in main pp; do
  guarded "ncu $site h16" 80 $site python3 bench/ncu_profile.py --out "$OUT/ncu_$site" --top 24 \
    --point v32/h16/topk2048:128:wg_bh16_bt64_w4_s2x1 --point model1/h16/topk512+128:128:wg_bh16_bt64_w4_s2x1
done
finish
