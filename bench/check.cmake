# ghfit check on a 1e8-row file (bench/check_bench.sh): `cmake --build BUILD --target bench_check`
add_custom_target(bench_check
  COMMAND bash ${CMAKE_SOURCE_DIR}/bench/check_bench.sh $<TARGET_FILE:ghfit> ${CMAKE_BINARY_DIR}/work/bench_check
  DEPENDS ghfit USES_TERMINAL)
