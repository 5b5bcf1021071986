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
#include "cpu_block.h"
#include "em.h"
#include "xreduce.h"

typedef struct pattern {
    int64_t first, count; /* rows order[first .. first + count) */
    int no, nm;           /* observed, missing coordinates */
    int *io, *im;         /* their indices */
    double rmax;          /* the largest |x_O| of its rows (bounds their Bessel arguments) */
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
    const ghf_cpu_kernels *k; /* the CPU backend's block kernels for this CPU */
    int scalar;               /* ghf_missing_tune: the per-row path for every d */
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
    m->k = ghf__cpu_kernels();
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
        double r2 = 0.0;
        for (int j = 0; j < d; j++) r2 += isnan(xi[j]) ? 0.0 : xi[j] * xi[j];
        m->pat[k].rmax = fmax(m->pat[k].rmax, sqrt(r2));
    }
    return m;
oom:
    ghf_missing_free(m);
    return NULL;
}

void ghf_missing_tune(ghf_missing *m, int scalar)
{
    if (m) m->scalar = scalar ? 1 : 0;
}

int64_t ghf_missing_rows(const ghf_missing *m)
{
    return m ? m->nrows : 0;
}

int ghf_missing_npat(const ghf_missing *m)
{
    return m ? m->npat : 0;
}

void ghf_missing_pattern(const ghf_missing *m, int k, const double **x, const double **w, int64_t *count, int *no,
                         const int **io, int *nm, const int **im)
{
    const pattern *p = &m->pat[k];
    *x = m->xs + (size_t)p->first * m->d;
    *w = m->ws ? m->ws + p->first : NULL;
    *count = p->count;
    *no = p->no;
    *io = p->io;
    *nm = p->nm;
    *im = p->im;
}

/* Per pattern: the marginal law of x_O (derived), B = Sigma_MO Sigma_OO^-1,
 * bvec = gamma_M - B gamma_O, C = Sigma_MM - B Sigma_OM.  0, or -1 when
 * Sigma_OO is not positive definite. */
