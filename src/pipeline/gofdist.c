/* gofdist.c - see gofdist.h */
#include "gofdist.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "psort.h"
#include "xreduce.h"

int ghf_gof_stats_dist(MPI_Comm comm, const double *u, size_t m, size_t off, size_t n, ghf_gof_stat *s)
{
    ghf_gof_part p;
    ghf_gof_part_init(&p);
    ghf_gof_stats_part(u, m, off, n, &p);
    int rc = MPI_Allreduce(MPI_IN_PLACE, &p.ks, 1, MPI_DOUBLE, MPI_MAX, comm) != MPI_SUCCESS;
    /* every block's accumulators summed over the ranks, then joined */
    const int nb = ghf_gof_xblocks(n);
    ghf_xsum acc[2 * GHF_GOF_XBLOCKS];
    memcpy(acc, p.ad, (size_t)nb * sizeof *acc);
    memcpy(acc + nb, p.cvm, (size_t)nb * sizeof *acc);
    rc |= ghf_xsum_allreduce(comm, acc, 2 * nb);
    memcpy(p.ad, acc, (size_t)nb * sizeof *acc);
    memcpy(p.cvm, acc + nb, (size_t)nb * sizeof *acc);
    ghf_gof_stats_finish(&p, n, s);
    return rc;
}

/* Collective: each rank's run of buf (mine entries, at its place in rank
 * order: the runs follow each other) all-gathered into buf on every rank.
 * 0 or 1 (agreed). */
static int gather_run(MPI_Comm comm, size_t mine, double *buf)
{
    int P;
    MPI_Comm_size(comm, &P);
    int *cnt = malloc(2 * (size_t)P * sizeof(int));
    if (ghf_any(comm, !cnt)) return free(cnt), 1;
    int *dsp = cnt + P, me = (int)mine;
    MPI_Allgather(&me, 1, MPI_INT, cnt, 1, MPI_INT, comm);
    dsp[0] = 0;
    for (int r = 1; r < P; r++) dsp[r] = dsp[r - 1] + cnt[r - 1];
    const int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_DOUBLE, comm);
    free(cnt);
    return rc != MPI_SUCCESS;
}

/* Collective: kx[i] = the value at global rank rk[i] for all i < M (rk
 * ascending; each rank fills the run it holds, then all-gather).  0 or 1. */
static int gather_at_ranks(MPI_Comm comm, const double *xs, size_t m, size_t off, const size_t *rk, size_t M,
                           double *kx)
{
    size_t a = 0, b;
    while (a < M && rk[a] < off) a++;
    for (b = a; b < M && rk[b] < off + m; b++) kx[b] = xs[rk[b] - off];
    return gather_run(comm, b - a, kx);
}

/* Collective: the knots' PITs, each evaluated by the rank holding it, into
 * ku[0..M) on every rank.  0 or 1 (agreed). */
static int knot_pits(MPI_Comm comm, size_t m, size_t off, const size_t *rk, const double *kx, size_t M,
                     ghf_gof_cdf_fn f, const void *ctx, double *ku)
{
    size_t a = 0, b;
    while (a < M && rk[a] < off) a++;
    for (b = a; b < M && rk[b] < off + m; b++) {}
    const int bad = ghf_gof_pit_exact(kx + a, b - a, f, ctx, ku + a);
    if (ghf_any(comm, bad)) return 1;
    /* the values at the held ranks are the pieces' own: the same gather */
    return gather_run(comm, b - a, ku);
}

/* Collective: interpolate at the held values and the largest error at the
 * checked ranks (ghf_gof_err_ranks) that this rank holds, max over ranks. */
static int interp_dist(MPI_Comm comm, const double *xs, size_t m, size_t off, const size_t *rk, const double *kx,
                       double *ku, size_t M, ghf_gof_cdf_fn f, const void *ctx, double *u, double *maxerr)
{
    ghf_gof_interp I;
    int bad = ghf_gof_interp_init(&I, kx, ku, M);
    if (!bad) {
        ghf_gof_interp_eval(&I, xs, m, u);
        size_t pos[GHF_GOF_ERR_POINTS], nl = 0;
        double xm[GHF_GOF_ERR_POINTS];
        const size_t nc = ghf_gof_err_ranks(rk, M, pos);
        for (size_t c = 0; c < nc; c++)
            if (pos[c] >= off && pos[c] < off + m) xm[nl++] = xs[pos[c] - off];
        bad = ghf_gof_interp_err(&I, f, ctx, xm, nl, maxerr);
    }
    ghf_gof_interp_free(&I);
    if (ghf_any(comm, bad)) return 1;
    return MPI_Allreduce(MPI_IN_PLACE, maxerr, 1, MPI_DOUBLE, MPI_MAX, comm) != MPI_SUCCESS;
}

