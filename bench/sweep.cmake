# Sweep benchmark (not a test): `cmake --build BUILD --target bench_sweep`
# runs 2,000 fits (1,000 rolling windows x GH/NIG, d = 10) with ghfit run on 2 ranks.
add_custom_target(bench_sweep
  COMMAND bash ${CMAKE_SOURCE_DIR}/bench/sweep_bench.sh $<TARGET_FILE:ghfit> -
          ${CMAKE_BINARY_DIR}/work/bench_sweep 2 1000
  DEPENDS ghfit USES_TERMINAL)
# Sweep checkpoint throughput (not a test): `cmake --build BUILD --target
# bench_sweep_ckpt` runs 200,000 tiny fits on one rank with and without
# --checkpoint and prints fits/s early, midway and late.
add_custom_target(bench_sweep_ckpt
  COMMAND bash ${CMAKE_SOURCE_DIR}/bench/sweep_ckpt_bench.sh $<TARGET_FILE:ghfit>
          ${CMAKE_BINARY_DIR}/work/bench_sweep_ckpt 1 200000
  DEPENDS ghfit USES_TERMINAL)
