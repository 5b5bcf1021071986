# GPU benchmark of the CUDA E-step (not a test): one EM iteration at
# N = 1e7 / 1e8 x d = 10 and N = 1e7 x d = 100, GH and NIG, graph vs eager.
# Run: build/bench_cuda [--quick] [--iters K] [--out FILE]  (scripts/gpu-check.sh runs it)
if(GHFIT_HAVE_CUDA)
  add_executable(bench_cuda ${CMAKE_SOURCE_DIR}/bench/bench_cuda.c)
  target_link_libraries(bench_cuda PRIVATE ghfit_core)
endif()