int ghf_gof_pit_dist(MPI_Comm comm, const double *xs, size_t m, size_t off, size_t n, ghf_gof_cdf_fn f,
                     const void *ctx, size_t nexact, size_t nknots, double *u, double *maxerr)
{
    *maxerr = 0.0;
    if (!ghf_gof_knotted(n, nexact, nknots)) return ghf_any(comm, ghf_gof_pit_exact(xs, m, f, ctx, u));
    size_t *rk = malloc((nknots + 64) * sizeof *rk);
    double *kx = malloc((nknots + 64) * sizeof *kx), *ku = malloc((nknots + 64) * sizeof *ku);
    int st = ghf_any(comm, !rk || !kx || !ku);
    size_t M = 0;
    if (!st) {
        M = ghf_gof_knot_cand(n, nknots, rk);
        st = gather_at_ranks(comm, xs, m, off, rk, M, kx);
    }
    if (!st) M = ghf_gof_knot_dedupe(rk, kx, M); /* the same on every rank */
    if (!st && M < 3) st = ghf_any(comm, ghf_gof_pit_exact(xs, m, f, ctx, u));
    else if (!st) st = knot_pits(comm, m, off, rk, kx, M, f, ctx, ku);
    if (!st && M >= 3) st = interp_dist(comm, xs, m, off, rk, kx, ku, M, f, ctx, u, maxerr);
    free(rk);
    free(kx);
    free(ku);
    return st;
}

/* Collective: the sample quantiles qq[2k + 1] (k < Q) of the values sorted
 * across comm, from the ranks holding the order statistics. 0 or 1. */
static int sample_qq(MPI_Comm comm, const double *xs, size_t m, size_t off, size_t n, int Q, double *qq)
{
    double *v = malloc(2 * (size_t)(Q > 0 ? Q : 1) * sizeof *v);
    if (ghf_any(comm, !v)) return free(v), 1;
    for (int k = 0; k < Q; k++) {
        const size_t lo = ghf_gof_qq_lo(n, (k + 0.5) / Q), p[2] = {lo, lo + 1 < n ? lo + 1 : lo};
        for (int h = 0; h < 2; h++) v[2 * k + h] = p[h] >= off && p[h] < off + m ? xs[p[h] - off] : -INFINITY;
    }
    /* each position is held by one rank, the others give -inf */
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v, 2 * Q, MPI_DOUBLE, MPI_MAX, comm);
    for (int k = 0; k < Q; k++) qq[2 * k + 1] = ghf_gof_qq_value(n, (k + 0.5) / Q, v[2 * k], v[2 * k + 1]);
    free(v);
    return rc != MPI_SUCCESS;
}

/* Collective: the model quantiles qq[2k] (k < Q), the ranks taking a block
 * of k each; *neacc += those that missed their tolerance.  0 or 1. */
static int model_qq(MPI_Comm comm, const void *ctx, int radial, int Q, double *qq, int *neacc)
{
    int P, rank;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &rank);
    double *v = malloc((size_t)(Q > 0 ? Q : 1) * sizeof *v);
    int *cnt = malloc(2 * (size_t)P * sizeof(int));
    if (ghf_any(comm, !v || !cnt)) return free(v), free(cnt), 1;
    int *dsp = cnt + P, ne = 0;
    for (int r = 0; r < P; r++) dsp[r] = (int)((int64_t)Q * r / P), cnt[r] = (int)((int64_t)Q * (r + 1) / P) - dsp[r];
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : ne)
    for (int k = dsp[rank]; k < dsp[rank] + cnt[rank]; k++) ne += ghf_gof_model_quantile(ctx, radial, Q, k, &v[k]) != 0;
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v, cnt, dsp, MPI_DOUBLE, comm);
    rc |= MPI_Allreduce(MPI_IN_PLACE, &ne, 1, MPI_INT, MPI_SUM, comm);
    *neacc += ne;
    for (int k = 0; k < Q; k++) qq[2 * k] = v[k];
    free(v);
    free(cnt);
    return rc != MPI_SUCCESS;
}

