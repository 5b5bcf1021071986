# bench_portopt: ghfit optimize's core at d = 100 and 1,000 (min-ES long-only) and a 50-point ES frontier at
# d = 100 (a benchmark, not a test; docs/benchmarks.md).  Run: OMP_NUM_THREADS=1 build/bench_portopt [d ...]
add_executable(bench_portopt ${CMAKE_SOURCE_DIR}/bench/bench_portopt.c)
target_link_libraries(bench_portopt PRIVATE ghfit_core)