typedef struct pat_work {
    ghf_params sub;
    ghf_derived g;
    double zmax; /* a bound on the Bessel arguments of the pattern's rows */
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
    /* q = |L^-1 (x_O - mu_O)|^2 <= |L^-1|_F^2 (|x_O| + |mu_O|)^2 */
    double lf = 0.0, mu2 = 0.0;
    for (int a = 0; a < no * no; a++) lf += pw->g.Linv[a] * pw->g.Linv[a];
    for (int a = 0; a < no; a++) mu2 += pw->sub.mu[a] * pw->sub.mu[a];
    const double rb = p->rmax + sqrt(mu2);
    pw->zmax = ghf_estep_arg(&pw->g.c, lf * rb * rb);
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

/* rows per work unit: its partial sums (row order) are added exactly; one
 * block of the CPU backend's kernels */
#define MISS_CHUNK 256
_Static_assert(MISS_CHUNK <= GHF_CPU_BLOCK, "a work unit is one block of the kernels");

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

/* ---- the block path (d <= GHF_CPU_SMALL_D): the CPU backend's kernels on
 * a work unit's rows, eight at a time (src/backend/cpu_block.h) ---- */

/* doubles of a thread's scratch for the block path */
static size_t blk_scratch_len(int d)
{
    return 2 * (size_t)MISS_CHUNK * ghf__cpu_pack_stride(d) + 8 * (size_t)MISS_CHUNK +
           (size_t)ghf__cpu_sums_scratch(d) + (size_t)d;
}

/* The unit's rows packed (xF), their observed columns packed (xO), and
 * their q and zw */
static void blk_qzw(const ghf_missing *m, const pattern *p, const pat_work *pw, int64_t pos0, int nb, double *xF,
                    double *xO, double *q, double *zw)
{
    const int d = m->d, no = p->no, dp = ghf__cpu_pack_stride(d), dpo = ghf__cpu_pack_stride(no);
    m->k->pack(d, m->xs + (size_t)pos0 * d, nb, xF);
    for (int g = 0; g < (nb + 7) / 8; g++) {
        const double *src = xF + (size_t)g * 8 * dp;
        double *dst = xO + (size_t)g * 8 * dpo;
        for (int a = 0; a < no; a++) memcpy(dst + 8 * a, src + 8 * p->io[a], 8 * sizeof(double));
        for (int a = no; a < dpo; a++) memset(dst + 8 * a, 0, 8 * sizeof(double));
    }
    m->k->qzw(no, xO, nb, pw->sub.mu, pw->g.Linv, pw->g.w, q, zw, NULL, 0);
}

/* The unit's packed rows (xF) completed by their conditional means given
 * Y = 0: x_M = mu_M + B (x_O - mu_O), eight rows at a time (the padding
 * rows stay 0) */
static void blk_complete(const pattern *p, const pat_work *pw, const ghf_params *t, int nb, double *xF)
{
    const int d = t->d, no = p->no, nm = p->nm, dp = ghf__cpu_pack_stride(d);
    for (int g = 0; g < (nb + 7) / 8; g++) {
        double *xg = xF + (size_t)g * 8 * dp;
        const int nr = nb - 8 * g < 8 ? nb - 8 * g : 8;
        for (int r = 0; r < nm; r++) {
            const double *br = pw->B + (size_t)r * no;
            double s[8];
            for (int i = 0; i < 8; i++) s[i] = t->mu[p->im[r]];
            for (int a = 0; a < no; a++) {
                const double *xa = xg + 8 * p->io[a], ma = t->mu[p->io[a]], ba = br[a];
                for (int i = 0; i < 8; i++) s[i] += ba * (xa[i] - ma);
            }
            for (int i = 0; i < 8; i++) xg[8 * p->im[r] + i] = i < nr ? s[i] : 0.0;
        }
    }
}

/* The terms of E[x | y, x_O] = cv + ev y beyond cv (ev = bvec on the
 * missing coordinates) and of the conditional covariance C, from the unit's
 * sums: S4c = sum w cv (before these terms), swv = sum w v, sw = sum w (the
 * rows with finite moments). */
static void blk_missing_terms(int d, const pattern *p, const pat_work *pw, double swv, double sw, double *acc)
{
    double *s4 = acc + GHF_ST_S4, *s5 = acc + ghf_stats_s5(d), *s6 = acc + ghf_stats_s6(d);
    double S4c[GHF_CPU_SMALL_D];
    memcpy(S4c, s4, (size_t)d * sizeof(double));
    for (int r = 0; r < p->nm; r++) {
        const int j = p->im[r];
        const double e = pw->bvec[r];
        s4[j] += e * swv;
        s5[j] += e * sw;
        for (int k = 0; k < d; k++) { /* cv_j ev_k + ev_j cv_k, lower triangle: the pair (j, k) */
            const int hi = j > k ? j : k, lo = j > k ? k : j;
            s6[(size_t)hi * d + lo] += (k == j ? 2.0 : 1.0) * e * S4c[k];
        }
        for (int s2 = 0; s2 < p->nm; s2++) {
            const int k = p->im[s2];
            if (k <= j) s6[(size_t)j * d + k] += e * pw->bvec[s2] * swv + pw->C[r * p->nm + s2] * sw;
        }
    }
}

/* One unit (nb rows of pattern p from sorted position pos0, weights wt or
 * NULL) in one pass over its rows: q and zw, the moments (the folded plan
 * where it covers the rows), the per-row sums, and the x x^T-type sums of
 * the completed rows, into acc (zeroed by the caller). */
static void blk_unit(const ghf_missing *m, const pattern *p, const pat_work *pw, const ghf_params *t,
                     const ghf_cpu_bessel *bs, const double *wt, int64_t pos0, int nb, double *sc, double *acc)
{
    const int d = m->d, dp = ghf__cpu_pack_stride(d);
    double *xP = sc, *xO = xP + (size_t)MISS_CHUNK * dp, *q = xO + (size_t)MISS_CHUNK * dp;
    double *qzw = q + MISS_CHUNK, *u = qzw + MISS_CHUNK, *v = u + MISS_CHUNK, *l = v + MISS_CHUNK;
    double *ll = l + MISS_CHUNK, *zw = ll + MISS_CHUNK, *wf = zw + MISS_CHUNK, *tacc = wf + MISS_CHUNK;
    blk_qzw(m, p, pw, pos0, nb, xP, xO, q, qzw);
    if (bs->fplan) m->k->moments_vec(bs, q, qzw, nb, u, v, l, ll);
    else m->k->moments_ref(bs, q, qzw, nb, u, v, l, ll);
    double sw8[8] = {0, 0, 0, 0, 0, 0, 0, 0}, swf8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < nb; i++) {
        const double w = wt ? wt[i] : 1.0;
        const int z = w == 0.0;
        const int ok = isfinite(u[i]) && isfinite(v[i]) && isfinite(l[i]) && isfinite(ll[i]);
        u[i] = z ? 0.0 : u[i] * w;
        v[i] = z ? 0.0 : v[i] * w;
        l[i] = z ? 0.0 : l[i] * w;
        ll[i] = z ? 0.0 : ll[i] * w;
        zw[i] = z ? 0.0 : qzw[i] * w;
        wf[i] = ok ? w : 0.0;
        sw8[i & 7] += w;
        swf8[i & 7] += wf[i];
    }
    for (int i = nb; i % 8; i++) wf[i] = 0.0;
    const double sw = ((sw8[0] + sw8[1]) + (sw8[2] + sw8[3])) + ((sw8[4] + sw8[5]) + (sw8[6] + sw8[7]));
    const double swf = ((swf8[0] + swf8[1]) + (swf8[2] + swf8[3])) + ((swf8[4] + swf8[5]) + (swf8[6] + swf8[7]));
    double rs[6]; /* s1 s2 s3 ll bad zwa */
    m->k->row_sums(nb, u, v, l, ll, zw, rs);
    acc[GHF_ST_N] += sw;
    acc[GHF_ST_S1] += rs[0];
    acc[GHF_ST_S2] += rs[1];
    acc[GHF_ST_S3] += rs[2];
    acc[GHF_ST_LL] += rs[3];
    acc[GHF_ST_NBAD] += rs[4];
    acc[GHF_ST_ZWABS] += rs[5];
    blk_complete(p, pw, t, nb, xP);
    m->k->sums(d, xP, nb, u, wf, acc + GHF_ST_S4, acc + ghf_stats_s5(d), acc + ghf_stats_s6(d), tacc);
    blk_missing_terms(d, p, pw, rs[1], swf, acc);
}

