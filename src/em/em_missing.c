/* em_missing.c - the E-step of the rows with missing coordinates (--missing
 * em): rows grouped by missingness pattern, one factorisation of Sigma_OO per
 * pattern, the conditional moments of the missing coordinates given Y and the
 * observed ones (docs/design.md "Missing coordinates"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "em.h"
#include "xreduce.h"

typedef struct pattern {
    int64_t first, count; /* rows order[first .. first + count) */
    int no, nm;           /* observed, missing coordinates */
    int *io, *im;         /* their indices */
} pattern;

struct ghf_missing {
    const double *x, *w; /* rows (NaN: missing) and their weights (NULL: 1) */
    int64_t nrows;
    int d;
    int64_t *order; /* rows sorted by pattern */
    pattern *pat;
    int npat;
    int *idx; /* the patterns' index lists */
};

static const double *g_sort_x; /* qsort's context: the rows, d columns */
static int g_sort_d;

/* rows by pattern (the NaN mask, coordinate 0 first), then by row index */
static int cmp_rows(const void *pa, const void *pb)
{
    const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    const double *xa = g_sort_x + a * g_sort_d, *xb = g_sort_x + b * g_sort_d;
    for (int j = 0; j < g_sort_d; j++) {
        const int ma = isnan(xa[j]), mb = isnan(xb[j]);
        if (ma != mb) return ma - mb;
    }
    return (a > b) - (a < b);
}

static int same_pattern(const double *xa, const double *xb, int d)
{
    for (int j = 0; j < d; j++)
        if (isnan(xa[j]) != isnan(xb[j])) return 0;
    return 1;
}

void ghf_missing_free(ghf_missing *m)
{
    if (!m) return;
    free(m->order);
    free(m->pat);
    free(m->idx);
    free(m);
}

ghf_missing *ghf_missing_create(const double *x, const double *w, int64_t nrows, int d)
{
    ghf_missing *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->x = x;
    m->w = w;
    m->nrows = nrows;
    m->d = d;
    m->order = malloc((size_t)(nrows > 0 ? nrows : 1) * sizeof(int64_t));
    if (!m->order) goto oom;
    for (int64_t i = 0; i < nrows; i++) m->order[i] = i;
    g_sort_x = x;
    g_sort_d = d;
    qsort(m->order, (size_t)nrows, sizeof(int64_t), cmp_rows);
    int np = 0;
    for (int64_t i = 0; i < nrows; i++)
        if (i == 0 || !same_pattern(x + m->order[i] * d, x + m->order[i - 1] * d, d)) np++;
    m->pat = calloc((size_t)(np > 0 ? np : 1), sizeof(pattern));
    m->idx = malloc((size_t)(np > 0 ? np : 1) * (size_t)d * sizeof(int));
    if (!m->pat || !m->idx) goto oom;
    m->npat = np;
    int k = -1;
    for (int64_t i = 0; i < nrows; i++) {
        const double *xi = x + m->order[i] * d;
        if (i == 0 || !same_pattern(xi, x + m->order[i - 1] * d, d)) {
            pattern *p = &m->pat[++k];
            p->first = i;
            p->io = m->idx + (size_t)k * d;
            for (int j = 0; j < d; j++)
                if (!isnan(xi[j])) p->io[p->no++] = j;
            p->im = p->io + p->no;
            for (int j = 0; j < d; j++)
                if (isnan(xi[j])) p->im[p->nm++] = j;
        }
        m->pat[k].count++;
    }
    return m;
oom:
    ghf_missing_free(m);
    return NULL;
}

int64_t ghf_missing_rows(const ghf_missing *m)
{
    return m ? m->nrows : 0;
}

/* Per pattern: the marginal law of x_O (derived), B = Sigma_MO Sigma_OO^-1,
 * bvec = gamma_M - B gamma_O, C = Sigma_MM - B Sigma_OM.  0, or -1 when
 * Sigma_OO is not positive definite. */
typedef struct pat_work {
    ghf_params sub;
    ghf_derived g;
    double *B, *bvec, *C, *si; /* [nm*no], [nm], [nm*nm], [no*no] Sigma_OO^-1 */
} pat_work;

