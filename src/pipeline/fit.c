/* fit.c - see fit.h */
#include "fit.h"

#include "agree.h"

#include "xreduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ghf_phase_names[GHF_NPHASES] = {"read", "init", "estep", "allreduce", "mstep", "write", "total"};

void ghf_data_free(ghf_data *g)
{
    free(g->shift);
    free(g->mean);
    free(g->cov);
    free(g->rmean);
    free(g->rcov);
    g->shift = g->mean = g->cov = g->rmean = g->rcov = NULL;
}

void ghf_data_em_opts(const ghf_data *g, ghf_em_opts *o)
{
    o->data_mean = g->mean;
    o->data_cov = g->cov;
    o->data_rmean = g->rmean;
    o->data_rcov = g->rcov;
    o->ll_gauss = g->ll_gauss;
    o->rows = g->x;
    o->nrows = g->nrows;
    o->has_rows = 1;
    o->data_outlier_z = g->n_outliers > 0 ? g->outlier_z : 0.0;
    o->outlier_note = g->n_outliers > 0 && g->outlier_z > GHF_EXTREME_Z && g->outlier_note[0] ? g->outlier_note : NULL;
}

/* The most extreme row of the shard (centred by the medians out->shift) by
 * robust z-score (the largest |x_j| / (1.4826 MAD_j) over its columns,
 * rlim[j] = 1.4826 MAD_j, 0 for columns with a zero MAD): out->outlier_z
 * and a note naming it (its global row index when known, the column and the
 * value in the data's units).  Collective. */
static void extreme_row(MPI_Comm comm, const ghf_shard *s, const double *rlim, int scale_log2, ghf_data *out)
{
    const int d = s->d;
    struct {
        double z;
        int rank;
    } loc = {-1.0, 0}, glob;
    int64_t li = -1;
    int lj = 0;
    MPI_Comm_rank(comm, &loc.rank);
    for (int64_t i = 0; i < s->nrows; i++)
        for (int j = 0; j < d; j++) {
            if (!(rlim[j] > 0.0)) continue;
            const double z = fabs(s->x[i * d + j]) / rlim[j];
            if (z > loc.z) loc.z = z, li = i, lj = j;
        }
    MPI_Allreduce(&loc, &glob, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm);
    /* the owner's row: global index (-1: unknown, rows were dropped), column, value */
    double info[3] = {-1.0, 0.0, 0.0};
    if (loc.rank == glob.rank && li >= 0) {
        info[0] = s->row0 >= 0 ? (double)(s->row0 + li) : -1.0;
        info[1] = lj;
        info[2] = ldexp(s->x[li * d + lj] + out->shift[lj], -scale_log2);
    }
    MPI_Bcast(info, 3, MPI_DOUBLE, glob.rank, comm);
    out->outlier_z = glob.z;
    char at[48] = "a row";
    if (info[0] >= 0.0) snprintf(at, sizeof at, "row %lld", (long long)info[0]);
    snprintf(out->outlier_note, sizeof out->outlier_note, "%s (column %d = %.6g, %.2g robust SDs from the median)", at,
             (int)info[1], info[2], glob.z);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..m) (reorders v). */
static double median_of(double *v, int64_t m)
{
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    return (m % 2) ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

/* Column medians and MADs of a sample of rows: those whose global row index
 * is a multiple of a stride (at most ~8192 rows; with dropped rows, whose
 * global indices are unknown, the local index is used).  Collective. */
static int sample_location(MPI_Comm comm, const ghf_shard *s, double *med, double *mad)
{
    const int d = s->d;
    const int64_t n = s->n_global;
    int64_t k = (n + 8191) / 8192;
    const int64_t kd = (int64_t)((double)n * d / 4.0e6) + 1; /* at most ~4e6 sampled values */
    if (kd > k) k = kd;
    const int64_t base = s->row0 >= 0 ? s->row0 : 0;
    int64_t first = (k - base % k) % k, m = 0;
    for (int64_t l = first; l < s->nrows; l += k) m++;
    int size;
    MPI_Comm_size(comm, &size);
    int *cnt = malloc((size_t)size * sizeof(int)), *dsp = malloc((size_t)size * sizeof(int));
    int mine = (int)(m * d), total = 0, ok = cnt && dsp;
    double *loc = malloc((size_t)(m > 0 ? m : 1) * d * sizeof(double));
    ok = ok && loc;
    if (!ok) mine = 0;
    int fail = !ok, any_fail = 0;
    MPI_Allreduce(&fail, &any_fail, 1, MPI_INT, MPI_MAX, comm);
    if (any_fail) {
        free(cnt), free(dsp), free(loc);
        return -1;
    }
    for (int64_t l = first, i = 0; l < s->nrows; l += k, i++) memcpy(loc + i * d, s->x + l * d, (size_t)d * sizeof(double));
    MPI_Allgather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, comm);
    for (int r = 0; r < size; r++) {
        dsp[r] = total;
        total += cnt[r];
    }
    double *all = malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    const int64_t ms = total / d;
    double *col = malloc((size_t)(ms > 0 ? ms : 1) * sizeof(double));
    fail = !all || !col;
    MPI_Allreduce(&fail, &any_fail, 1, MPI_INT, MPI_MAX, comm);
    if (!any_fail) MPI_Allgatherv(loc, mine, MPI_DOUBLE, all, cnt, dsp, MPI_DOUBLE, comm);
    if (!any_fail && ms > 0) {
        for (int j = 0; j < d; j++) {
            for (int64_t i = 0; i < ms; i++) col[i] = all[i * d + j];
            med[j] = median_of(col, ms);
            for (int64_t i = 0; i < ms; i++) col[i] = fabs(col[i] - med[j]);
            mad[j] = median_of(col, ms);
        }
    } else {
        for (int j = 0; j < d; j++) med[j] = mad[j] = 0.0;
    }
    free(cnt), free(dsp), free(loc), free(all), free(col);
    return any_fail ? -1 : 0;
}

