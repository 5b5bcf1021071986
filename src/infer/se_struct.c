/* se_struct.c - the standard errors' parametrisation (se_int.h): the free
 * parameters of a model, the whitened frame, the B-vector of a row, the
 * part of the Hessian that needs no per-row outer product, the score, the
 * gauge and the map back to raw coordinates. */
#include "se_int.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int ghf__se_blas_threads(int n)
{
    const int old = openblas_get_num_threads();
    openblas_set_num_threads(n > 0 ? n : 1);
    return old;
}

int ghf__se_test_flag(const char *flag)
{
    const char *e = getenv("GHFIT_TEST_SE");
    const size_t n = strlen(flag);
    for (const char *p = e; p && *p;) {
        const char *q = strchr(p, ',');
        const size_t m = q ? (size_t)(q - p) : strlen(p);
        if (m == n && !strncmp(p, flag, n)) return 1;
        p = q ? q + 1 : NULL;
    }
    return 0;
}

void ghf__se_ctx_free(ghf__se_ctx *c)
{
    ghf__se_plan_free(c->plan);
    c->plan = NULL;
    ghf_derived_free(&c->der);
    free(c->fidx);
    free(c->full_of);
    free(c->m_u);
    free(c->rw);
    c->fidx = c->full_of = NULL;
    c->m_u = c->m_pb = c->m_ab = c->m_1 = c->hdiag = c->zbar = c->zbar_u = c->zu = NULL;
    c->M = c->vmu = c->vga = NULL;
    c->rw = NULL;
}

/* The Gaussian has no E-step constants: only L, L^-1 (w = 0). */
static int derive_gauss(const ghf_params *t, ghf_derived *g)
{
    const int d = t->d;
    if (ghf_cholesky(d, t->sigma, g->L) != 0) return -1;
    memset(g->Linv, 0, (size_t)d * d * sizeof(double));
    for (int j = 0; j < d; j++) {
        g->Linv[j * d + j] = 1.0 / g->L[j * d + j];
        for (int i = j + 1; i < d; i++) {
            double s = 0.0;
            for (int k = j; k < i; k++) s += g->L[i * d + k] * g->Linv[k * d + j];
            g->Linv[i * d + j] = -s / g->L[i * d + i];
        }
    }
    memset(g->w, 0, (size_t)d * sizeof(double));
    return 0;
}

int ghf__se_ctx_init(ghf__se_ctx *c, const ghf_se_input *in)
{
    memset(c, 0, sizeof *c);
    const int d = in->d;
    const ghf_family_def *fd = ghf_family_get(in->model.family);
    c->d = d;
    c->kS = d * (d + 1) / 2;
    c->kB = d + c->kS + 1;
    c->kfull = 2 * d + c->kS + 3;
    c->ip = 2 * d + c->kS;
    c->ia = c->ip + 1;
    c->ib = c->ip + 2;
    c->has_sub = fd && fd->sub != GHF_SUB_NONE;
    c->free_g = c->has_sub && !in->model.symmetric;
    c->free_p = c->has_sub && isnan(ghf_model_fixed_p(&in->model, d));
    c->free_a = c->has_sub && fd->sub != GHF_SUB_INVGAMMA;
    c->free_b = c->has_sub && fd->sub != GHF_SUB_GAMMA;
    c->a_moves = c->free_a || c->free_g;
    c->n = in->n_global;
    c->th = in->theta;
    c->x = in->x;
    c->nrows = in->nrows;
    c->fidx = malloc((size_t)c->kfull * sizeof(int));
    c->full_of = malloc((size_t)c->kfull * sizeof(int));
    /* m_u, m_pb, m_ab, m_1, hdiag [5 kB] | zbar, zbar_u, vmu, vga [4 d] | zu, M [2 d*d] */
    c->m_u = calloc((size_t)5 * c->kB + 4 * (size_t)d + 2 * (size_t)d * d, sizeof(double));
    if (!c->fidx || !c->full_of || !c->m_u || ghf_derived_alloc(&c->der, d) != 0) {
        ghf__se_ctx_free(c);
        return -1;
    }
    c->m_pb = c->m_u + c->kB;
    c->m_ab = c->m_pb + c->kB;
    c->m_1 = c->m_ab + c->kB;
    c->hdiag = c->m_1 + c->kB;
    c->zbar = c->hdiag + c->kB;
    c->zbar_u = c->zbar + d;
    c->vmu = c->zbar_u + d;
    c->vga = c->vmu + d;
    c->zu = c->vga + d;
    c->M = c->zu + (size_t)d * d;
    for (int i = 0; i < c->kfull; i++) {
        int f = 1;
        if (i >= d && i < 2 * d) f = c->free_g;
        else if (i == c->ip) f = c->free_p;
        else if (i == c->ia) f = c->free_a;
        else if (i == c->ib) f = c->free_b;
        c->fidx[i] = f ? c->nfree : -1;
        if (f) c->full_of[c->nfree++] = i;
    }
    const int bad = c->has_sub ? ghf_derive(in->theta, &c->der) : derive_gauss(in->theta, &c->der);
    if (bad) {
        ghf__se_ctx_free(c);
        return -1;
    }
    if (c->has_sub) {
        c->P = c->der.c.P;
        c->A = c->der.c.A;
        c->b = in->theta->b;
        c->prior = ghf_gig_stats_eval(in->theta->p, in->theta->a, in->theta->b);
    }
    return 0;
}

