/* cpu_block.c - picks the CPU E-step's kernels for this CPU (cpu_block.h). */
#include "cpu_block.h"

#include <stdlib.h>
#include <string.h>

extern const ghf_cpu_kernels ghf__cpu_kernels_base;
#ifdef GHF_CPU_BUILD_V3
extern const ghf_cpu_kernels ghf__cpu_kernels_v3;
#endif
#ifdef GHF_CPU_BUILD_V4
extern const ghf_cpu_kernels ghf__cpu_kernels_v4;
#endif

const ghf_cpu_kernels *ghf__cpu_kernels_isa(int isa)
{
    switch (isa) {
    case GHF_CPU_ISA_BASE:
        return &ghf__cpu_kernels_base;
#ifdef GHF_CPU_BUILD_V3
    case GHF_CPU_ISA_V3:
        __builtin_cpu_init();
        return __builtin_cpu_supports("x86-64-v3") ? &ghf__cpu_kernels_v3 : NULL;
#endif
#ifdef GHF_CPU_BUILD_V4
    case GHF_CPU_ISA_V4:
        __builtin_cpu_init();
        return __builtin_cpu_supports("x86-64-v4") ? &ghf__cpu_kernels_v4 : NULL;
#endif
    default:
        return NULL;
    }
}

const ghf_cpu_kernels *ghf__cpu_kernels(void)
{
    int cap = GHF_CPU_ISA_V4;
    const char *e = getenv("GHFIT_CPU_ISA");
    if (e && strcmp(e, "base") == 0) cap = GHF_CPU_ISA_BASE;
    if (e && strcmp(e, "v3") == 0) cap = GHF_CPU_ISA_V3;
    for (int isa = cap; isa > GHF_CPU_ISA_BASE; isa--) {
        const ghf_cpu_kernels *k = ghf__cpu_kernels_isa(isa);
        if (k) return k;
    }
    return &ghf__cpu_kernels_base;
}