/* patterns' scratch per batch: at most this many doubles (32 MiB) beyond one pattern */
#define MISS_BATCH_DOUBLES ((size_t)4 << 20)

/* per batch: the Bessel plans, one per number of observed coordinates
 * (the posterior order p - |O|/2), over a bound on the range of the rows'
 * arguments (from the patterns' largest |x_O|, as the CPU backend's from the
 * largest |x|), where enough rows share the order to pay for them */
typedef struct order_plans {
    ghf_bessel_plan *plan; /* [d + 1] */
    ghf_bessel_fplan *fplan; /* [d + 1] the plans folded with the per-row log and exps (block path; else NULL) */
    int *use;              /* [d + 1] */
    double *zmin, *zmax;   /* [d + 1] */
    int64_t *rows;         /* [d + 1] */
} order_plans;

static void build_plans(const ghf_missing *m, const ghf_params *t, int k0, int k1, const pat_work *pw,
                        const int *bad, int nt, order_plans *op)
{
    const int d = m->d;
    for (int o = 0; o <= d; o++) {
        op->zmin[o] = INFINITY;
        op->zmax[o] = 0.0;
        op->rows[o] = 0;
        op->use[o] = 0;
    }
    for (int k = k0; k < k1; k++) { /* the range from bounds: the rows are read once, afterwards */
        const pattern *p = &m->pat[k];
        if (bad[k] || pw[k].g.c.A == 0.0) continue; /* the Student t face: no Bessel function */
        op->rows[p->no] += p->count;
        const double z0 = ghf_estep_arg(&pw[k].g.c, 0.0);
        if (z0 > 0.0 && z0 < op->zmin[p->no]) op->zmin[p->no] = z0;
        if (pw[k].zmax > op->zmax[p->no] || !isfinite(pw[k].zmax)) op->zmax[p->no] = pw[k].zmax;
    }
    for (int o = 1; o <= d; o++) {
        if (op->rows[o] < 64 || !(op->zmax[o] > 0.0) || !isfinite(op->zmax[o])) continue;
        double zmin = op->zmin[o];
        if (!(zmin > 0.0) || !isfinite(zmin) || zmin < ldexp(op->zmax[o], -30)) zmin = ldexp(op->zmax[o], -30);
        ghf_bessel_plan *pl = &op->plan[o];
        if (ghf_bessel_plan_setup(pl, t->p - 0.5 * o, zmin, op->zmax[o]) != 0) continue;
        const int nn = ghf_bessel_plan_num_nodes(pl), np = ghf_bessel_plan_num_pieces(pl);
        if ((int64_t)nn * 4 > op->rows[o]) continue;
        if (op->fplan) ghf_bessel_fplan_setup(&op->fplan[o], pl);
#pragma omp parallel num_threads(nt)
        {
#pragma omp for schedule(dynamic, 4)
            for (int i = 0; i < nn; i++) ghf_bessel_plan_node(pl, i);
#pragma omp for schedule(static)
            for (int i = 0; i < np; i++) {
                if (op->fplan) ghf_bessel_fplan_fold(&op->fplan[o], pl, i); /* reads the node values */
                ghf_bessel_plan_finish_piece(pl, i);
            }
        }
        op->use[o] = 1;
    }
}