/* Collective: the PITs back to their rows on rank 0 (pit[row * stride + col];
 * only when the PITs are written, n small).  k is reused.  0 or 1. */
static int pits_to_root(MPI_Comm comm, ghf_sortkey *k, const double *u, size_t m, double *pit, int stride, int col,
                        size_t n)
{
    int P, rank;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &rank);
    for (size_t i = 0; i < m; i++) k[i].x = u[i];
    ghf_sortkey *all = rank == 0 ? malloc((n > 0 ? n : 1) * sizeof *all) : NULL;
    int *cnt = malloc(2 * (size_t)P * sizeof(int));
    if (ghf_any(comm, !cnt || (rank == 0 && !all))) return free(all), free(cnt), 1;
    int *dsp = cnt + P, mine = (int)m;
    MPI_Gather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, 0, comm);
    dsp[0] = 0;
    for (int r = 1; rank == 0 && r < P; r++) dsp[r] = dsp[r - 1] + cnt[r - 1];
    MPI_Datatype t;
    MPI_Type_contiguous((int)sizeof(ghf_sortkey), MPI_BYTE, &t);
    MPI_Type_commit(&t);
    const int rc = MPI_Gatherv(k, mine, t, all, cnt, dsp, t, 0, comm);
    MPI_Type_free(&t);
    for (size_t i = 0; rank == 0 && i < n; i++) pit[(size_t)all[i].i * (size_t)stride + (size_t)col] = all[i].x;
    free(all);
    free(cnt);
    return rc != MPI_SUCCESS;
}

/* the cdf of a rank told to fail (GHFIT_TEST_FAIL=gofcdf@RANK) */
static int failing_cdf(const void *ctx, double x, double *u)
{
    (void)ctx, (void)x;
    *u = NAN;
    return GHF_UNI_EDOM;
}

/* Collective: one column (keys: this rank's nloc (value, row) pairs,
 * consumed): sort, PITs, statistics, QQ table, PITs to rank 0.  0, 1 or 2
 * (agreed, err). */
static int dist_column(MPI_Comm comm, const ghf_gof_input *in, ghf_sortkey *keys, size_t nloc, ghf_gof_cdf_fn f,
                       const void *ctx, int radial, ghf_gof_stat *st, double *qq, double *pit, int stride, int col,
                       ghf_gof_result *out, char *err, size_t errlen)
{
    int64_t m64, off64, n64;
    int s = ghf_psort(comm, &keys, (int64_t)nloc, &m64, &off64, &n64, err, errlen);
    if (s) return s;
    const size_t m = (size_t)m64, off = (size_t)off64, n = (size_t)n64;
    double *xs = malloc((m > 0 ? m : 1) * sizeof *xs), *u = malloc((m > 0 ? m : 1) * sizeof *u);
    s = ghf_any(comm, !xs || !u);
    if (s) snprintf(err, errlen, "gof: out of memory for %zu sorted values", m);
    for (size_t i = 0; !s && i < m; i++) xs[i] = keys[i].x;
    double e = 0.0;
    const ghf_gof_cdf_fn fp = ghf_test_fail("gofcdf", NULL, 0) ? failing_cdf : f;
    if (!s && ghf_gof_pit_dist(comm, xs, m, off, n, fp, ctx, in->nexact, in->nknots, u, &e)) {
        if (radial) snprintf(err, errlen, "gof: the radial cdf failed");
        else snprintf(err, errlen, "gof: the cdf of margin %d failed", col);
        s = 1;
    }
    if (!s) {
        out->pit_err = fmax(out->pit_err, e);
        if (ghf_gof_knotted(n, in->nexact, in->nknots)) out->exact = 0;
        s = ghf_gof_stats_dist(comm, u, m, off, n, st);
        if (!s && in->Q > 0) s = sample_qq(comm, xs, m, off, n, in->Q, qq);
        if (!s && in->Q > 0) s = model_qq(comm, ctx, radial, in->Q, qq, &out->n_eacc);
        if (!s && in->want_pit) s = pits_to_root(comm, keys, u, m, pit, stride, col, n);
        if (s) snprintf(err, errlen, "gof: out of memory or MPI failure");
    }
    free(keys);
    free(xs);
    free(u);
    return s;
}