void ghf__se_bvec(const ghf__se_ctx *c, const double *z, double *g)
{
    const int d = c->d;
    for (int j = 0; j < d; j++) g[j] = -2.0 * z[j];
    double *e = g + d;
    for (int j = 0; j < d; j++) {
        const double zj = z[j];
        for (int k = 0; k < j; k++) e[ghf__se_tri(j, k)] = -2.0 * zj * z[k];
        e[ghf__se_tri(j, j)] = -zj * zj;
    }
    g[c->kB - 1] = 1.0;
}

/* full index of B-vector entry i */
static inline int b_full(const ghf__se_ctx *c, int i)
{
    return i < c->d ? i : (i < c->d + c->kS ? i + c->d : c->ib);
}

void ghf__se_ctx_finish(ghf__se_ctx *c)
{
    const int d = c->d;
    const double N = (double)c->n;
    const double *w = c->der.w;
    /* from the B-vector sums: sum z = -m_1[mu]/2, sum u z = -m_u[mu]/2,
     * sum u z z^T from the E part of m_u (-pair(u z z^T)) */
    for (int j = 0; j < d; j++) {
        c->zbar[j] = -0.5 * c->m_1[j];
        c->zbar_u[j] = -0.5 * c->m_u[j];
    }
    for (int j = 0; j < d; j++)
        for (int k = 0; k <= j; k++) {
            const double v = -c->m_u[d + ghf__se_tri(j, k)] * (j == k ? 1.0 : 0.5);
            c->zu[j * d + k] = c->zu[k * d + j] = v;
        }
    for (int j = 0; j < d; j++) {
        c->vmu[j] = N * w[j] - c->zbar_u[j];
        c->vga[j] = c->s2 * w[j] - c->zbar[j];
    }
    /* M = -Zu + zbar w^T + w zbar^T - s2 w w^T + (N/2) I */
    for (int j = 0; j < d; j++)
        for (int k = 0; k < d; k++)
            c->M[j * d + k] = -c->zu[j * d + k] + c->zbar[j] * w[k] + w[j] * c->zbar[k] - c->s2 * w[j] * w[k] +
                              (j == k ? 0.5 * N : 0.0);
}

/* y_E += pair(a b^T) */
static void add_pair_outer(int d, const double *a, const double *b, double *yE)
{
    for (int j = 0; j < d; j++) {
        for (int k = 0; k < j; k++) yE[ghf__se_tri(j, k)] += a[j] * b[k] + a[k] * b[j];
        yE[ghf__se_tri(j, j)] += a[j] * b[j];
    }
}