/* Block partials for the moments (xreduce.h: the same bits on any number
 * of ranks and threads).  Rows with ghf__row_kept(x, zlim) only, when zlim
 * is set; c: the point the rows are taken relative to (NULL: 0). */
typedef struct mom_ctx {
    const double *zlim, *c;
    const double *x0, *w; /* weighted moments: the shard's rows and their weights (w NULL: unweighted) */
} mom_ctx;

/* the weight of row xi (1 without weights) */
static double row_weight(const mom_ctx *m, const double *xi, int d)
{
    return m->w ? m->w[(xi - m->x0) / d] : 1.0;
}

/* part[0..d) += w (x - c), part[d] += w (w = 1 without weights) */
static void blk_sum(void *ctx, const double *x, int nb, int d, double *part)
{
    const mom_ctx *m = ctx;
    for (int i = 0; i < nb; i++) {
        const double *xi = x + (size_t)i * d;
        if (m->zlim && !ghf__row_kept(xi, m->zlim, d)) continue;
        if (m->w) {
            const double wi = row_weight(m, xi, d);
            for (int j = 0; j < d; j++) part[j] += wi * (xi[j] - (m->c ? m->c[j] : 0.0));
            part[d] += wi;
            continue;
        }
        for (int j = 0; j < d; j++) part[j] += xi[j] - (m->c ? m->c[j] : 0.0);
        part[d] += 1.0;
    }
}

/* part[j d + k] += w (x_j - c_j)(x_k - c_k), k <= j */
static void blk_cross(void *ctx, const double *x, int nb, int d, double *part)
{
    const mom_ctx *m = ctx;
    for (int i = 0; i < nb; i++) {
        const double *xi = x + (size_t)i * d;
        if (m->zlim && !ghf__row_kept(xi, m->zlim, d)) continue;
        const double wi = row_weight(m, xi, d);
        for (int j = 0; j < d; j++) {
            const double aj = m->w ? wi * (xi[j] - (m->c ? m->c[j] : 0.0)) : xi[j] - (m->c ? m->c[j] : 0.0);
            for (int k = 0; k <= j; k++) part[j * d + k] += aj * (xi[k] - (m->c ? m->c[k] : 0.0));
        }
    }
}

/* The global (weighted, when w is set) mean of the rows (relative to c0,
 * NULL: 0) in two passes (accurate for data far from c0), added to c0 into
 * mean; returns the count or the sum of the weights (0 on failure). */
static double mean_of(MPI_Comm comm, const ghf_shard *s, const double *w, const double *zlim, const double *c0,
                      double *mean, double *buf)
{
    const int d = s->d;
    mom_ctx m = {zlim, c0, s->x, w};
    if (ghf_xreduce_rows(comm, s->x, s->nrows, d, d + 1, blk_sum, &m, buf)) return 0;
    const double cnt = buf[d];
    if (!(cnt > 0.0)) return 0;
    for (int j = 0; j < d; j++) mean[j] = (c0 ? c0[j] : 0.0) + buf[j] / (double)cnt;
    m.c = mean;
    if (ghf_xreduce_rows(comm, s->x, s->nrows, d, d + 1, blk_sum, &m, buf)) return 0;
    for (int j = 0; j < d; j++) mean[j] += buf[j] / (double)cnt;
    return cnt;
}

/* The biased covariance around c (cnt rows, or the sum of the weights). */
static int cov_around(MPI_Comm comm, const ghf_shard *s, const double *w, const double *zlim, const double *c,
                      double cnt, double *cov, double *buf)
{
    const int d = s->d;
    mom_ctx m = {zlim, c, s->x, w};
    if (ghf_xreduce_rows(comm, s->x, s->nrows, d, d * d, blk_cross, &m, buf)) return -1;
    for (int j = 0; j < d; j++)
        for (int k = 0; k <= j; k++) {
            const double v = buf[j * d + k] / (double)cnt;
            cov[j * d + k] = v;
            cov[k * d + j] = v;
        }
    return 0;
}

