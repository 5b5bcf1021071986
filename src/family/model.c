/* model.c - parameter containers, derived quantities, moments. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bessel.h"
#include "gig.h"

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

int ghf_params_alloc_factor(ghf_params *t, int d, int nf, int with_sigma)
{
    memset(t, 0, sizeof *t);
    t->d = d;
    t->disp = nf > 0 ? GHF_DISP_FACTOR : GHF_DISP_DIAG;
    t->nf = nf;
    t->mu = calloc((size_t)d, sizeof(double));
    t->gamma = calloc((size_t)d, sizeof(double));
    t->D = calloc((size_t)d, sizeof(double));
    t->B = calloc((size_t)d * (size_t)(nf > 0 ? nf : 1), sizeof(double));
    if (with_sigma) t->sigma = calloc((size_t)d * (size_t)d, sizeof(double));
    if (!t->mu || !t->gamma || !t->D || !t->B || (with_sigma && !t->sigma)) {
        ghf_params_free(t);
        return -1;
    }
    return 0;
}

void ghf_params_factor_sigma(ghf_params *t)
{
    const int d = t->d, r = t->nf;
    for (int i = 0; i < d; i++)
        for (int j = 0; j <= i; j++) {
            double s = i == j ? t->D[i] : 0.0;
            for (int k = 0; k < r; k++) s += t->B[i * r + k] * t->B[j * r + k];
            t->sigma[i * d + j] = t->sigma[j * d + i] = s;
        }
}

double ghf_factor_logdet(int d, int nf, const double *B, const double *D)
{
    double ld = 0.0;
    for (int i = 0; i < d; i++) {
        if (!(D[i] > 0.0)) return NAN;
        ld += log(D[i]);
    }
    if (nf <= 0) return ld;
    double *M = calloc((size_t)nf * nf * 2, sizeof(double));
    if (!M) return NAN;
    for (int i = 0; i < d; i++)
        for (int a = 0; a < nf; a++)
            for (int b = 0; b <= a; b++) M[a * nf + b] += B[i * nf + a] * B[i * nf + b] / D[i];
    for (int a = 0; a < nf; a++) M[a * nf + a] += 1.0;
    const int bad = ghf_cholesky(nf, M, M + nf * nf);
    for (int a = 0; !bad && a < nf; a++) ld += 2.0 * log(M[nf * nf + a * nf + a]);
    free(M);
    return bad ? NAN : ld;
}

void ghf_params_free(ghf_params *t)
{
    free(t->mu);
    free(t->gamma);
    free(t->sigma);
    free(t->B);
    free(t->D);
    t->mu = t->gamma = t->sigma = t->B = t->D = NULL;
}

void ghf_params_copy(ghf_params *dst, const ghf_params *src)
{
    const size_t d = (size_t)src->d;
    memcpy(dst->mu, src->mu, d * sizeof(double));
    memcpy(dst->gamma, src->gamma, d * sizeof(double));
    if (dst->sigma && src->sigma) memcpy(dst->sigma, src->sigma, d * d * sizeof(double));
    if (dst->D && src->D) {
        memcpy(dst->D, src->D, d * sizeof(double));
        if (src->nf > 0 && dst->nf == src->nf) memcpy(dst->B, src->B, d * (size_t)src->nf * sizeof(double));
    }
    dst->p = src->p;
    dst->a = src->a;
    dst->b = src->b;
    dst->d = src->d;
}

int ghf_params_finite(const ghf_params *t)
{
    const int d = t->d;
    for (int i = 0; i < d; i++)
        if (!isfinite(t->mu[i]) || !isfinite(t->gamma[i])) return 0;
    if (t->sigma)
        for (int i = 0; i < d * d; i++)
            if (!isfinite(t->sigma[i])) return 0;
    if (t->D)
        for (int i = 0; i < d * (1 + t->nf); i++)
            if (!isfinite(i < d ? t->D[i] : t->B[i - d])) return 0;
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
    return ghf_estep_consts_fill(t, d, logdet, w2, &g->c);
}

int ghf_estep_consts_fill(const ghf_params *t, int d, double logdet, double w2, ghf_estep_consts *c)
{
    c->P = t->p - 0.5 * d;
    c->A = t->a + w2;
    c->b = t->b;
    c->log_A = log(c->A);
    c->R = sqrt(t->p * t->p + t->a * t->b);
    c->p2 = t->p * t->p;
    c->a = t->a;
    c->w2 = w2;
    c->ll_const = -0.5 * d * GHF_LOG_2PI - 0.5 * logdet - ghf_gig_log_norm_s(t->p, t->a, t->b) + GHF_LN2;
    /* A = 0 only for a symmetric Student t (a = 0, gamma = 0): its posterior
     * is inverse Gamma, proper when P < 0 */
    if (!isfinite(c->ll_const) || !(c->A >= 0.0) || (c->A == 0.0 && !(t->a == 0.0 && c->P < 0.0)) ||
        (c->A > 0.0 && !isfinite(c->log_A)))
        return -1;
    return 0;
}

int ghf_params_gaussian(const ghf_params *t)
{
    return isnan(t->p) && isnan(t->a) && isnan(t->b);
}

