/* cpu_block_isa.c - src/backend/cpu_block.c compiled for one instruction set (GHF_ISA), its functions renamed (tests/test_cpu_isa.c). */
#define GHF_CPU_NO_CLONES 1
#define GHF_ISA_CAT2(a, b) a##_##b
#define GHF_ISA_CAT(a, b) GHF_ISA_CAT2(a, b)
#define ghf__cpu_pack GHF_ISA_CAT(GHF_ISA, pack)
#define ghf__cpu_qzw_small GHF_ISA_CAT(GHF_ISA, qzw_small)
#define ghf__cpu_moments_ref GHF_ISA_CAT(GHF_ISA, moments_ref)
#define ghf__cpu_moments_vec GHF_ISA_CAT(GHF_ISA, moments_vec)
#define ghf__cpu_row_sums GHF_ISA_CAT(GHF_ISA, row_sums)
#define ghf__cpu_sums_small GHF_ISA_CAT(GHF_ISA, sums_small)
#include "cpu_block.c"
