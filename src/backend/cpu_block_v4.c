/* cpu_block_v4.c - the CPU E-step's kernels for x86-64-v4 (AVX-512; CMake adds -march=x86-64-v4 and GHF_CPU_BUILD_V4 on x86-64). */
#ifdef GHF_CPU_BUILD_V4
#define GHF_CPU_KERNELS ghf__cpu_kernels_v4
#include "cpu_block_impl.h"
#else
typedef int ghf__cpu_block_v4_unused;
#endif