int ghf_params_moments(const ghf_params *t, double *mean, double *cov, char *why, size_t whylen)
{
    const int d = t->d;
    if (why && whylen) why[0] = '\0';
    if (ghf_params_gaussian(t)) {
        memcpy(mean, t->mu, (size_t)d * sizeof(double));
        memcpy(cov, t->sigma, (size_t)d * d * sizeof(double));
        return 0;
    }
    /* E[Y] and Var[Y] from the GIG helpers (exact on the faces a = 0, b = 0) */
    const ghf_gig_stats g = ghf_gig_stats_eval(t->p, t->a, t->b);
    const double ey = g.e_y, vy = g.h33;
    int skew = 0;
    for (int i = 0; i < d; i++) skew |= t->gamma[i] != 0.0;
    /* E X = mu + gamma E[Y] needs E[sqrt(Y)] (and E[Y] when skewed) finite;
     * Cov X = E[Y] Sigma + Var[Y] gamma gamma^T needs E[Y] (and Var[Y]) */
    const int inv_gamma = t->a == 0.0;
    const int mean_ok = (!inv_gamma || -t->p > 0.5) && (!skew || isfinite(ey));
    const int cov_ok = isfinite(ey) && (!skew || isfinite(vy));
    for (int i = 0; i < d; i++) mean[i] = mean_ok ? t->mu[i] + (skew ? t->gamma[i] * ey : 0.0) : NAN;
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            cov[i * d + j] = cov_ok ? ey * t->sigma[i * d + j] + (skew ? vy * t->gamma[i] * t->gamma[j] : 0.0) : NAN;
    if (mean_ok && cov_ok) return 0;
    if (why && whylen) {
        if (inv_gamma)
            snprintf(why, whylen, "%s: the mixing variable is inverse Gamma with shape %g (nu = %g degrees of freedom)%s",
                     !mean_ok ? "no finite mean or covariance" : "no finite covariance", -t->p, -2.0 * t->p,
                     skew ? " and the law is skewed" : "");
        else
            snprintf(why, whylen, "%s: E[Y] or Var[Y] of the mixing variable is not finite",
                     !mean_ok ? "no finite mean or covariance" : "no finite covariance");
    }
    return -1;
}

void ghf_params_normalize(ghf_params *t, double logdet_sigma)
{
    const int d = t->d;
    if (ghf_params_gaussian(t)) return; /* no scale orbit without a mixing variable */
    const double s = exp(-logdet_sigma / d);
    if (!isfinite(s) || s <= 0.0) return;
    if (t->sigma)
        for (int i = 0; i < d * d; i++) t->sigma[i] *= s;
    if (t->D) {
        const double sq = sqrt(s);
        for (int i = 0; i < d; i++) t->D[i] *= s;
        for (int i = 0; i < d * t->nf; i++) t->B[i] *= sq;
    }
    for (int i = 0; i < d; i++) t->gamma[i] *= s;
    t->a *= s;
    t->b /= s;
}

double ghf_logpdf(const ghf_params *t, const double *x)
{
    ghf_derived g;
    if (ghf_derived_alloc(&g, t->d) != 0) return NAN;
    double out = NAN;
    const int d = t->d;
    if (ghf_params_gaussian(t)) {
        /* N(mu, Sigma) */
        if (ghf_cholesky(d, t->sigma, g.L) == 0) {
            double q = 0.0, logdet = 0.0;
            for (int i = 0; i < d; i++) {
                double s = x[i] - t->mu[i];
                for (int k = 0; k < i; k++) s -= g.L[i * d + k] * g.w[k];
                g.w[i] = s / g.L[i * d + i];
                q += g.w[i] * g.w[i];
                logdet += 2.0 * log(g.L[i * d + i]);
            }
            out = -0.5 * (d * GHF_LOG_2PI + logdet + q);
        }
    } else if (ghf_derive(t, &g) == 0) {
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

int ghf_mixture_alloc(ghf_mixture *m, int K, int d)
{
    memset(m, 0, sizeof *m);
    if (K < 1) return -1;
    m->prop = calloc((size_t)K, sizeof(double));
    m->comp = calloc((size_t)K, sizeof(ghf_params));
    if (!m->prop || !m->comp) {
        free(m->prop);
        free(m->comp);
        memset(m, 0, sizeof *m);
        return -1;
    }
    m->K = K;
    m->d = d;
    for (int k = 0; k < K; k++)
        if (ghf_params_alloc(&m->comp[k], d) != 0) {
            ghf_mixture_free(m);
            return -1;
        }
    return 0;
}

void ghf_mixture_free(ghf_mixture *m)
{
    if (m->comp)
        for (int k = 0; k < m->K; k++) ghf_params_free(&m->comp[k]);
    free(m->comp);
    free(m->prop);
    memset(m, 0, sizeof *m);
}

double ghf_mixture_logpdf(const ghf_mixture *m, const double *x, double *tau)
{
    double mx = -INFINITY, s = 0.0;
    double lk[64];
    double *l = m->K <= 64 ? lk : malloc((size_t)m->K * sizeof(double));
    if (!l) return NAN;
    for (int k = 0; k < m->K; k++) {
        l[k] = log(m->prop[k]) + ghf_logpdf(&m->comp[k], x);
        if (isnan(l[k])) mx = NAN;
        else if (!isnan(mx) && l[k] > mx) mx = l[k];
    }
    double r = mx;
    if (isfinite(mx)) {
        for (int k = 0; k < m->K; k++) s += exp(l[k] - mx);
        r = mx + log(s);
    }
    if (tau)
        for (int k = 0; k < m->K; k++) tau[k] = isfinite(r) ? exp(l[k] - r) : NAN;
    if (l != lk) free(l);
    return r;
}