/* the gradient of A = a + w.w (whitened): a: 1, g: 2w, E: -pair(w w^T) */
static double ca_dot(const ghf__se_ctx *c, const double *x, const double *X)
{
    const int d = c->d;
    const double *w = c->der.w;
    double s = x[c->ia];
    for (int j = 0; j < d; j++) s += 2.0 * w[j] * x[d + j];
    double wxw = 0.0;
    for (int j = 0; j < d; j++)
        for (int k = 0; k < d; k++) wxw += w[j] * X[j * d + k] * w[k];
    return s - wxw;
}

static void ca_add(const ghf__se_ctx *c, double coef, double *y)
{
    if (coef == 0.0) return;
    const int d = c->d;
    const double *w = c->der.w;
    y[c->ia] += coef;
    for (int j = 0; j < d; j++) y[d + j] += 2.0 * w[j] * coef;
    double *yE = y + 2 * d;
    for (int j = 0; j < d; j++) {
        for (int k = 0; k < j; k++) yE[ghf__se_tri(j, k)] -= 2.0 * w[j] * w[k] * coef;
        yE[ghf__se_tri(j, j)] -= w[j] * w[j] * coef;
    }
}

static double bdot(const ghf__se_ctx *c, const double *m, const double *x)
{
    double s = 0.0;
    for (int i = 0; i < c->kB; i++) s += m[i] * x[b_full(c, i)];
    return s;
}

static void badd(const ghf__se_ctx *c, const double *m, double coef, double *y)
{
    if (coef == 0.0) return;
    for (int i = 0; i < c->kB; i++) y[b_full(c, i)] += coef * m[i];
}

void ghf__se_struct_apply(const ghf__se_ctx *c, const double *x, double *y, double *scratch)
{
    const int d = c->d;
    const double N = (double)c->n;
    double *X = scratch, *Q = scratch + (size_t)d * d;
    const double *xE = x + 2 * d;
    for (int j = 0; j < d; j++)
        for (int k = 0; k <= j; k++) X[j * d + k] = X[k * d + j] = xE[ghf__se_tri(j, k)];
    const double *xm = x, *xg = x + d;
    double *ym = y, *yg = y + d, *yE = y + 2 * d;
    /* second-order terms of the posterior log-normaliser in the global
     * directions P and A, and their cross terms with the rows' B */
    if (c->has_sub) {
        const double ep = x[c->ip], cax = c->a_moves ? ca_dot(c, x, X) : 0.0;
        badd(c, c->m_pb, ep, y);
        y[c->ip] += bdot(c, c->m_pb, x) + c->spp * ep + c->spa * cax;
        if (c->a_moves) {
            badd(c, c->m_ab, cax, y);
            ca_add(c, bdot(c, c->m_ab, x) + c->spa * ep + c->saa * cax, y);
        }
        /* -N Hess log Z(p, a, b) of the prior */
        const ghf_gig_stats *g = &c->prior;
        const double hz[3][3] = {{g->h11, -0.5 * g->h13, -0.5 * g->h12},
                                 {-0.5 * g->h13, 0.25 * g->h33, 0.25 * g->h23},
                                 {-0.5 * g->h12, 0.25 * g->h23, 0.25 * g->h22}};
        const int fr[3] = {c->free_p, c->free_a, c->free_b};
        for (int r = 0; r < 3; r++) {
            if (!fr[r]) continue;
            double s = 0.0;
            for (int q = 0; q < 3; q++)
                if (fr[q]) s += hz[r][q] * x[c->ip + q];
            y[c->ip + r] -= N * s;
        }
    }
    /* mu-mu, mu-gamma, gamma-gamma */
    for (int j = 0; j < d; j++) {
        ym[j] += -c->s1 * xm[j] - N * xg[j];
        yg[j] += -N * xm[j] - c->s2 * xg[j];
    }
    /* mu-E, gamma-E: H[m_j, E_lm] = (E_lm vmu)_j, H[g_j, E_lm] = (E_lm vga)_j */
    for (int j = 0; j < d; j++) {
        double sm = 0.0, sg = 0.0;
        for (int k = 0; k < d; k++) {
            sm += X[j * d + k] * c->vmu[k];
            sg += X[j * d + k] * c->vga[k];
        }
        ym[j] += sm;
        yg[j] += sg;
    }
    add_pair_outer(d, xm, c->vmu, yE);
    add_pair_outer(d, xg, c->vga, yE);
    /* E-E: y_E += pair(X M) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, X, d, c->M, d, 0.0, Q, d);
    for (int j = 0; j < d; j++) {
        for (int k = 0; k < j; k++) yE[ghf__se_tri(j, k)] += Q[j * d + k] + Q[k * d + j];
        yE[ghf__se_tri(j, j)] += Q[j * d + j];
    }
}

void ghf__se_score(const ghf__se_ctx *c, double *g)
{
    const int d = c->d;
    const double N = (double)c->n;
    const double *w = c->der.w;
    memset(g, 0, (size_t)c->kfull * sizeof(double));
    for (int j = 0; j < d; j++) {
        g[j] = -N * w[j] + c->zbar_u[j];
        g[d + j] = c->zbar[j] - c->s2 * w[j];
    }
    /* E: pair(-w zbar^T + Zu/2 + (s2/2) w w^T - (N/2) I) */
    double *gE = g + 2 * d;
    for (int j = 0; j < d; j++)
        for (int k = 0; k <= j; k++) {
            const double q = -w[j] * c->zbar[k] + 0.5 * c->zu[j * d + k] + 0.5 * c->s2 * w[j] * w[k];
            const double qt = -w[k] * c->zbar[j] + 0.5 * c->zu[k * d + j] + 0.5 * c->s2 * w[k] * w[j];
            gE[ghf__se_tri(j, k)] = j == k ? q - 0.5 * N : q + qt;
        }
    if (c->has_sub) {
        g[c->ip] = c->s3 - N * c->prior.e_log;
        g[c->ia] = -0.5 * c->s2 + 0.5 * N * c->prior.e_y;
        g[c->ib] = -0.5 * c->s1 + 0.5 * N * c->prior.e_inv;
    }
    for (int i = 0; i < c->kfull; i++)
        if (c->fidx[i] < 0) g[i] = 0.0;
}