/* Global mean and biased covariance of the rows kept by zlim (all when NULL);
 * returns the count (0 on failure). */
static double moments(MPI_Comm comm, const ghf_shard *s, const double *w, const double *zlim, double *mean,
                      double *cov, double *buf)
{
    const double cnt = mean_of(comm, s, w, zlim, NULL, mean, buf);
    if (!(cnt > 0.0) || cov_around(comm, s, w, zlim, mean, cnt, cov, buf)) return 0;
    return cnt;
}

int ghf__row_kept(const double *x, const double *zlim, int d)
{
    for (int j = 0; j < d; j++)
        if (fabs(x[j]) > zlim[j]) return 0;
    return 1;
}

int ghf_data_prepare(MPI_Comm comm, ghf_shard *s, const char *what, ghf_data *out, char *err, size_t errlen)
{
    return ghf_data_prepare_weighted(comm, s, NULL, what, out, err, errlen);
}

int ghf_data_prepare_weighted(MPI_Comm comm, ghf_shard *s, const double *w, const char *what, ghf_data *out,
                              char *err, size_t errlen)
{
    return ghf_data_prepare_rows(comm, s, w, what, (int64_t)s->d + 1, out, err, errlen);
}

int ghf_data_prepare_rows(MPI_Comm comm, ghf_shard *s, const double *w, const char *what, int64_t min_rows,
                          ghf_data *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->w = w;
    const int d = s->d;
    out->n_global = s->n_global;
    out->d = d;
    out->nrows = s->nrows;
    out->x = s->x;
    out->ll_gauss = NAN;
    out->shift = calloc((size_t)d, sizeof(double));
    out->mean = calloc((size_t)d, sizeof(double));
    out->cov = calloc((size_t)d * (size_t)d, sizeof(double));
    double *buf = calloc((size_t)d * (size_t)d + d + 1, sizeof(double));
    double *mad = calloc((size_t)d, sizeof(double)), *zlim = calloc((size_t)d, sizeof(double));
    int fail = !out->shift || !out->mean || !out->cov || !buf || !mad || !zlim;
    if (fail) snprintf(err, errlen, "out of memory (preparing %s)", what);
    if (ghf_test_fail("prepare", err, errlen)) fail = 1;
    if (ghf_agree(comm, fail, err, errlen)) { /* every rank leaves here, with the failing rank's message */
        free(buf), free(mad), free(zlim);
        ghf_data_free(out);
        return 1;
    }
    if (s->n_global < min_rows) {
        if (min_rows > d)
            snprintf(err, errlen, "%s: %lld rows but %d columns: at least d + 1 = %d rows are needed", what,
                     (long long)s->n_global, d, d + 1);
        else
            snprintf(err, errlen, "%s: %lld rows: at least %lld are needed", what, (long long)s->n_global,
                     (long long)min_rows);
        free(buf), free(mad), free(zlim);
        ghf_data_free(out);
        return 2;
    }
    /* Data near the limits of double (|x| > 2^500 or all |x| < 2^-500) are
     * scaled by a power of two (exact), so that sums of squares neither
     * overflow nor underflow; the results are mapped back on output. */
    double amax = 0.0;
    for (int64_t i = 0; i < s->nrows * d; i++) amax = fmax(amax, fabs(s->x[i]));
    MPI_Allreduce(MPI_IN_PLACE, &amax, 1, MPI_DOUBLE, MPI_MAX, comm);
    out->scale_log2 = 0;
    if (amax > 0x1p500 || (amax > 0.0 && amax < 0x1p-500)) {
        int e;
        frexp(amax, &e);
        out->scale_log2 = -e;
        for (int64_t i = 0; i < s->nrows * d; i++) s->x[i] = ldexp(s->x[i], out->scale_log2);
    }
    /* Centre by the global column means, or, when there are gross outliers,
     * by the column medians of a sample: one outlier can move the mean so far
     * that subtracting it rounds every other row (1e20 in 2e4 rows shifts
     * the mean by 5e15). */
    if (sample_location(comm, s, zlim, mad) != 0) {
        free(buf), free(mad), free(zlim);
        ghf_data_free(out);
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    /* robust z-score limits (columns with a zero MAD, more than half ties,
     * flag nothing); zlim holds the medians until here */
    double *med = out->mean; /* scratch until the moments are known */
    int any_lim = 0;
    for (int j = 0; j < d; j++) {
        med[j] = zlim[j];
        zlim[j] = mad[j] > 0.0 ? GHF_OUTLIER_Z * 1.4826 * mad[j] : INFINITY;
        any_lim |= mad[j] > 0.0;
    }
    int64_t nout = 0;
    if (any_lim) {
        for (int64_t i = 0; i < s->nrows; i++) {
            const double *xi = s->x + i * d;
            for (int j = 0; j < d; j++)
                if (fabs(xi[j] - med[j]) > zlim[j]) {
                    nout++;
                    break;
                }
        }
        MPI_Allreduce(MPI_IN_PLACE, &nout, 1, MPI_INT64_T, MPI_SUM, comm);
    }
    int mfail = 0;
    if (nout > 0) {
        for (int j = 0; j < d; j++) out->shift[j] = med[j];
        for (int64_t i = 0; i < s->nrows; i++)
            for (int j = 0; j < d; j++) s->x[i * d + j] -= out->shift[j];
        out->wsum = moments(comm, s, w, NULL, out->mean, out->cov, buf);
        mfail = !(out->wsum > 0.0);
    } else {
        /* the global mean, in two passes (accurate for data far from the
         * origin); the centred data then have mean zero */
        out->wsum = mean_of(comm, s, w, NULL, NULL, out->shift, buf);
        mfail = !(out->wsum > 0.0);
        for (int64_t i = 0; i < s->nrows; i++)
            for (int j = 0; j < d; j++) s->x[i * d + j] -= out->shift[j];
        for (int j = 0; j < d; j++) out->mean[j] = 0.0;
        if (!mfail) mfail = cov_around(comm, s, w, NULL, NULL, w ? out->wsum : (double)s->n_global, out->cov, buf) != 0;
    }
    if (mfail) {
        free(buf), free(mad), free(zlim);
        ghf_data_free(out);
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    for (int j = 0; j < d; j++) {
        const double v = out->cov[j * d + j];
        if (!isfinite(v)) {
            snprintf(err, errlen, "%s: column %d: the values are so large that their variance overflows double precision; rescale the data", what, j);
            free(buf), free(mad), free(zlim);
            ghf_data_free(out);
            return 2;
        }
        if (!(v > 0.0)) {
            snprintf(err, errlen, "%s: column %d is constant: the covariance is singular", what, j);
            free(buf), free(mad), free(zlim);
            ghf_data_free(out);
            return 2;
        }
    }
    /* the Gaussian limit: log-likelihood of N(mean, cov) */
    {
        double *L = buf;
        if (ghf_cholesky(d, out->cov, L) == 0) {
            double logdet = 0.0;
            for (int j = 0; j < d; j++) logdet += 2.0 * log(L[j * d + j]);
            out->ll_gauss = -0.5 * ghf_data_count(out) * (d * GHF_LOG_2PI + logdet + d);
        }
    }
    /* moments without the gross outliers: the start of a second candidate */
    if (nout > 0 && s->n_global - nout >= (int64_t)d + 1) {
        out->rmean = calloc((size_t)d, sizeof(double));
        out->rcov = calloc((size_t)d * (size_t)d, sizeof(double));
        if (!ghf_any(comm, !out->rmean || !out->rcov)) { /* else: no second start */
            moments(comm, s, w, zlim, out->rmean, out->rcov, buf);
            int ok = 1;
            for (int j = 0; j < d; j++) ok &= out->rcov[j * d + j] > 0.0;
            if (ok) out->n_outliers = nout;
        }
        for (int j = 0; j < d; j++) mad[j] = mad[j] > 0.0 ? 1.4826 * mad[j] : 0.0;
        extreme_row(comm, s, mad, out->scale_log2, out); /* every rank: collective */
        if (!out->n_outliers) {
            free(out->rmean), free(out->rcov);
            out->rmean = out->rcov = NULL;
        }
    }
    free(buf), free(mad), free(zlim);
    return 0;
}

/* --missing em: part[j] += w x_j, part[d + j] += w over the observed
 * entries; part[2d] += w (every row) */
static void blk_avail_sum(void *ctx, const double *x, int nb, int d, double *part)
{
    const mom_ctx *m = ctx;
    for (int i = 0; i < nb; i++) {
        const double *xi = x + (size_t)i * d, wi = row_weight(m, xi, d);
        for (int j = 0; j < d; j++)
            if (!isnan(xi[j])) {
                part[j] += wi * xi[j];
                part[d + j] += wi;
            }
        part[2 * d] += wi;
    }
}

/* --missing em: pairwise sums w x_j x_k and weights over the rows where both are observed, k <= j */
static void blk_avail_cross(void *ctx, const double *x, int nb, int d, double *part)
{
    const mom_ctx *m = ctx;
    for (int i = 0; i < nb; i++) {
        const double *xi = x + (size_t)i * d, wi = row_weight(m, xi, d);
        for (int j = 0; j < d; j++) {
            if (isnan(xi[j])) continue;
            for (int k = 0; k <= j; k++)
                if (!isnan(xi[k])) {
                    part[j * d + k] += wi * xi[j] * xi[k];
                    part[d * d + j * d + k] += wi;
                }
        }
    }
}

int ghf_data_prepare_missing(MPI_Comm comm, ghf_shard *s, const double *w, const char *what, ghf_data *out,
                             char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const int d = s->d;
    out->w = w;
    out->n_global = s->n_global;
    out->d = d;
    out->nrows = s->nrows;
    out->x = s->x;
    out->ll_gauss = NAN; /* unknown: no Gaussian closed form over missing entries */
    out->shift = calloc((size_t)d, sizeof(double));
    out->mean = calloc((size_t)d, sizeof(double));
    out->cov = calloc((size_t)d * (size_t)d, sizeof(double));
    double *buf = calloc(2 * (size_t)d * (size_t)d + 2 * (size_t)d + 1, sizeof(double));
    double *L = calloc((size_t)d * (size_t)d, sizeof(double));
    const int fail = !out->shift || !out->mean || !out->cov || !buf || !L;
    if (fail) snprintf(err, errlen, "out of memory (preparing %s)", what);
    if (ghf_agree(comm, fail, err, errlen) || s->n_global < (int64_t)d + 1) {
        if (!fail)
            snprintf(err, errlen, "%s: %lld rows but %d columns: at least d + 1 = %d rows are needed", what,
                     (long long)s->n_global, d, d + 1);
        free(buf), free(L);
        ghf_data_free(out);
        return fail ? 1 : 2;
    }
    double amax = 0.0; /* the scaling of data near the limits of double, as ghf_data_prepare */
    for (int64_t i = 0; i < s->nrows * d; i++)
        if (!isnan(s->x[i])) amax = fmax(amax, fabs(s->x[i]));
    MPI_Allreduce(MPI_IN_PLACE, &amax, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (amax > 0x1p500 || (amax > 0.0 && amax < 0x1p-500)) {
        int e;
        frexp(amax, &e);
        out->scale_log2 = -e;
        for (int64_t i = 0; i < s->nrows * d; i++) s->x[i] = ldexp(s->x[i], out->scale_log2);
    }
    mom_ctx m = {NULL, NULL, s->x, w};
    int st = ghf_xreduce_rows(comm, s->x, s->nrows, d, 2 * d + 1, blk_avail_sum, &m, buf) ? 1 : 0;
    for (int j = 0; !st && j < d; j++) {
        if (!(buf[d + j] > 0.0)) {
            snprintf(err, errlen, "%s: column %d has no observed value (every entry NaN)", what, j);
            st = 2;
        } else {
            out->shift[j] = buf[j] / buf[d + j]; /* the available-case mean */
        }
    }
    out->wsum = buf[2 * d];
    if (!st) {
        for (int64_t i = 0; i < s->nrows; i++)
            for (int j = 0; j < d; j++) s->x[i * d + j] -= out->shift[j];
        st = ghf_xreduce_rows(comm, s->x, s->nrows, d, 2 * d * d, blk_avail_cross, &m, buf) ? 1 : 0;
    }
    /* the pairwise covariance; its diagonal when it is not positive definite */
    for (int j = 0; !st && j < d; j++)
        for (int k = 0; k <= j; k++) {
            const double c = buf[d * d + j * d + k] > 0.0 ? buf[j * d + k] / buf[d * d + j * d + k] : 0.0;
            out->cov[j * d + k] = out->cov[k * d + j] = c;
        }
    for (int j = 0; !st && j < d; j++)
        if (!(out->cov[j * d + j] > 0.0) || !isfinite(out->cov[j * d + j])) {
            snprintf(err, errlen, "%s: column %d is constant over its observed values (or overflows)", what, j);
            st = 2;
        }
    if (!st && ghf_cholesky(d, out->cov, L) != 0)
        for (int j = 0; j < d; j++)
            for (int k = 0; k < d; k++)
                if (j != k) out->cov[j * d + k] = 0.0;
    free(buf), free(L);
    if (st) {
        if (st == 1) snprintf(err, errlen, "out of memory");
        ghf_data_free(out);
    }
    return st;
}

void ghf_data_params_to_internal(const ghf_data *g, const ghf_params *in, ghf_params *out)
{
    const int d = in->d, k = g->scale_log2;
    ghf_params_copy(out, in);
    for (int j = 0; j < d; j++) {
        out->mu[j] = ldexp(in->mu[j], k) - g->shift[j];
        out->gamma[j] = ldexp(in->gamma[j], k);
    }
    for (int j = 0; j < d * d; j++) out->sigma[j] = ldexp(in->sigma[j], 2 * k);
    if (in->D && out->D)
        for (int j = 0; j < d * (1 + in->nf); j++) {
            if (j < d) out->D[j] = ldexp(in->D[j], 2 * k);
            else out->B[j - d] = ldexp(in->B[j - d], k);
        }
}

void ghf_data_params_to_data(const ghf_data *g, const ghf_params *in, ghf_params *out)
{
    const int d = in->d, k = g->scale_log2;
    ghf_params_copy(out, in);
    for (int j = 0; j < d; j++) {
        out->mu[j] = ldexp(in->mu[j] + g->shift[j], -k);
        out->gamma[j] = ldexp(in->gamma[j], -k);
    }
    if (k != 0) {
        for (int j = 0; j < d * d; j++) out->sigma[j] = ldexp(in->sigma[j], -2 * k);
        if (in->D && out->D)
            for (int j = 0; j < d * (1 + in->nf); j++) {
                if (j < d) out->D[j] = ldexp(in->D[j], -2 * k);
                else out->B[j - d] = ldexp(in->B[j - d], -k);
            }
        /* |Sigma| went from 1 to 2^(-2kd): back to the |Sigma| = 1 gauge */
        ghf_params_normalize(out, -2.0 * k * d * GHF_LN2);
    }
}

/* A mixture's components in data coordinates and its moments (the
 * mixture's: E X = sum pi_k m_k, Cov X = sum pi_k (C_k + m_k m_k') - E X E X',
 * NaN where a component's do not exist) into out->mx_buf, out->mean, out->cov. */
static int mixture_finish(ghf_fit_out *out, const ghf_data *data)
{
    const int d = data->d, K = out->components;
    const size_t dd = (size_t)d * d;
    out->mx_buf = calloc((size_t)K * (1 + 2 * d + dd + 3 + d + dd), sizeof(double));
    out->mx_notes = calloc((size_t)K, sizeof *out->mx_notes);
    out->mx_note = calloc((size_t)K, sizeof *out->mx_note);
    ghf_params t;
    if (!out->mx_buf || !out->mx_notes || !out->mx_note || ghf_params_alloc(&t, d) != 0) return 1;
    double *prop = out->mx_buf, *mu = prop + K, *gamma = mu + (size_t)K * d, *sigma = gamma + (size_t)K * d,
           *pab = sigma + (size_t)K * dd, *mean = pab + 3 * (size_t)K, *cov = mean + (size_t)K * d;
    for (int j = 0; j < d; j++) out->mean[j] = 0.0;
    for (size_t j = 0; j < dd; j++) out->cov[j] = 0.0;
    int ok = 1;
    for (int k = 0; k < K; k++) {
        prop[k] = out->mix.m.prop[k];
        ghf_data_params_to_data(data, &out->mix.m.comp[k], &t);
        memcpy(mu + (size_t)k * d, t.mu, (size_t)d * sizeof(double));
        memcpy(gamma + (size_t)k * d, t.gamma, (size_t)d * sizeof(double));
        memcpy(sigma + (size_t)k * dd, t.sigma, dd * sizeof(double));
        pab[3 * k] = t.p;
        pab[3 * k + 1] = t.a;
        pab[3 * k + 2] = t.b;
        double *mk = mean + (size_t)k * d, *ck = cov + (size_t)k * dd;
        if (ghf_params_moments(&t, mk, ck, out->mx_notes[k], sizeof out->mx_notes[k]) != 0) {
            out->mx_note[k] = out->mx_notes[k];
            if (!out->mx_notes[k][0]) snprintf(out->mx_notes[k], sizeof out->mx_notes[k], "no finite moments");
            ok = 0;
        }
        for (int i = 0; i < d; i++) {
            out->mean[i] += prop[k] * mk[i];
            for (int j = 0; j < d; j++) out->cov[i * d + j] += prop[k] * (ck[i * d + j] + mk[i] * mk[j]);
        }
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) out->cov[i * d + j] -= out->mean[i] * out->mean[j];
    if (!ok) {
        for (int i = 0; i < d; i++) out->mean[i] = NAN;
        for (size_t j = 0; j < dd; j++) out->cov[j] = NAN;
        snprintf(out->moments_note, sizeof out->moments_note, "a component has no finite moments (see components/<k>/moments)");
    }
    out->moments_ok = ok;
    ghf_params_free(&t);
    return 0;
}

int ghf_fit_out_finish(ghf_fit_out *out, const ghf_data *data)
{
    const int d = data->d;
    out->d = d;
    out->n_obs = data->n_global;
    out->mean = calloc((size_t)d, sizeof(double));
    out->cov = calloc((size_t)d * (size_t)d, sizeof(double));
    if (!out->mean || !out->cov) return 1;
    if (out->em.params.D ? ghf_params_alloc_factor(&out->outp, d, out->em.params.nf, 1) : ghf_params_alloc(&out->outp, d))
        return 1;
    ghf_data_params_to_data(data, &out->em.params, &out->outp);
    out->mu = out->outp.mu;
    if (data->scale_log2 != 0) {
        /* f_data(x) = f_internal(2^k x - shift) 2^(k d) */
        const double add = ghf_data_count(data) * d * data->scale_log2 * GHF_LN2;
        out->em.loglik += add;
        for (int i = 0; i < out->em.n_trace; i++) out->em.trace[i] += add;
        out->loglik_unweighted += (double)data->n_global * d * data->scale_log2 * GHF_LN2;
    }
    out->moments_ok = ghf_params_moments(&out->outp, out->mean, out->cov, out->moments_note,
                                         sizeof out->moments_note) == 0;
    const ghf_model m = {out->family, out->symmetric, out->fix_p, out->p_fixed};
    int k = ghf_model_nparams(&m, d) - d * (d + 1) / 2 + ghf_disp_nparams(d, out->sigma_r);
    if (out->components > 1) {
        if (mixture_finish(out, data) != 0) return 1;
        k = (out->components - 1) + out->components * k; /* proportions and K components */
    }
    out->aic = -2.0 * out->em.loglik + 2.0 * k;
    /* weighted: BIC with the effective number of observations (sum w)^2 / sum w^2 */
    out->bic = -2.0 * out->em.loglik + k * log(data->w ? out->n_eff : (double)data->n_global);
    /* ICL (Biernacki, Celeux & Govaert 2000): BIC plus twice the MAP entropy */
    if (out->components > 1) out->icl = out->bic - 2.0 * out->mix.map_ll;
    return 0;
}

int ghf_fit_out_se(MPI_Comm comm, ghf_fit_out *out, const ghf_data *data, int mode, int verbose, char *err,
                   size_t errlen)
{
    if (mode == GHF_SE_OFF) return 0;
    const double t0 = MPI_Wtime();
    ghf_se_input in = {0};
    in.d = data->d;
    in.x = data->x;
    in.nrows = data->nrows;
    in.n_global = data->n_global;
    in.theta = &out->em.params;
    in.scale_log2 = data->scale_log2;
    in.model = (ghf_model){out->family, out->symmetric, out->fix_p, out->p_fixed};
    in.status = out->em.status;
    in.boundary = out->em.outcome == GHF_EM_BOUNDARY;
    in.label = out->name;
    in.verbose = verbose;
    int rank;
    MPI_Comm_rank(comm, &rank);
    const int st = ghf_se_compute(comm, &in, (ghf_se_mode)mode, &out->se, err, errlen);
    out->have_se = st == 0 && rank == 0;
    out->phases[GHF_PH_TOTAL] += MPI_Wtime() - t0;
    return ghf_agree(comm, st, err, errlen) ? 1 : 0;
}

int ghf_fit_out_gather(MPI_Comm comm, ghf_fit_out *out)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    out->n_ranks = size;
    free(out->all_phases);
    out->all_phases = NULL;
    int oom = 0;
    if (rank == 0) {
        out->all_phases = ghf_test_fail("gather", NULL, 0) ? NULL : calloc((size_t)size * GHF_NPHASES, sizeof(double));
        oom = !out->all_phases;
    }
    /* agreed before the gather: a rank 0 without its buffer must not leave
     * the others waiting in MPI_Gather */
    if (ghf_any(comm, oom)) {
        free(out->all_phases);
        out->all_phases = NULL;
        return 1;
    }
    MPI_Gather(out->phases, GHF_NPHASES, MPI_DOUBLE, out->all_phases, GHF_NPHASES, MPI_DOUBLE, 0, comm);
    return 0;
}

int ghf_disp_nparams(int d, int r)
{
    /* full: d(d+1)/2; B modulo its rotations B -> B Q: d r - r(r-1)/2; D: d */
    return r < 0 ? d * (d + 1) / 2 : d * r - r * (r - 1) / 2 + d;
}

void ghf_fit_out_record(const ghf_fit_out *out, const char *backend, ghf_fit_record *rec)
{
    memset(rec, 0, sizeof *rec);
    const ghf_params *t = &out->outp;
    rec->factors = t->D ? t->nf : -1;
    rec->B = t->D ? t->B : NULL;
    rec->D = t->D;
    rec->name = out->name;
    rec->family = ghf_family_name(out->family);
    rec->n_obs = out->n_obs;
    rec->d = out->d;
    rec->n_iter = out->em.n_iter;
    rec->converged = out->em.converged;
    rec->status = out->em.status;
    rec->loglik = out->em.loglik;
    rec->aic = out->aic;
    rec->bic = out->bic;
    rec->elapsed_s = out->phases[GHF_PH_TOTAL];
    rec->loglik_trace = out->em.trace;
    rec->n_trace = out->em.n_trace;
    rec->mu = out->mu;
    rec->gamma = t->gamma;
    rec->sigma = t->sigma;
    rec->p = t->p;
    rec->a = t->a;
    rec->b = t->b;
    rec->mean = out->mean;
    rec->cov = out->cov;
    rec->moments_note = out->moments_ok ? NULL : out->moments_note;
    {
        const ghf_model m = {out->family, out->symmetric, out->fix_p, out->p_fixed};
        rec->symmetric = out->symmetric;
        rec->p_fixed = ghf_model_fixed_p(&m, out->d);
    }
    rec->n_phases = GHF_NPHASES;
    rec->phase_names = ghf_phase_names;
    rec->n_ranks = out->n_ranks;
    rec->phase_s = out->all_phases;
    rec->backend = backend;
    rec->n_dropped = out->n_dropped;
    rec->se = out->have_se ? &out->se.v : NULL;
    rec->weights = out->weights;
    rec->weight_sum = out->weight_sum;
    rec->n_eff = out->n_eff;
    rec->loglik_unweighted = out->loglik_unweighted;
    rec->missing = out->missing;
    rec->n_incomplete = out->n_incomplete;
    rec->missing_fraction = out->missing_fraction;
    rec->missing_counts = out->missing_counts;
    rec->n_missing_counts = out->missing_counts ? out->d + 1 : 0;
    if (out->components > 1 && out->mx_buf) {
        const int K = out->components, d = out->d;
        const size_t dd = (size_t)d * d;
        rec->n_components = K;
        rec->mix_prop = out->mx_buf;
        rec->mix_mu = rec->mix_prop + K;
        rec->mix_gamma = rec->mix_mu + (size_t)K * d;
        rec->mix_sigma = rec->mix_gamma + (size_t)K * d;
        rec->mix_pab = rec->mix_sigma + (size_t)K * dd;
        rec->mix_mean = rec->mix_pab + 3 * (size_t)K;
        rec->mix_cov = rec->mix_mean + (size_t)K * d;
        rec->mix_note = out->mx_note;
        rec->icl = out->icl;
        rec->n_starts = out->mix.n_starts;
        rec->start_ll = out->mix.start_ll;
        rec->start_iter = out->mix.start_iter;
        rec->start_conv = out->mix.start_conv;
    }
}

void ghf_fit_out_free(ghf_fit_out *out)
{
    ghf_em_result_free(&out->em);
    ghf_params_free(&out->outp);
    free(out->mean);
    free(out->cov);
    free(out->all_phases);
    out->mu = out->mean = out->cov = out->all_phases = NULL;
    if (out->have_se) ghf_se_free(&out->se);
    out->have_se = 0;
    ghf_em_mix_free(&out->mix);
    free(out->mx_buf);
    free(out->mx_notes);
    free(out->mx_note);
    out->mx_buf = NULL;
    out->mx_notes = NULL;
    out->mx_note = NULL;
}

static void print_vec(const char *name, const double *v, int d)
{
    printf("  %-6s [", name);
    for (int j = 0; j < d; j++) printf("%s% .8g", j ? ", " : "", v[j]);
    printf("]\n");
}

void ghf_fit_record_print(const ghf_fit_record *r, int verbose_params)
{
    const int d = r->d;
    ghf_model m = {GHF_FAMILY_GH, r->symmetric, 0, 0.0};
    const int known = ghf_family_parse(r->family, &m.family) == 0;
    if (known && !isnan(r->p_fixed) && isnan(ghf_model_fixed_p(&m, d))) {
        m.fix_p = 1;
        m.p = r->p_fixed;
    }
    char label[128];
    printf("fit %s (%s): n = %lld, d = %d, %d iterations, %s\n", r->name,
           known ? ghf_model_label(&m, d, label, sizeof label) : r->family, (long long)r->n_obs, d, r->n_iter, r->status);
    printf("  loglik % .12e   aic %.6e   bic %.6e\n", r->loglik, r->aic, r->bic);
    if (verbose_params && r->n_components > 1) {
        const int show = d <= 8 ? d : 8;
        printf("  icl %.6e   %d components (by decreasing proportion)\n", r->icl, r->n_components);
        for (int k = 0; k < r->n_components; k++) {
            printf("  component %d: proportion %.8g   p % .8g   a %.8g   b %.8g\n", k, r->mix_prop[k],
                   r->mix_pab[3 * k], r->mix_pab[3 * k + 1], r->mix_pab[3 * k + 2]);
            print_vec("mu", r->mix_mu + (size_t)k * d, show);
        }
        if (r->mean && isfinite(r->mean[0])) print_vec("E[X]", r->mean, show);
        if (d > show) printf("  (first %d of %d coordinates shown)\n", show, d);
    } else if (verbose_params) {
        printf("  p % .10g   a %.10g   b %.10g   (GIG subordinator, |Sigma| = 1 gauge)\n", r->p, r->a, r->b);
        const int show = d <= 8 ? d : 8;
        print_vec("mu", r->mu, show);
        print_vec("gamma", r->gamma, show);
        for (int i = 0; i < show; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, i ? "" : "sigma");
            print_vec(nm, r->sigma + (size_t)i * d, show);
        }
        if (r->mean && isfinite(r->mean[0])) print_vec("E[X]", r->mean, show);
        if (d > show) printf("  (first %d of %d coordinates shown)\n", show, d);
    }
    if (r->phase_s && r->n_ranks > 0) {
        printf("profile (wall seconds over %d rank%s):\n  %-10s %12s %12s %12s\n", r->n_ranks,
               r->n_ranks == 1 ? "" : "s", "phase", "min", "mean", "max");
        for (int p = 0; p < r->n_phases; p++) {
            double mn = INFINITY, mx = -INFINITY, sm = 0.0;
            for (int k = 0; k < r->n_ranks; k++) {
                const double v = r->phase_s[k * r->n_phases + p];
                mn = fmin(mn, v);
                mx = fmax(mx, v);
                sm += v;
            }
            printf("  %-10s %12.6f %12.6f %12.6f\n", r->phase_names ? r->phase_names[p] : "?", mn, sm / r->n_ranks, mx);
        }
    }
    fflush(stdout);
}