/* this rank's keys of column j (j = d: the radial q in q[]) */
static ghf_sortkey *column_keys(MPI_Comm comm, const double *x, const double *q, size_t nloc, int d, int j,
                                int64_t row0)
{
    ghf_sortkey *k = malloc((nloc > 0 ? nloc : 1) * sizeof *k);
    for (size_t i = 0; k && i < nloc; i++)
        k[i] = (ghf_sortkey){j < d ? x[i * (size_t)d + (size_t)j] : q[i], row0 + (int64_t)i};
    if (ghf_any(comm, !k)) return free(k), NULL;
    return k;
}

/* Collective: the radial column.  0, 1 or 2 (agreed, err). */
/* Column j's margin test under the cdf f (ctx; radial as dist_column):
 * its statistics and p-values into out, its QQ rows and PITs, progress.
 * Collective; 0, or 1/2 with a message. */
static int margin(MPI_Comm comm, const ghf_gof_input *in, const double *x, size_t nloc, int64_t row0, int j,
                  ghf_gof_cdf_fn f, const void *ctx, int radial, ghf_gof_result *out, char *err, size_t errlen)
{
    ghf_sortkey *k = column_keys(comm, x, NULL, nloc, in->d, j, row0);
    if (!k) {
        snprintf(err, errlen, "gof: out of memory for %zu rows", nloc);
        return 1;
    }
    ghf_gof_stat s;
    const int st = dist_column(comm, in, k, nloc, f, ctx, radial, &s, out->qq + (size_t)j * (size_t)in->Q * 2,
                               out->pit, in->d, j, out, err, errlen);
    if (st) return st;
    out->ks[j] = s.ks, out->ad[j] = s.ad, out->cvm[j] = s.cvm;
    out->ks_p[j] = s.ks_p, out->ad_p[j] = s.ad_p, out->cvm_p[j] = s.cvm_p;
    if (in->progress) in->progress("margins", j + 1, in->d);
    if (in->tick) in->tick(in->tick_arg);
    return 0;
}

static int dist_radial(MPI_Comm comm, const ghf_gof_input *in, const ghf_uni_mix *mx, const double *x, size_t nloc,
                       int64_t row0, ghf_gof_result *out, char *err, size_t errlen)
{
    double *q = malloc((nloc > 0 ? nloc : 1) * sizeof *q);
    int st = q ? ghf_gof_radial_q(in, x, nloc, q, &out->delta2) : 1;
    if (st == 2) snprintf(err, errlen, "the fit's Sigma is not positive definite");
    if (st == 1) snprintf(err, errlen, "gof: out of memory");
    st = ghf_agree(comm, st, err, errlen);
    ghf_sortkey *k = st ? NULL : column_keys(comm, x, q, nloc, in->d, in->d, row0);
    free(q);
    if (!st && !k) snprintf(err, errlen, "gof: out of memory for %zu rows", nloc), st = 1;
    if (!st) {
        const ghf_radial_law R = {mx, in->d, out->delta2};
        st = dist_column(comm, in, k, nloc, ghf_radial_cdf, &R, 1, &out->radial, out->rqq, out->rpit, 1, 0, out,
                         err, errlen);
        if (in->progress) in->progress("radial", 1, 1);
    }
    return st;
}

/* A mixture's radial statistic is not defined: NaN statistics, QQ table and PITs. */
static void radial_none(const ghf_gof_input *in, ghf_gof_result *out)
{
    out->delta2 = NAN;
    out->radial = (ghf_gof_stat){NAN, NAN, NAN, NAN, NAN, NAN};
    for (int k = 0; k < 2 * (in->Q > 0 ? in->Q : 1); k++) out->rqq[k] = NAN;
    for (size_t i = 0; out->rpit && i < in->n; i++) out->rpit[i] = NAN;
}

/* Collective: the margins of a mixture (in->mix.K >= 2): PITs through the
 * mixture cdf of each margin, sum_k pi_k F_kj.  0, 1 or 2 (agreed, err). */
