/* cpu_block_base.c - the CPU E-step's kernels for the compiler's baseline instruction set (every CPU). */
#define GHF_CPU_KERNELS ghf__cpu_kernels_base
#include "cpu_block_impl.h"
