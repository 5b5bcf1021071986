/* em_sample.c - the subsample start of a large data set (em_internal.h).
 *
 * On N >= GHF_SAMPLE_MIN_N rows the starts of a fit (the race of
 * em_start.c: every subordinator candidate, from the plain and the robust
 * moments, a few EM iterations each) run on a weighted sample: every k-th
 * row, k = floor(N / GHF_SAMPLE_ROWS), counted in the rows' global order so
 * that every rank count takes the same rows, and every row far out (see
 * ghf__em_sample_open); the winner, judged by one E-step on all rows,
 * starts the EM on all rows.  Every rank holds the whole sample and races
 * alone on it (a CPU backend on MPI_COMM_SELF; its sums are exact, so every
 * rank finds the same winner, and rank 0's is broadcast): the race's
 * E-steps wait for no other rank, which on a loaded machine costs more
 * than the rows.  The starts then cost about size / k of their E-steps on
 * all rows.  (Fitting the winner to convergence on the sample
 * first was tried and dropped: the sample's optimum is no closer to the full
 * one than the race's winner in the log-likelihood on all rows, its
 * sampling error being about k times the full data's, and the EM on all
 * rows took as many iterations from either.)  What follows is the fit on all
 * rows as before: its answer is a maximum of the full likelihood, and GH's
 * nested NIG start (em_nested.c) and its end-of-fit check run on all rows.
 * A nested run (GH's NIG start) uses its parent's sample. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "em_internal.h"

/* The rows of the sample: about GHF_SAMPLE_ROWS, or the test hook's
 * GHFIT_TEST_SAMPLE=ROWS (a sample of about ROWS rows on any data set of at
 * least 2 ROWS rows: the tests run this path on small data). */
static int64_t sample_rows(int64_t n)
{
    const char *s = getenv("GHFIT_TEST_SAMPLE");
    const long long v = s && *s ? atoll(s) : 0;
    if (v > 0) return n >= 2 * v ? v : 0;
    return n >= GHF_SAMPLE_MIN_N ? GHF_SAMPLE_ROWS : 0;
}

/* A row far out: some column more than GHF_SAMPLE_FAR_Z robust standard
 * deviations (lim) from the robust mean rm; none without robust moments. */
#define GHF_SAMPLE_FAR_Z 10.0
static int far_row(const double *x, const double *rm, const double *lim, int d)
{
    if (!rm) return 0;
    for (int j = 0; j < d; j++)
        if (!(fabs(x[j] - rm[j]) <= lim[j])) return 1;
    return 0;
}

/* Opens the sample when the fit starts from its moments on enough rows
 * (no checkpoint, no warm start, no rows with missing coordinates).  The
 * sample is stratified: every row far out (far_row: the gross outliers that
 * the data's robust moments leave out, which can decide a fit) with weight
 * 1, and every k-th of the other rows with weight (their number) / (those
 * taken), times the observation weight if any, so that the sample's
 * log-likelihood estimates the full one.  With more than GHF_SAMPLE_ROWS
 * rows far out there is no sample.  Collective; 0, or 1 on a run-time error
 * (agreed). */