static int dist_mixture(MPI_Comm comm, const ghf_gof_input *in, const double *x, size_t nloc, int64_t row0,
                        ghf_gof_result *out, char *err, size_t errlen)
{
    const int K = in->mix.K;
    const size_t d = (size_t)in->d;
    ghf_uni_mix *mx = malloc((size_t)K * sizeof *mx);
    ghf_uni_law *L = malloc((size_t)K * sizeof *L);
    int st = ghf_any(comm, !mx || !L);
    if (st) snprintf(err, errlen, "gof: out of memory");
    for (int k = 0; !st && k < K; k++)
        if (ghf_uni_mix_init(&mx[k], in->gauss, in->mix.cp[k], in->mix.ca[k], in->mix.cb[k]) != GHF_UNI_OK) { /* every rank */
            snprintf(err, errlen, "the fit's component %d: its subordinator GIG(p = %g, a = %g, b = %g) is not a "
                     "valid law", k, in->mix.cp[k], in->mix.ca[k], in->mix.cb[k]);
            st = 2;
        }
    for (size_t j = 0; j < d && !st; j++) {
        for (int k = 0; k < K && !st; k++) {
            const double s2 = in->mix.csigma[k][j * d + j];
            if (!(s2 > 0.0)) {
                snprintf(err, errlen, "the fit's component %d: Sigma has a non-positive diagonal entry (%zu)", k, j);
                st = 2;
            }
            L[k] = (ghf_uni_law){&mx[k], in->mix.cmu[k][j], in->gauss ? 0.0 : in->mix.cgamma[k][j], sqrt(s2)};
        }
        if (st) break;
        const ghf_gof_unimix M = {K, in->mix.prop, L};
        if ((st = margin(comm, in, x, nloc, row0, (int)j, ghf_gof_unimix_cdf, &M, 2, out, err, errlen))) break;
    }
    if (!st) radial_none(in, out);
    free(mx);
    free(L);
    return st;
}

int ghf_gof_compute_dist(MPI_Comm comm, const ghf_gof_input *in, const double *x, size_t nloc, ghf_gof_result *out,
                         char *err, size_t errlen)
{
    if (in->mix.K >= 2) { /* a mixture: its margins */
        int rank;
        MPI_Comm_rank(comm, &rank);
        memset(out, 0, sizeof *out);
        ghf_gof_input loc = *in;
        loc.want_pit = rank == 0 && in->want_pit;
        int st = ghf_agree(comm, ghf_gof_result_alloc(&loc, out), NULL, 0);
        if (st) snprintf(err, errlen, "gof: out of memory");
        int64_t row0 = 0, nl = (int64_t)nloc;
        MPI_Exscan(&nl, &row0, 1, MPI_INT64_T, MPI_SUM, comm);
        if (rank == 0) row0 = 0;
        if (!st) st = dist_mixture(comm, in, x, nloc, row0, out, err, errlen); /* in: want_pit on every rank */
        if (st) ghf_gof_result_free(out);
        return st;
    }
    int rank;
    MPI_Comm_rank(comm, &rank);
    ghf_uni_mix mx;
    memset(out, 0, sizeof *out);
    if (ghf_uni_mix_init(&mx, in->gauss, in->p, in->a, in->b) != GHF_UNI_OK) { /* the same on every rank */
        snprintf(err, errlen, "the fit's subordinator GIG(p = %g, a = %g, b = %g) is not a valid law", in->p, in->a,
                 in->b);
        return 2;
    }
    ghf_gof_input loc = *in;
    loc.want_pit = rank == 0 && in->want_pit;
    int st = ghf_agree(comm, ghf_gof_result_alloc(&loc, out), NULL, 0);
    if (st) snprintf(err, errlen, "gof: out of memory");
    int64_t row0 = 0, nl = (int64_t)nloc;
    MPI_Exscan(&nl, &row0, 1, MPI_INT64_T, MPI_SUM, comm);
    if (rank == 0) row0 = 0;
    const size_t d = (size_t)in->d;
    for (size_t j = 0; j < d && !st; j++) {
        if (!(in->sigma[j * d + j] > 0.0)) { /* the same on every rank */
            snprintf(err, errlen, "the fit's Sigma has a non-positive diagonal entry (%zu)", j);
            st = 2;
            break;
        }
        const ghf_uni_law L = {&mx, in->mu[j], in->gauss ? 0.0 : in->gamma[j], sqrt(in->sigma[j * d + j])};
        if ((st = margin(comm, in, x, nloc, row0, (int)j, ghf_gof_uni_cdf, &L, 0, out, err, errlen))) break;
    }
    if (!st) st = dist_radial(comm, in, &mx, x, nloc, row0, out, err, errlen);
    if (st) ghf_gof_result_free(out);
    return st;
}
