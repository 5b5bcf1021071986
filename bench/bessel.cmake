# bench_bessel: throughput of the Bessel K evaluators against GSL (a
# benchmark, not a test).  Run: build/bench_bessel [out.txt] [grid.csv]
pkg_check_modules(GHF_BESSEL_GSL IMPORTED_TARGET gsl)
if(GHF_BESSEL_GSL_FOUND)
  add_executable(bench_bessel ${CMAKE_SOURCE_DIR}/bench/bench_bessel.c)
  target_include_directories(bench_bessel PRIVATE ${CMAKE_SOURCE_DIR}/kernels)
  target_compile_definitions(bench_bessel PRIVATE GHF_BENCH_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_link_libraries(bench_bessel PRIVATE PkgConfig::GHF_BESSEL_GSL ${MATH_LIB})
else()
  message(STATUS "bench_bessel: GSL not found, not built")
endif()