int ghf__se_gauge(const ghf__se_ctx *c, double *cvec, double *tvec)
{
    const int d = c->d;
    memset(cvec, 0, (size_t)c->kfull * sizeof(double));
    memset(tvec, 0, (size_t)c->kfull * sizeof(double));
    if (!c->has_sub) return 0;
    for (int j = 0; j < d; j++) {
        cvec[2 * d + ghf__se_tri(j, j)] = 1.0;
        tvec[2 * d + ghf__se_tri(j, j)] = 1.0;
        if (c->free_g) tvec[d + j] = c->der.w[j];
    }
    if (c->free_a) tvec[c->ia] = c->th->a;
    if (c->free_b) tvec[c->ib] = -c->th->b;
    return 1;
}

void ghf__se_to_raw(const ghf__se_ctx *c, double *v, double *scratch)
{
    const int d = c->d;
    const double *L = c->der.L;
    double *X = scratch, *T = scratch + (size_t)d * d;
    /* m, g -> L m, L g (in place, from the bottom: L is lower) */
    for (int blk = 0; blk < 2; blk++) {
        double *u = v + blk * d;
        for (int j = d - 1; j >= 0; j--) {
            double s = 0.0;
            for (int k = 0; k <= j; k++) s += L[j * d + k] * u[k];
            u[j] = s;
        }
    }
    double *e = v + 2 * d;
    for (int j = 0; j < d; j++)
        for (int k = 0; k <= j; k++) X[j * d + k] = X[k * d + j] = e[ghf__se_tri(j, k)];
    /* L X L^T */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, L, d, X, d, 0.0, T, d);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, d, d, 1.0, T, d, L, d, 0.0, X, d);
    for (int j = 0; j < d; j++)
        for (int k = 0; k <= j; k++) e[ghf__se_tri(j, k)] = X[j * d + k];
}
