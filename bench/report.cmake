# Report benchmark (not a test): `cmake --build BUILD --target bench_report`
# times ghfit-report on a 2,000-fit sweep and on an N = 1e6 fit with --data.
add_custom_target(bench_report
  COMMAND bash ${CMAKE_SOURCE_DIR}/bench/report_bench.sh $<TARGET_FILE:ghfit>
          ${CMAKE_BINARY_DIR}/work/bench_report ${CMAKE_BINARY_DIR}/pyenv
  DEPENDS ghfit USES_TERMINAL)