/* one work unit: rows [r0, r1) of pattern k */
typedef struct miss_unit {
    int k;
    int64_t r0, r1;
} miss_unit;

/* One unit, scalar path (large d): the rows one by one into acc */
static void unit_scalar(const ghf_missing *m, const pattern *p, const pat_work *pw, const ghf_params *t,
                        const ghf_bessel_plan *pl, const double *wt, int64_t pos0, int nb, double *cv, double *acc)
{
    const ghf_estep_consts *c = &pw->g.c;
    for (int i = 0; i < nb; i++) {
        const double *xi = m->xs + (pos0 + i) * m->d;
        const double w = wt ? wt[i] : 1.0;
        if (w == 0.0) continue;
        double q, zw;
        row_qzw(p, pw, t, xi, &q, &zw);
        const double z = ghf_estep_arg(c, q);
        const ghf_bessel_eval bk = pl ? ghf_bessel_plan_eval(pl, z) : ghf_bessel_fused(c->P, z);
        const ghf_point pt = ghf_estep_point(c, q, zw, bk);
        if (!row_stats(m, p, pw, t, xi, w, zw, pt, cv, acc)) acc[GHF_ST_NBAD] += 1.0;
    }
}

/* the E-step's scratch */
typedef struct miss_work {
    int nt, len, blk; /* threads, statistics, the block path (d <= GHF_CPU_SMALL_D) */
    size_t tl;        /* doubles per thread: acc [len], then the path's scratch */
    ghf_xsum *xs;     /* [nt][len] */
    double *tacc;     /* [nt][tl] */
    double *buf;      /* the patterns' scratch (a batch) */
    pat_work *pw;
    int *bad;
    miss_unit *unit;
    order_plans op;
} miss_work;

static void miss_work_free(miss_work *w)
{
    free(w->xs), free(w->tacc), free(w->buf), free(w->pw), free(w->bad), free(w->unit);
    free(w->op.plan), free(w->op.fplan), free(w->op.use), free(w->op.zmin), free(w->op.rows);
}

/* 0, or 1 when out of memory */
static int miss_work_alloc(const ghf_missing *m, int d, miss_work *w)
{
    const int npat = m ? m->npat : 0;
    const int64_t nr = m ? m->nrows : 0;
    memset(w, 0, sizeof *w);
    w->nt = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    w->len = ghf_stats_len(d);
    w->blk = d <= GHF_CPU_SMALL_D && !(m && m->scalar);
    w->tl = ((size_t)w->len + (w->blk ? blk_scratch_len(d) : 2 * (size_t)d) + 7) & ~(size_t)7;
    w->xs = malloc((size_t)w->nt * (size_t)w->len * sizeof(ghf_xsum));
    w->tacc = aligned_alloc(64, (size_t)w->nt * w->tl * sizeof(double));
    size_t need = 0; /* the patterns' scratch: all of it, or a batch's */
    for (int k = 0; k < npat && need < MISS_BATCH_DOUBLES; k++) need += pat_work_len(&m->pat[k]);
    need = need < MISS_BATCH_DOUBLES ? need : MISS_BATCH_DOUBLES;
    w->buf = malloc((need + 5 * (size_t)d * d + 3 * (size_t)d + 8) * sizeof(double));
    w->pw = calloc((size_t)(npat > 0 ? npat : 1), sizeof(pat_work));
    w->bad = calloc((size_t)(npat > 0 ? npat : 1), sizeof(int));
    w->unit = malloc((size_t)(nr / MISS_CHUNK + npat + 1) * sizeof(miss_unit));
    w->op.plan = malloc((size_t)(d + 1) * sizeof(ghf_bessel_plan));
    w->op.fplan = w->blk ? malloc((size_t)(d + 1) * sizeof(ghf_bessel_fplan)) : NULL;
    w->op.use = calloc((size_t)(d + 1), sizeof(int));
    w->op.zmin = malloc((size_t)(d + 1) * 2 * sizeof(double));
    w->op.zmax = w->op.zmin ? w->op.zmin + d + 1 : NULL;
    w->op.rows = malloc((size_t)(d + 1) * sizeof(int64_t));
    return !w->xs || !w->tacc || !w->buf || !w->pw || !w->bad || !w->unit || !w->op.plan ||
           (w->blk && !w->op.fplan) || !w->op.use || !w->op.zmin || !w->op.rows;
}