static int pat_setup(const pattern *p, const ghf_params *t, pat_work *pw)
{
    const int d = t->d, no = p->no, nm = p->nm;
    pw->sub.d = no;
    for (int a = 0; a < no; a++) {
        pw->sub.mu[a] = t->mu[p->io[a]];
        pw->sub.gamma[a] = t->gamma[p->io[a]];
        for (int b = 0; b < no; b++) pw->sub.sigma[a * no + b] = t->sigma[p->io[a] * d + p->io[b]];
    }
    pw->sub.p = t->p;
    pw->sub.a = t->a;
    pw->sub.b = t->b;
    pw->g.d = no;
    if (ghf_derive(&pw->sub, &pw->g) != 0) return -1;
    /* Sigma_OO^-1 = Linv^T Linv */
    for (int a = 0; a < no; a++)
        for (int b = 0; b < no; b++) {
            double s = 0.0;
            for (int k = a > b ? a : b; k < no; k++) s += pw->g.Linv[k * no + a] * pw->g.Linv[k * no + b];
            pw->si[a * no + b] = s;
        }
    for (int r = 0; r < nm; r++) {
        const int jr = p->im[r];
        for (int a = 0; a < no; a++) {
            double s = 0.0;
            for (int b = 0; b < no; b++) s += t->sigma[jr * d + p->io[b]] * pw->si[b * no + a];
            pw->B[r * no + a] = s;
        }
        double bg = t->gamma[jr];
        for (int a = 0; a < no; a++) bg -= pw->B[r * no + a] * t->gamma[p->io[a]];
        pw->bvec[r] = bg;
        for (int c = 0; c < nm; c++) {
            double s = t->sigma[jr * d + p->im[c]];
            for (int a = 0; a < no; a++) s -= pw->B[r * no + a] * t->sigma[p->io[a] * d + p->im[c]];
            pw->C[r * nm + c] = s;
        }
    }
    return 0;
}

/* One row's share (weight w) of the statistics into acc (layout estep.h; s6
 * lower triangle).  cv, ev: scratch [d].  Returns 1 if its moments are finite. */
static int row_stats(const ghf_missing *m, const pattern *p, const pat_work *pw, const ghf_params *t,
                     const double *xi, double w, double *cv, double *ev, double *acc)
{
    const int d = m->d, no = p->no, nm = p->nm;
    const double *Li = pw->g.Linv;
    double q = 0.0, zw = 0.0;
    for (int a = 0; a < no; a++) {
        double z = 0.0;
        for (int b = 0; b <= a; b++) z += Li[a * no + b] * (xi[p->io[b]] - t->mu[p->io[b]]);
        q += z * z;
        zw += z * pw->g.w[a];
    }
    const ghf_estep_consts *c = &pw->g.c;
    const ghf_point pt = ghf_estep_point(c, q, zw, ghf_bessel_fused(c->P, ghf_estep_arg(c, q)));
    if (!(isfinite(pt.u) && isfinite(pt.v) && isfinite(pt.l) && isfinite(pt.ll))) return 0;
    /* E[x | y, x_O] = cv + ev y: cv_O = x_O, ev_O = 0; cv_M = mu_M + B (x_O - mu_O), ev_M = bvec */
    for (int a = 0; a < no; a++) {
        cv[p->io[a]] = xi[p->io[a]];
        ev[p->io[a]] = 0.0;
    }
    for (int r = 0; r < nm; r++) {
        double s = t->mu[p->im[r]];
        for (int a = 0; a < no; a++) s += pw->B[r * no + a] * (xi[p->io[a]] - t->mu[p->io[a]]);
        cv[p->im[r]] = s;
        ev[p->im[r]] = pw->bvec[r];
    }
    const double u = pt.u, v = pt.v;
    acc[GHF_ST_N] += w;
    acc[GHF_ST_S1] += w * u;
    acc[GHF_ST_S2] += w * v;
    acc[GHF_ST_S3] += w * pt.l;
    acc[GHF_ST_LL] += w * pt.ll;
    acc[GHF_ST_ZWABS] += w * fabs(zw);
    double *s4 = acc + GHF_ST_S4, *s5 = acc + ghf_stats_s5(d), *s6 = acc + ghf_stats_s6(d);
    for (int j = 0; j < d; j++) {
        s4[j] += w * (cv[j] + ev[j] * v);
        s5[j] += w * (cv[j] * u + ev[j]);
        /* E[x x^T / Y] = cv cv^T u + cv ev^T + ev cv^T + ev ev^T v (+ C on the missing block) */
        for (int k = 0; k <= j; k++)
            s6[j * d + k] += w * (cv[j] * cv[k] * u + cv[j] * ev[k] + ev[j] * cv[k] + ev[j] * ev[k] * v);
    }
    for (int r = 0; r < nm; r++)
        for (int s = 0; s < nm; s++) {
            const int j = p->im[r], k = p->im[s];
            if (k <= j) s6[j * d + k] += w * pw->C[r * nm + s];
        }
    return 1;
}

