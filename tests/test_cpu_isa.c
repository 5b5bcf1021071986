/* test_cpu_isa.c - the CPU E-step's block kernels give the same bits whatever instruction set they were compiled for.
 *
 * src/backend/cpu_block_impl.h is compiled three times: for the baseline
 * (x86-64: SSE2, glibc's software fma), x86-64-v3 (AVX2, FMA) and x86-64-v4
 * (AVX-512), and the backend picks one of those at run time.  On random
 * blocks (full and with an odd tail, rows on the vg face, rows outside the
 * plan) every output of every kernel (packed block, q, zw, the four moments
 * of both paths, the row sums, s4/s5/s6) must be bitwise those of the
 * baseline build.  Instruction sets this build or CPU lacks are skipped
 * (and said so). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_block.h"
#include "model.h"
#include "sample.h"
#include "testutil.h"

enum { B = GHF_CPU_BLOCK, MAXD = GHF_CPU_SMALL_D };

/* everything one block produces, in one buffer */
typedef struct outputs {
    double xp[B * (MAXD + 3)], q[B], zw[B], m[2][4][B], rs[6], s[2 * MAXD + MAXD * MAXD];
    double sw[2 * MAXD + MAXD * MAXD]; /* the sums with observation weights (weighted EM) */
} outputs;

static void run(const ghf_cpu_kernels *f, int d, const double *xb, int nb, const ghf_estep_input *in,
                const ghf_cpu_bessel *bs, outputs *o)
{
    memset(o, 0, sizeof *o);
    f->pack(d, xb, nb, o->xp);
    f->qzw(d, o->xp, nb, in->mu, in->linv, in->w, o->q, o->zw, xb, nb);
    f->moments_ref(bs, o->q, o->zw, nb, o->m[0][0], o->m[0][1], o->m[0][2], o->m[0][3]);
    f->moments_vec(bs, o->q, o->zw, nb, o->m[1][0], o->m[1][1], o->m[1][2], o->m[1][3]);
    f->row_sums(nb, o->m[1][0], o->m[1][1], o->m[1][2], o->m[1][3], o->zw, o->rs);
    static double *tacc;
    if (!tacc) tacc = aligned_alloc(64, (size_t)ghf__cpu_sums_scratch(MAXD) * sizeof(double));
    f->sums(d, o->xp, nb, o->m[1][0], NULL, o->s, o->s + d, o->s + 2 * d, tacc);
    static double wpad[B];
    for (int i = 0; i < B; i++) wpad[i] = i < nb ? 0.25 * (i % 9) : 0.0;
    f->sums(d, o->xp, nb, o->m[1][0], wpad, o->sw, o->sw + d, o->sw + 2 * d, tacc);
}

int main(void)
{
    const char *names[3] = {"baseline", "x86-64-v3", "x86-64-v4"};
    const ghf_cpu_kernels *isas[3];
    for (int k = 0; k < 3; k++) {
        isas[k] = ghf__cpu_kernels_isa(k);
        if (!isas[k]) printf("test_cpu_isa: no %s kernels in this build or on this CPU: not checked\n", names[k]);
    }
    CHECK(isas[0] != NULL, "the baseline kernels exist");
    printf("test_cpu_isa: the backend picks %s\n", ghf__cpu_kernels()->isa);
    static outputs ref, got;
    static ghf_bessel_plan plan;
    static ghf_bessel_fplan fplan;
    const int dims[] = {1, 2, 3, 7, 10, 16, 32, 50, 128};
    const double subs[3][3] = {{-1.5, 2.0, 1.0}, {1.7, 1.1, 0.0}, {0.9, 0.4, 3.0}}; /* gh, vg, gh */
    long compared = 0;
    for (int di = 0; di < 9; di++) {
        const int d = dims[di];
        ghf_rng r;
        ghf_rng_seed(&r, 5, (uint64_t)d);
        double *x = malloc((size_t)B * d * sizeof(double));
        ghf_params t;
        ghf_params_alloc(&t, d);
        for (int si = 0; si < 3; si++) {
            for (int j = 0; j < d; j++) {
                t.mu[j] = 0.1 * j;
                t.gamma[j] = 0.2 * (j % 2 ? -1.0 : 1.0);
                for (int k = 0; k < d; k++) t.sigma[j * d + k] = (j == k) ? 1.0 + 0.05 * j : 0.2;
            }
            t.p = subs[si][0];
            t.a = subs[si][1];
            t.b = subs[si][2];
            ghf_derived g;
            ghf_derived_alloc(&g, d);
            CHECK(ghf_derive(&t, &g) == 0, "derive");
            ghf_estep_input in = {d, t.mu, g.Linv, g.w, g.c, 0};
            /* a plan over part of the rows' range only, so that some rows fall outside */
            const double zlo = fmax(ghf_estep_arg(&g.c, 0.0), 0.3), zhi = ghf_estep_arg(&g.c, 4.0 * d);
            ghf_bessel_plan_setup(&plan, g.c.P, zlo, zhi);
            ghf_bessel_fplan_setup(&fplan, &plan);
            for (int i = 0; i < ghf_bessel_plan_num_nodes(&plan); i++) ghf_bessel_plan_node(&plan, i);
            for (int k = 0; k < ghf_bessel_plan_num_pieces(&plan); k++) {
                ghf_bessel_fplan_fold(&fplan, &plan, k);
                ghf_bessel_plan_finish_piece(&plan, k);
            }
            const ghf_cpu_bessel bs = {&g.c, &plan, &fplan, 0};
            for (int rep = 0; rep < 4; rep++) {
                const int nb = rep % 2 ? B : 1 + (int)(ghf_rng_uniform(&r) * (B - 1));
                for (int i = 0; i < nb * d; i++) x[i] = ghf_rng_normal(&r) * (1.0 + 0.3 * rep);
                for (int j = 0; j < d; j++) x[(nb / 2) * d + j] = t.mu[j]; /* q = 0: the vg face */
                run(isas[0], d, x, nb, &in, &bs, &ref);
                for (int k = 1; k < 3; k++) {
                    if (!isas[k]) continue;
                    run(isas[k], d, x, nb, &in, &bs, &got);
                    CHECK(memcmp(&ref, &got, sizeof ref) == 0, "d=%d sub %d nb=%d: %s != baseline", d, si, nb,
                          names[k]);
                    compared++;
                }
            }
            ghf_derived_free(&g);
        }
        ghf_params_free(&t);
        free(x);
    }
    printf("test_cpu_isa: %ld block runs compared bitwise with the baseline build\n", compared);
    return test_summary("test_cpu_isa");
}
