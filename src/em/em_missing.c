/* em_missing.c - the E-step of the rows with missing coordinates (--missing
 * em): rows grouped by missingness pattern, one factorisation of Sigma_OO per
 * pattern, the conditional moments of the missing coordinates given Y and the
 * observed ones (docs/design.md "Missing coordinates"). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "bessel_plan.h"
#include "em.h"
#include "xreduce.h"

typedef struct pattern {
    int64_t first, count; /* rows order[first .. first + count) */
    int no, nm;           /* observed, missing coordinates */
    int *io, *im;         /* their indices */
} pattern;

struct ghf_missing {
    const double *x, *w; /* rows (NaN: missing) and their weights (NULL: 1) */
    double *xs, *ws;     /* the same sorted by pattern (contiguous reads in the E-step) */
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
    free(m->xs);
    free(m->ws);
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
    m->xs = malloc((size_t)(nrows > 0 ? nrows : 1) * (size_t)d * sizeof(double));
    m->ws = w ? malloc((size_t)(nrows > 0 ? nrows : 1) * sizeof(double)) : NULL;
    if (!m->xs || (w && !m->ws)) goto oom;
    for (int64_t i = 0; i < nrows; i++) {
        memcpy(m->xs + i * d, x + m->order[i] * d, (size_t)d * sizeof(double));
        if (w) m->ws[i] = w[m->order[i]];
    }
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

/* q = |L_O^-1 (x_O - mu_O)|^2 and zw of one row (its observed coordinates) */
static void row_qzw(const pattern *p, const pat_work *pw, const ghf_params *t, const double *xi, double *q,
                    double *zw)
{
    const int no = p->no;
    const double *Li = pw->g.Linv;
    double qq = 0.0, zz = 0.0;
    for (int a = 0; a < no; a++) {
        double z = 0.0;
        for (int b = 0; b <= a; b++) z += Li[a * no + b] * (xi[p->io[b]] - t->mu[p->io[b]]);
        qq += z * z;
        zz += z * pw->g.w[a];
    }
    *q = qq;
    *zw = zz;
}

/* One row's share (weight w) of the statistics into acc (layout estep.h; s6
 * lower triangle), from its posterior moments pt.  cv: scratch [2d].
 * Returns 1 if its moments are finite. */
static int row_stats(const ghf_missing *m, const pattern *p, const pat_work *pw, const ghf_params *t,
                     const double *xi, double w, double zw, ghf_point pt, double *cv, double *acc)
{
    const int d = m->d, no = p->no, nm = p->nm;
    double *dx = cv + d; /* x_O - mu_O */
    for (int a = 0; a < no; a++) dx[a] = xi[p->io[a]] - t->mu[p->io[a]];
    if (!(isfinite(pt.u) && isfinite(pt.v) && isfinite(pt.l) && isfinite(pt.ll))) return 0;
    /* E[x | y, x_O] = cv + ev y: cv_O = x_O, ev_O = 0; cv_M = mu_M + B (x_O - mu_O), ev_M = bvec */
    for (int a = 0; a < no; a++) cv[p->io[a]] = xi[p->io[a]];
    for (int r = 0; r < nm; r++) {
        double s = t->mu[p->im[r]];
        for (int a = 0; a < no; a++) s += pw->B[r * no + a] * dx[a];
        cv[p->im[r]] = s;
    }
    const double u = pt.u, v = pt.v, wu = w * u;
    acc[GHF_ST_N] += w;
    acc[GHF_ST_S1] += wu;
    acc[GHF_ST_S2] += w * v;
    acc[GHF_ST_S3] += w * pt.l;
    acc[GHF_ST_LL] += w * pt.ll;
    acc[GHF_ST_ZWABS] += w * fabs(zw);
    double *s4 = acc + GHF_ST_S4, *s5 = acc + ghf_stats_s5(d), *s6 = acc + ghf_stats_s6(d);
    for (int j = 0; j < d; j++) {
        s4[j] += w * cv[j];
        s5[j] += wu * cv[j];
        /* E[x x^T / Y] = cv cv^T u + (cv ev^T + ev cv^T + ev ev^T v + C on the missing block) */
        const double cj = wu * cv[j];
        double *row = s6 + (size_t)j * d;
        for (int k = 0; k <= j; k++) row[k] += cj * cv[k];
    }
    /* the terms of ev (nonzero on the missing coordinates only) */
    for (int r = 0; r < nm; r++) {
        const int j = p->im[r];
        const double e = pw->bvec[r];
        s4[j] += w * e * v;
        s5[j] += w * e;
        for (int k = 0; k < d; k++) { /* cv_j ev_k + ev_j cv_k, lower triangle: the pair (j, k) */
            const int hi = j > k ? j : k, lo = j > k ? k : j;
            s6[(size_t)hi * d + lo] += (k == j ? 2.0 : 1.0) * w * e * cv[k];
        }
        for (int s2 = 0; s2 < nm; s2++) {
            const int k = p->im[s2];
            if (k <= j) s6[(size_t)j * d + k] += w * (e * pw->bvec[s2] * v + pw->C[r * nm + s2]);
        }
    }
    return 1;
}

/* rows per work unit: its partial sums (row order) are added exactly */
#define MISS_CHUNK 256

/* acc[len] (s6: lower triangle) added exactly to xs */
static void acc_flush(int d, const double *acc, ghf_xsum *xs)
{
    for (int i = 0; i < GHF_ST_S4 + 2 * d; i++) ghf_xsum_add(&xs[i], acc[i]);
    for (int j = 0; j < d; j++)
        for (int c = 0; c <= j; c++) ghf_xsum_add(&xs[ghf_stats_s6(d) + j * d + c], acc[ghf_stats_s6(d) + j * d + c]);
}

/* The pattern's scratch in buf (at most 5 d^2 + 3 d doubles). */
static void pat_work_bind(const pattern *p, double *b, pat_work *pw)
{
    const int no = p->no, nm = p->nm;
    pw->sub.mu = b, b += no;
    pw->sub.gamma = b, b += no;
    pw->sub.sigma = b, b += (size_t)no * no;
    pw->g.L = b, b += (size_t)no * no;
    pw->g.Linv = b, b += (size_t)no * no;
    pw->g.w = b, b += no;
    pw->si = b, b += (size_t)no * no;
    pw->B = b, b += (size_t)nm * no;
    pw->bvec = b, b += nm;
    pw->C = b;
}

/* doubles of a pattern's scratch (pat_work_bind) */
static size_t pat_work_len(const pattern *p)
{
    return 4 * (size_t)p->no * p->no + 3 * (size_t)p->no + (size_t)p->nm * p->no + p->nm + (size_t)p->nm * p->nm;
}

/* patterns' scratch per batch: at most this many doubles (32 MiB) beyond one pattern */
#define MISS_BATCH_DOUBLES ((size_t)4 << 20)

/* per batch: the Bessel plans, one per number of observed coordinates
 * (the posterior order p - |O|/2), over the range of the rows' arguments,
 * where enough rows share the order to pay for them (as the CPU backend) */
typedef struct order_plans {
    ghf_bessel_plan *plan; /* [d + 1] */
    int *use;              /* [d + 1] */
    double *zmin, *zmax;   /* [d + 1] */
    int64_t *rows;         /* [d + 1] */
} order_plans;

static void build_plans(const ghf_missing *m, const ghf_params *t, int k0, int k1, const pat_work *pw,
                        const double *zv, int nt, order_plans *op)
{
    const int d = m->d;
    for (int o = 0; o <= d; o++) {
        op->zmin[o] = INFINITY;
        op->zmax[o] = 0.0;
        op->rows[o] = 0;
        op->use[o] = 0;
    }
    for (int k = k0; k < k1; k++) {
        const pattern *p = &m->pat[k];
        if (pw[k].g.c.A == 0.0) continue; /* the Student t face: no Bessel function */
        op->rows[p->no] += p->count;
        for (int64_t r = 0; r < p->count; r++) {
            const double z = zv[p->first + r];
            if (z > 0.0 && z < op->zmin[p->no]) op->zmin[p->no] = z;
            if (z > op->zmax[p->no]) op->zmax[p->no] = z;
        }
    }
    for (int o = 1; o <= d; o++) {
        if (op->rows[o] < 64 || !(op->zmax[o] > 0.0) || !isfinite(op->zmax[o])) continue;
        double zmin = op->zmin[o];
        if (!(zmin > 0.0) || zmin < ldexp(op->zmax[o], -30)) zmin = ldexp(op->zmax[o], -30);
        ghf_bessel_plan *pl = &op->plan[o];
        if (ghf_bessel_plan_setup(pl, t->p - 0.5 * o, zmin, op->zmax[o]) != 0) continue;
        const int nn = ghf_bessel_plan_num_nodes(pl), np = ghf_bessel_plan_num_pieces(pl);
        if ((int64_t)nn * 4 > op->rows[o]) continue;
#pragma omp parallel num_threads(nt)
        {
#pragma omp for schedule(dynamic, 4)
            for (int i = 0; i < nn; i++) ghf_bessel_plan_node(pl, i);
#pragma omp for schedule(static)
            for (int i = 0; i < np; i++) ghf_bessel_plan_finish_piece(pl, i);
        }
        op->use[o] = 1;
    }
}

int ghf_missing_estep(MPI_Comm comm, const ghf_missing *m, const ghf_params *t, int weighted, double *stats,
                      char *err, size_t errlen)
{
    const int d = t->d, len = ghf_stats_len(d);
    const int nt = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    const size_t tl = (size_t)len + 2 * (size_t)d; /* per thread: acc, then cv */
    const int npat = m ? m->npat : 0;
    const int64_t nr = m ? m->nrows : 0;
    ghf_xsum *xs = malloc((size_t)nt * (size_t)len * sizeof(ghf_xsum));
    double *tacc = malloc((size_t)nt * tl * sizeof(double));
    double *buf = malloc((MISS_BATCH_DOUBLES + 5 * (size_t)d * d + 3 * (size_t)d + 8) * sizeof(double));
    pat_work *pw = calloc((size_t)(npat > 0 ? npat : 1), sizeof(pat_work));
    int *bad = calloc((size_t)(npat > 0 ? npat : 1), sizeof(int));
    int64_t *unit = malloc((size_t)(nr / MISS_CHUNK + npat + 1) * 2 * sizeof(int64_t));
    double *qzz = malloc((size_t)(nr > 0 ? nr : 1) * 3 * sizeof(double)); /* q, zw, z by sorted position */
    order_plans op;
    op.plan = malloc((size_t)(d + 1) * sizeof(ghf_bessel_plan));
    op.use = calloc((size_t)(d + 1), sizeof(int));
    op.zmin = malloc((size_t)(d + 1) * 2 * sizeof(double));
    op.zmax = op.zmin ? op.zmin + d + 1 : NULL;
    op.rows = malloc((size_t)(d + 1) * sizeof(int64_t));
    if (ghf_any(comm, !xs || !tacc || !buf || !pw || !bad || !unit || !qzz || !op.plan || !op.use || !op.zmin ||
                          !op.rows)) {
        snprintf(err, errlen, "out of memory (rows with missing coordinates)");
        free(xs), free(tacc), free(buf), free(pw), free(bad), free(unit), free(qzz);
        free(op.plan), free(op.use), free(op.zmin), free(op.rows);
        return 1;
    }
    double *qv = qzz, *zwv = qzz + nr, *zv = qzz + 2 * nr;
    for (size_t i = 0; i < (size_t)nt * len; i++) ghf_xsum_init(&xs[i]);
    for (int k0 = 0; k0 < npat;) {
        /* a batch of patterns whose scratch fits in buf, and its work units (pattern, chunk) */
        int k1 = k0;
        size_t used = 0;
        int64_t nu = 0;
        while (k1 < npat && (k1 == k0 || used + pat_work_len(&m->pat[k1]) <= MISS_BATCH_DOUBLES)) {
            pat_work_bind(&m->pat[k1], buf + used, &pw[k1]);
            used += pat_work_len(&m->pat[k1]);
            for (int64_t c = 0; c * MISS_CHUNK < m->pat[k1].count; c++) {
                unit[2 * nu] = k1;
                unit[2 * nu + 1] = c;
                nu++;
            }
            k1++;
        }
        /* the patterns' marginal laws; every row's q, zw and Bessel argument */
#pragma omp parallel num_threads(nt)
        {
#pragma omp for schedule(dynamic, 1)
            for (int k = k0; k < k1; k++) bad[k] = pat_setup(&m->pat[k], t, &pw[k]) != 0;
#pragma omp for schedule(static)
            for (int64_t q = 0; q < nu; q++) {
                const int k = (int)unit[2 * q];
                const pattern *p = &m->pat[k];
                const int64_t ch = unit[2 * q + 1];
                const int64_t r1 = (ch + 1) * MISS_CHUNK < p->count ? (ch + 1) * MISS_CHUNK : p->count;
                for (int64_t r = ch * MISS_CHUNK; r < r1; r++) {
                    const int64_t pos = p->first + r;
                    if (bad[k]) {
                        zv[pos] = qv[pos] = zwv[pos] = 0.0;
                        continue;
                    }
                    row_qzw(p, &pw[k], t, m->xs + pos * d, &qv[pos], &zwv[pos]);
                    zv[pos] = ghf_estep_arg(&pw[k].g.c, qv[pos]);
                }
            }
        }
        build_plans(m, t, k0, k1, pw, zv, nt, &op);
#pragma omp parallel num_threads(nt)
        {
            const int tid = omp_get_thread_num();
#pragma omp for schedule(static)
            for (int64_t q = 0; q < nu; q++) {
                const int k = (int)unit[2 * q];
                const pattern *p = &m->pat[k];
                const ghf_estep_consts *c = &pw[k].g.c;
                const ghf_bessel_plan *pl = op.use[p->no] && c->A != 0.0 ? &op.plan[p->no] : NULL;
                double *acc = tacc + (size_t)tid * tl, *cv = acc + len;
                memset(acc, 0, (size_t)len * sizeof(double));
                const int64_t ch = unit[2 * q + 1];
                const int64_t r1 = (ch + 1) * MISS_CHUNK < p->count ? (ch + 1) * MISS_CHUNK : p->count;
                if (bad[k]) { /* Sigma_OO not positive definite: a bad E-step */
                    acc[GHF_ST_NBAD] = (double)(r1 - ch * MISS_CHUNK);
                } else {
                    for (int64_t r = ch * MISS_CHUNK; r < r1; r++) {
                        const int64_t pos = p->first + r;
                        const double w = weighted && m->ws ? m->ws[pos] : 1.0;
                        if (w == 0.0) continue;
                        const ghf_bessel_eval bk = pl ? ghf_bessel_plan_eval(pl, zv[pos]) : ghf_bessel_fused(c->P, zv[pos]);
                        const ghf_point pt = ghf_estep_point(c, qv[pos], zwv[pos], bk);
                        if (!row_stats(m, p, &pw[k], t, m->xs + pos * d, w, zwv[pos], pt, cv, acc))
                            acc[GHF_ST_NBAD] += 1.0;
                    }
                }
                acc_flush(d, acc, xs + (size_t)tid * len);
            }
        }
        k0 = k1;
    }
    for (int th = 1; th < nt; th++)
        for (int i = 0; i < len; i++) ghf_xsum_merge(&xs[i], &xs[(size_t)th * len + i]);
    const int rc = ghf_xsum_allreduce(comm, xs, len);
    for (int i = 0; i < len; i++)
        if (i != GHF_ST_STOP) stats[i] += ghf_xsum_value(&xs[i]);
    free(xs), free(tacc), free(buf), free(pw), free(bad), free(unit), free(qzz);
    free(op.plan), free(op.use), free(op.zmin), free(op.rows);
    if (rc) snprintf(err, errlen, "the all-reduce of the statistics of the rows with missing coordinates failed");
    return rc ? 1 : 0;
}