int ghf__em_sample_open(em_ctx *e, char *err, size_t errlen)
{
    const ghf_em_opts *o = e->o;
    if (o->resume || o->init) return 0;
    if (o->sample_be) {
        e->sample = o->sample_be;
        return 0;
    }
    if (!o->has_rows || o->has_missing) return 0;
    int64_t n = o->nrows, off = 0;
    MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT64_T, MPI_SUM, e->comm);
    const int64_t want = sample_rows(n);
    if (want <= 0) return 0;
    const int64_t k = n / want; /* >= 2 */
    MPI_Exscan(&o->nrows, &off, 1, MPI_INT64_T, MPI_SUM, e->comm);
    if (e->rank == 0) off = 0; /* MPI_Exscan leaves rank 0's undefined */
    const int d = e->d;
    const double *rm = o->data_rmean && o->data_rcov ? o->data_rmean : NULL;
    double *lim = malloc((size_t)d * sizeof(double));
    int fail = !lim;
    if (!fail)
        for (int j = 0; j < d; j++) lim[j] = rm ? GHF_SAMPLE_FAR_Z * sqrt(fmax(o->data_rcov[j * d + j], 0.0)) : 0.0;
    /* counts: rows far out (all taken) and the other rows taken */
    int64_t cnt[2] = {0, 0};
    for (int64_t i = 0; i < o->nrows && !fail; i++) {
        const double *x = o->rows + (size_t)i * d;
        if (far_row(x, rm, lim, d))
            cnt[0]++;
        else if ((off + i) % k == 0)
            cnt[1]++;
    }
    const int64_t m = cnt[0] + cnt[1];
    const double *w = e->be->weights;
    if (!fail) {
        e->sample_x = malloc((size_t)(m > 0 ? m : 1) * (size_t)d * sizeof(double));
        e->sample_w = malloc((size_t)(m > 0 ? m : 1) * sizeof(double));
        fail = !e->sample_x || !e->sample_w;
    }
    if (fail) snprintf(err, errlen, "out of memory (the subsample start, %lld rows x %d)", (long long)m, d);
    if (ghf_agree(e->comm, fail, err, errlen)) {
        free(lim);
        return 1;
    }
    int64_t tot[2] = {cnt[0], cnt[1]};
    MPI_Allreduce(MPI_IN_PLACE, tot, 2, MPI_INT64_T, MPI_SUM, e->comm);
    if (tot[0] > GHF_SAMPLE_ROWS || tot[1] == 0) { /* every rank sees the same totals */
        free(lim);
        ghf__em_sample_close(e);
        return 0;
    }
    const double wk = (double)(n - tot[0]) / (double)tot[1];
    int64_t j = 0;
    for (int64_t i = 0; i < o->nrows; i++) {
        const double *x = o->rows + (size_t)i * d;
        const int f = far_row(x, rm, lim, d);
        if (!f && (off + i) % k != 0) continue;
        memcpy(e->sample_x + (size_t)j * d, x, (size_t)d * sizeof(double));
        e->sample_w[j] = (f ? 1.0 : wk) * (w ? w[i] : 1.0);
        j++;
    }
    free(lim);
    /* every rank gets the whole sample, in the rows' global order */
    int size, mi = (int)m;
    MPI_Comm_size(e->comm, &size);
    const int64_t mt = tot[0] + tot[1];
    int *cnt_x = malloc((size_t)size * 4 * sizeof(int));
    double *ax = malloc((size_t)mt * (size_t)d * sizeof(double)), *aw = malloc((size_t)mt * sizeof(double));
    fail = !cnt_x || !ax || !aw;
    if (fail) snprintf(err, errlen, "out of memory (the subsample start, %lld rows x %d)", (long long)mt, d);
    if (ghf_agree(e->comm, fail, err, errlen)) {
        free(cnt_x), free(ax), free(aw);
        ghf__em_sample_close(e);
        return 1;
    }
    int *dsp_x = cnt_x + size, *cnt_w = cnt_x + 2 * size, *dsp_w = cnt_x + 3 * size;
    MPI_Allgather(&mi, 1, MPI_INT, cnt_w, 1, MPI_INT, e->comm);
    for (int r = 0, o_w = 0; r < size; o_w += cnt_w[r], r++) {
        dsp_w[r] = o_w;
        cnt_x[r] = cnt_w[r] * d;
        dsp_x[r] = o_w * d;
    }
    MPI_Allgatherv(e->sample_x, mi * d, MPI_DOUBLE, ax, cnt_x, dsp_x, MPI_DOUBLE, e->comm);
    MPI_Allgatherv(e->sample_w, mi, MPI_DOUBLE, aw, cnt_w, dsp_w, MPI_DOUBLE, e->comm);
    free(cnt_x);
    free(e->sample_x);
    free(e->sample_w);
    e->sample_x = ax;
    e->sample_w = aw;
    /* a backend of this rank alone: the race needs no communication */
    e->sample = ghf_backend_cpu_create(MPI_COMM_SELF, e->sample_x, mt, d, err, errlen);
    if (ghf_agree(e->comm, !e->sample, err, errlen)) {
        ghf__em_sample_close(e);
        return 1;
    }
    e->sample->weights = e->sample_w;
    e->sample_owned = 1;
    if (!o->quiet && e->rank == 0) {
        printf("%sstarts raced on a sample of %lld of %lld rows (every %lld-th, and %lld far out)\n",
               o->label ? o->label : "", (long long)(tot[0] + tot[1]), (long long)n, (long long)k, (long long)tot[0]);
        fflush(stdout);
    }
    return 0;
}

void ghf__em_sample_close(em_ctx *e)
{
    if (e->sample && e->sample_owned) e->sample->destroy(e->sample);
    e->sample = NULL;
    e->sample_owned = 0;
    free(e->sample_x);
    free(e->sample_w);
    e->sample_x = e->sample_w = NULL;
}

/* After the race on the sample (on every rank alone): rank 0's winner out
 * (when its *have) judged by one E-step on all rows: *best its
 * log-likelihood there, or *have = 0 when that is not
 * finite (a row the sample left out, e.g. a gross outlier the winner cannot
 * explain: the caller then runs the race on all rows).  0, or 1 on a
 * run-time error. */
int ghf__em_sample_judge(em_ctx *e, ghf_params *out, double *best, int *have, char *err, size_t errlen)
{
    /* every rank raced alone on the same rows (the sums are exact: the same
     * bits); rank 0's winner is the one */
    const int d = e->d;
    double sc[4] = {out->p, out->a, out->b, *have};
    MPI_Bcast(sc, 4, MPI_DOUBLE, 0, e->comm);
    MPI_Bcast(out->mu, d, MPI_DOUBLE, 0, e->comm);
    MPI_Bcast(out->gamma, d, MPI_DOUBLE, 0, e->comm);
    MPI_Bcast(out->sigma, d * d, MPI_DOUBLE, 0, e->comm);
    out->p = sc[0], out->a = sc[1], out->b = sc[2];
    if (!(sc[3] > 0)) {
        *have = 0;
        return 0;
    }
    const int erc = ghf__em_estep(e, out, 0, err, errlen);
    if (erc == 1) return 1;
    *have = erc == 0 && ghf__em_estep_ok(e);
    *best = *have ? e->stats[GHF_ST_LL] : -INFINITY;
    return 0;
}
