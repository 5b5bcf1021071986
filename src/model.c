/* model.c - parameter containers, derived quantities, moments. */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bessel.h"
#include "gig.h"

const char *ghf_family_name(ghf_family f)
{
    return f == GHF_FAMILY_NIG ? "nig" : "gh";
}

int ghf_family_parse(const char *s, ghf_family *f)
{
    if (strcmp(s, "gh") == 0) { *f = GHF_FAMILY_GH; return 0; }
    if (strcmp(s, "nig") == 0) { *f = GHF_FAMILY_NIG; return 0; }
    return -1;
}

int ghf_params_alloc(ghf_params *t, int d)
{
    memset(t, 0, sizeof *t);
    t->d = d;
    t->mu = calloc((size_t)d, sizeof(double));
    t->gamma = calloc((size_t)d, sizeof(double));
    t->sigma = calloc((size_t)d * (size_t)d, sizeof(double));
    if (!t->mu || !t->gamma || !t->sigma) {
        ghf_params_free(t);
        return -1;
    }
    return 0;
}

void ghf_params_free(ghf_params *t)
{
    free(t->mu);
    free(t->gamma);
    free(t->sigma);
    t->mu = t->gamma = t->sigma = NULL;
}

void ghf_params_copy(ghf_params *dst, const ghf_params *src)
{
    const size_t d = (size_t)src->d;
    memcpy(dst->mu, src->mu, d * sizeof(double));
    memcpy(dst->gamma, src->gamma, d * sizeof(double));
    memcpy(dst->sigma, src->sigma, d * d * sizeof(double));
    dst->p = src->p;
    dst->a = src->a;
    dst->b = src->b;
    dst->d = src->d;
}

int ghf_params_count(ghf_family f, int d)
{
    /* mu, gamma, Sigma (symmetric), subordinator; minus one scale direction */
    const int normal = 2 * d + d * (d + 1) / 2;
    return f == GHF_FAMILY_GH ? normal + 3 - 1 : normal + 2 - 1;
}

int ghf_params_finite(const ghf_params *t)
{
    const int d = t->d;
    for (int i = 0; i < d; i++)
        if (!isfinite(t->mu[i]) || !isfinite(t->gamma[i])) return 0;
    for (int i = 0; i < d * d; i++)
        if (!isfinite(t->sigma[i])) return 0;
    return isfinite(t->p) && isfinite(t->a) && isfinite(t->b);
}

int ghf_derived_alloc(ghf_derived *g, int d)
{
    memset(g, 0, sizeof *g);
    g->d = d;
    g->L = calloc((size_t)d * (size_t)d, sizeof(double));
    g->Linv = calloc((size_t)d * (size_t)d, sizeof(double));
    g->w = calloc((size_t)d, sizeof(double));
    if (!g->L || !g->Linv || !g->w) {
        ghf_derived_free(g);
        return -1;
    }
    return 0;
}

void ghf_derived_free(ghf_derived *g)
{
    free(g->L);
    free(g->Linv);
    free(g->w);
    g->L = g->Linv = g->w = NULL;
}

int ghf_cholesky(int d, const double *S, double *L)
{
    memset(L, 0, (size_t)d * (size_t)d * sizeof(double));
    for (int j = 0; j < d; j++) {
        double s = S[j * d + j];
        for (int k = 0; k < j; k++) s -= L[j * d + k] * L[j * d + k];
        if (!(s > 0.0) || !isfinite(s)) return -1;
        const double ljj = sqrt(s);
        L[j * d + j] = ljj;
        for (int i = j + 1; i < d; i++) {
            double t = S[i * d + j];
            for (int k = 0; k < j; k++) t -= L[i * d + k] * L[j * d + k];
            L[i * d + j] = t / ljj;
        }
    }
    return 0;
}

