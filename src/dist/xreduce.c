/* xreduce.c - see xreduce.h */
#include "xreduce.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

int ghf_xsum_allreduce(MPI_Comm comm, ghf_xsum *acc, int len)
{
    const int per = GHF_XSUM_K + 1; /* bins and the non-finite count */
    int64_t *buf = malloc((size_t)(len > 0 ? len : 1) * (size_t)per * sizeof(int64_t));
    int fail = buf == NULL, any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, comm);
    if (any) {
        free(buf);
        return 1;
    }
    /* the global top of every accumulator; every rank aligns to it, so that
     * its bins line up with everyone's (empty ones take it too) */
    for (int i = 0; i < len; i++) buf[i] = acc[i].top;
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, len, MPI_INT64_T, MPI_MAX, comm);
    for (int i = 0; i < len && rc == MPI_SUCCESS; i++)
        if (buf[i] != GHF_XSUM_EMPTY) ghf_xsum_align(&acc[i], buf[i]);
    /* bins (exact integer sums) and non-finite counts */
    for (int i = 0; i < len; i++) {
        int64_t *b = buf + (size_t)i * per;
        for (int k = 0; k < GHF_XSUM_K; k++) b[k] = acc[i].top == GHF_XSUM_EMPTY ? 0 : acc[i].bin[k];
        b[GHF_XSUM_K] = acc[i].nonfinite;
    }
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, buf, len * per, MPI_INT64_T, MPI_SUM, comm);
    for (int i = 0; i < len && rc == MPI_SUCCESS; i++) {
        const int64_t *b = buf + (size_t)i * per;
        for (int k = 0; k < GHF_XSUM_K; k++) acc[i].bin[k] = b[k];
        acc[i].nonfinite = b[GHF_XSUM_K];
    }
    free(buf);
    return rc == MPI_SUCCESS ? 0 : 1;
}

int ghf_xreduce_rows(MPI_Comm comm, const double *x, int64_t nrows, int d, int len, ghf_block_fn fn, void *ctx,
                     double *out)
{
    const int nt = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    ghf_xsum *acc = malloc((size_t)nt * (size_t)len * sizeof(ghf_xsum));
    double *part = malloc((size_t)nt * (size_t)len * sizeof(double));
    int fail = !acc || !part, any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, comm);
    if (any) {
        free(acc);
        free(part);
        return 1;
    }
    const int64_t nblk = (nrows + GHF_ROW_BLOCK - 1) / GHF_ROW_BLOCK;
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num();
        ghf_xsum *a = acc + (size_t)t * len;
        double *p = part + (size_t)t * len;
        for (int i = 0; i < len; i++) ghf_xsum_init(&a[i]);
#pragma omp for schedule(static)
        for (int64_t b = 0; b < nblk; b++) {
            const int64_t r0 = b * GHF_ROW_BLOCK;
            const int nb = (int)(nrows - r0 < GHF_ROW_BLOCK ? nrows - r0 : GHF_ROW_BLOCK);
            memset(p, 0, (size_t)len * sizeof(double));
            fn(ctx, x + r0 * d, nb, d, p);
            for (int i = 0; i < len; i++) ghf_xsum_add(&a[i], p[i]);
        }
    }
    for (int t = 1; t < nt; t++)
        for (int i = 0; i < len; i++) ghf_xsum_merge(&acc[i], &acc[(size_t)t * len + i]);
    int rc = ghf_xsum_allreduce(comm, acc, len);
    for (int i = 0; i < len; i++) out[i] = ghf_xsum_value(&acc[i]);
    free(acc);
    free(part);
    return rc;
}