/* The patterns k0 .. k1 - 1 (their scratch fits in buf), into the threads' exact sums */
static void miss_batch(const ghf_missing *m, const ghf_params *t, int weighted, int k0, int k1, int64_t nu,
                       miss_work *w)
{
    const int d = t->d, len = w->len;
#pragma omp parallel for num_threads(w->nt) schedule(dynamic, 1)
    for (int k = k0; k < k1; k++) w->bad[k] = pat_setup(&m->pat[k], t, &w->pw[k]) != 0;
    build_plans(m, t, k0, k1, w->pw, w->bad, w->nt, &w->op);
#pragma omp parallel num_threads(w->nt)
    {
        const int tid = omp_get_thread_num();
        double *acc = w->tacc + (size_t)tid * w->tl, *sc = acc + len;
#pragma omp for schedule(static)
        for (int64_t q = 0; q < nu; q++) {
            const miss_unit *un = &w->unit[q];
            const pattern *p = &m->pat[un->k];
            const pat_work *pw = &w->pw[un->k];
            const int64_t pos0 = p->first + un->r0;
            const int nb = (int)(un->r1 - un->r0);
            const double *wt = weighted && m->ws ? m->ws + pos0 : NULL;
            const int plan = w->op.use[p->no] && pw->g.c.A != 0.0; /* the Student t face: no Bessel function */
            memset(acc, 0, (size_t)len * sizeof(double));
            if (w->bad[un->k]) { /* Sigma_OO not positive definite: a bad E-step */
                acc[GHF_ST_NBAD] = (double)nb;
            } else if (w->blk) {
                const ghf_cpu_bessel bs = {&pw->g.c, plan ? &w->op.plan[p->no] : NULL,
                                           plan ? &w->op.fplan[p->no] : NULL, 0};
                blk_unit(m, p, pw, t, &bs, wt, pos0, nb, sc, acc);
            } else {
                unit_scalar(m, p, pw, t, plan ? &w->op.plan[p->no] : NULL, wt, pos0, nb, sc, acc);
            }
            acc_flush(d, acc, w->xs + (size_t)tid * len);
        }
    }
}

int ghf_missing_estep(MPI_Comm comm, const ghf_missing *m, const ghf_params *t, int weighted, double *stats,
                      char *err, size_t errlen)
{
    const int d = t->d;
    const int npat = m ? m->npat : 0;
    miss_work w;
    if (ghf_any(comm, miss_work_alloc(m, d, &w))) {
        snprintf(err, errlen, "out of memory (rows with missing coordinates)");
        miss_work_free(&w);
        return 1;
    }
    const int len = w.len;
    for (size_t i = 0; i < (size_t)w.nt * len; i++) ghf_xsum_init(&w.xs[i]);
    for (int k0 = 0; k0 < npat;) {
        /* a batch of patterns whose scratch fits in buf, and its work units (pattern, chunk) */
        int k1 = k0;
        size_t used = 0;
        int64_t nu = 0;
        while (k1 < npat && (k1 == k0 || used + pat_work_len(&m->pat[k1]) <= MISS_BATCH_DOUBLES)) {
            pat_work_bind(&m->pat[k1], w.buf + used, &w.pw[k1]);
            used += pat_work_len(&m->pat[k1]);
            for (int64_t r0 = 0; r0 < m->pat[k1].count; r0 += MISS_CHUNK, nu++) {
                w.unit[nu].k = k1;
                w.unit[nu].r0 = r0;
                w.unit[nu].r1 = r0 + MISS_CHUNK < m->pat[k1].count ? r0 + MISS_CHUNK : m->pat[k1].count;
            }
            k1++;
        }
        miss_batch(m, t, weighted, k0, k1, nu, &w);
        k0 = k1;
    }
    for (int th = 1; th < w.nt; th++)
        for (int i = 0; i < len; i++) ghf_xsum_merge(&w.xs[i], &w.xs[(size_t)th * len + i]);
    const int rc = ghf_xsum_allreduce(comm, w.xs, len);
    for (int i = 0; i < len; i++)
        if (i != GHF_ST_STOP) stats[i] += ghf_xsum_value(&w.xs[i]);
    miss_work_free(&w);
    if (rc) snprintf(err, errlen, "the all-reduce of the statistics of the rows with missing coordinates failed");
    return rc ? 1 : 0;
}
