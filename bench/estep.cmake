# bench_estep: the CPU E-step alone, wall and CPU time per call (a benchmark,
# not a test).  Run: mpirun -np 2 build/bench_estep --n 1e6 --d 10 [--path ref]
# (bench/bench_cpu.sh runs it beside whole fits, against an earlier commit).
add_executable(bench_estep ${CMAKE_SOURCE_DIR}/bench/bench_estep.c)
target_link_libraries(bench_estep PRIVATE ghfit_core)