int ghf_missing_estep(MPI_Comm comm, const ghf_missing *m, const ghf_params *t, int weighted, double *stats,
                      char *err, size_t errlen)
{
    const int d = t->d, len = ghf_stats_len(d);
    ghf_xsum *xs = malloc((size_t)len * sizeof(ghf_xsum));
    double *acc = malloc((size_t)len * sizeof(double));
    /* scratch for every pattern: sub-model (mu, gamma, sigma), factors, B, bvec, C, Sigma_OO^-1, cv, ev */
    double *buf = malloc(((size_t)2 * d + 5 * (size_t)d * d + 3 * (size_t)d + 8) * sizeof(double));
    int fail = !xs || !acc || !buf;
    if (ghf_any(comm, fail)) {
        snprintf(err, errlen, "out of memory (rows with missing coordinates)");
        free(xs), free(acc), free(buf);
        return 1;
    }
    for (int i = 0; i < len; i++) ghf_xsum_init(&xs[i]);
    pat_work pw;
    memset(&pw, 0, sizeof pw);
    for (int k = 0; m && k < m->npat; k++) {
        const pattern *p = &m->pat[k];
        const int no = p->no, nm = p->nm;
        double *b = buf;
        pw.sub.mu = b, b += no;
        pw.sub.gamma = b, b += no;
        pw.sub.sigma = b, b += (size_t)no * no;
        pw.g.L = b, b += (size_t)no * no;
        pw.g.Linv = b, b += (size_t)no * no;
        pw.g.w = b, b += no;
        pw.si = b, b += (size_t)no * no;
        pw.B = b, b += (size_t)nm * no;
        pw.bvec = b, b += nm;
        pw.C = b, b += (size_t)nm * nm;
        double *cv = b, *ev = b + d;
        memset(acc, 0, (size_t)len * sizeof(double));
        if (pat_setup(p, t, &pw) != 0) {
            acc[GHF_ST_NBAD] += (double)p->count; /* Sigma_OO not positive definite: a bad E-step */
        } else {
            for (int64_t r = 0; r < p->count; r++) {
                const int64_t i = m->order[p->first + r];
                const double w = weighted && m->w ? m->w[i] : 1.0;
                if (w == 0.0) continue;
                if (!row_stats(m, p, &pw, t, m->x + i * d, w, cv, ev, acc)) acc[GHF_ST_NBAD] += 1.0;
            }
        }
        for (int i = 0; i < GHF_ST_S4 + 2 * d; i++) ghf_xsum_add(&xs[i], acc[i]);
        for (int j = 0; j < d; j++)
            for (int c = 0; c <= j; c++) ghf_xsum_add(&xs[ghf_stats_s6(d) + j * d + c], acc[ghf_stats_s6(d) + j * d + c]);
    }
    const int rc = ghf_xsum_allreduce(comm, xs, len);
    for (int i = 0; i < len; i++)
        if (i != GHF_ST_STOP) stats[i] += ghf_xsum_value(&xs[i]);
    free(xs), free(acc), free(buf);
    if (rc) snprintf(err, errlen, "the all-reduce of the statistics of the rows with missing coordinates failed");
    return rc ? 1 : 0;
}
