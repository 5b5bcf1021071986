# bench_uni1d: portfolio VaR/ES batch timing and its Monte Carlo cross-check
# (a benchmark, not a test).  Run: build/bench_uni1d batch [P] [K]
#                                  build/bench_uni1d mc [N] [seed]
add_executable(bench_uni1d ${CMAKE_SOURCE_DIR}/bench/bench_uni1d.c)
target_link_libraries(bench_uni1d PRIVATE ghfit_core OpenMP::OpenMP_C)