/* Inverse of a lower-triangular matrix by forward substitution. */
static void tri_inverse(int d, const double *L, double *Li)
{
    memset(Li, 0, (size_t)d * (size_t)d * sizeof(double));
    for (int j = 0; j < d; j++) {
        Li[j * d + j] = 1.0 / L[j * d + j];
        for (int i = j + 1; i < d; i++) {
            double s = 0.0;
            for (int k = j; k < i; k++) s += L[i * d + k] * Li[k * d + j];
            Li[i * d + j] = -s / L[i * d + i];
        }
    }
}

int ghf_derive(const ghf_params *t, ghf_derived *g)
{
    const int d = t->d;
    if (ghf_cholesky(d, t->sigma, g->L) != 0) return -1;
    tri_inverse(d, g->L, g->Linv);
    double logdet = 0.0;
    for (int j = 0; j < d; j++) logdet += 2.0 * log(g->L[j * d + j]);
    double w2 = 0.0;
    for (int i = 0; i < d; i++) {
        double s = 0.0;
        for (int k = 0; k <= i; k++) s += g->Linv[i * d + k] * t->gamma[k];
        g->w[i] = s;
        w2 += s * s;
    }
    g->logdet = logdet;
    g->c.P = t->p - 0.5 * d;
    g->c.A = t->a + w2;
    g->c.b = t->b;
    g->c.log_A = log(g->c.A);
    g->c.R = sqrt(t->p * t->p + t->a * t->b);
    g->c.p2 = t->p * t->p;
    g->c.a = t->a;
    g->c.w2 = w2;
    g->c.ll_const = -0.5 * d * GHF_LOG_2PI - 0.5 * logdet - ghf_gig_log_norm_s(t->p, t->a, t->b) + GHF_LN2;
    if (!isfinite(g->c.ll_const) || !isfinite(g->c.log_A) || !(g->c.A > 0.0)) return -1;
    return 0;
}

int ghf_params_moments(const ghf_params *t, double *mean, double *cov)
{
    const int d = t->d;
    /* E[Y] and Var[Y] from the GIG helpers (exact on the faces a = 0, b = 0) */
    const ghf_gig_stats g = ghf_gig_stats_eval(t->p, t->a, t->b);
    const double ey = g.e_y, vy = g.h33;
    if (!isfinite(ey) || !isfinite(vy)) {
        for (int i = 0; i < d; i++) mean[i] = NAN;
        for (int i = 0; i < d * d; i++) cov[i] = NAN;
        return -1;
    }
    for (int i = 0; i < d; i++) mean[i] = t->mu[i] + t->gamma[i] * ey;
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            cov[i * d + j] = ey * t->sigma[i * d + j] + vy * t->gamma[i] * t->gamma[j];
    return 0;
}

void ghf_params_normalize(ghf_params *t, double logdet_sigma)
{
    const int d = t->d;
    const double s = exp(-logdet_sigma / d);
    if (!isfinite(s) || s <= 0.0) return;
    for (int i = 0; i < d * d; i++) t->sigma[i] *= s;
    for (int i = 0; i < d; i++) t->gamma[i] *= s;
    t->a *= s;
    t->b /= s;
}

double ghf_logpdf(const ghf_params *t, const double *x)
{
    ghf_derived g;
    if (ghf_derived_alloc(&g, t->d) != 0) return NAN;
    double out = NAN;
    if (ghf_derive(t, &g) == 0) {
        const int d = t->d;
        double q = 0.0, zw = 0.0;
        for (int i = 0; i < d; i++) {
            double s = 0.0;
            for (int k = 0; k <= i; k++) s += g.Linv[i * d + k] * (x[k] - t->mu[k]);
            q += s * s;
            zw += s * g.w[i];
        }
        const ghf_bessel_eval bk = ghf_bessel_fused(g.c.P, ghf_estep_arg(&g.c, q));
        out = ghf_estep_point(&g.c, q, zw, bk).ll;
    }
    ghf_derived_free(&g);
    return out;
}
