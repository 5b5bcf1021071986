/* cpu_block_v3.c - the CPU E-step's kernels for x86-64-v3 (AVX2, FMA; CMake adds -march=x86-64-v3 and GHF_CPU_BUILD_V3 on x86-64). */
#ifdef GHF_CPU_BUILD_V3
#define GHF_CPU_KERNELS ghf__cpu_kernels_v3
#include "cpu_block_impl.h"
#else
typedef int ghf__cpu_block_v3_unused;
#endif
