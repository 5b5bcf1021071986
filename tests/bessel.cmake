# Bessel K numerical core (kernels/bessel*.h): accuracy tests, a plain-C11
# build of the public headers, and an nvcc compile-only check.
ghf_unit_test(NAME test_bessel SOURCES tests/test_bessel.c LABELS bessel)
target_compile_definitions(test_bessel PRIVATE GHF_TEST_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# The public headers with a plain C compiler: cc -std=c11 x.c -lm -I kernels.
add_test(NAME test_bessel_plain_c11
  COMMAND sh -c "\"$0\" -std=c11 -Wall -Wextra -Wshadow -Werror -I\"$1/kernels\" \"$1/tests/test_bessel_plain.c\" -o \"$2/test_bessel_plain\" -lm && \"$2/test_bessel_plain\""
          ${CMAKE_C_COMPILER} ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(test_bessel_plain_c11 PROPERTIES LABELS "unit;bessel" TIMEOUT 120)

# The headers under nvcc: compile a __global__ kernel that calls the fused
# evaluator and the plan (no GPU needed; skipped when nvcc is absent).
find_program(GHF_BESSEL_NVCC nvcc HINTS /usr/local/cuda/bin NO_CACHE)
if(GHF_BESSEL_NVCC)
  add_test(NAME test_bessel_nvcc_compile
    COMMAND ${GHF_BESSEL_NVCC} -arch=sm_90 --fmad=false -I${CMAKE_SOURCE_DIR}/kernels
            -c ${CMAKE_SOURCE_DIR}/tests/bessel_nvcc.cu -o ${CMAKE_CURRENT_BINARY_DIR}/bessel_nvcc.o)
  set_tests_properties(test_bessel_nvcc_compile PROPERTIES LABELS "unit;bessel;nvcc" TIMEOUT 300)
endif()
