/* se_factor.c - standard errors of a factor-form fit (Sigma = B B' + D,
 * --sigma diag|factor:R): the observed information of the factor
 * parameters from the full form's (se.c, in the whitened frame at Sigma =
 * B B' + D) by the chain rule, its inverse with the |Sigma| = 1 gauge and
 * the rotations B -> B Q fixed, and the covariance of the identified
 * quantities mu, gamma, Sigma, p, a, b that it implies (docs/design.md,
 * "Standard errors", the factor form). */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "se_int.h"

/* as se.c: a condition number beyond this (scaled information) is singular */
#define SEF_COND_MAX 1e12

/* The factor coordinates (free ones, in this order): mu [d], gamma [d] (if
 * free), B [d*R] row-major, D [d], p, a, b (the free ones).  J (k x nf,
 * column-major, k = the full form's free parameters) holds, column by
 * column, the whitened full coordinates (m, g, E, p, a, b) of a unit step
 * in one factor coordinate (se_int.h: mu = mu0 + L m, Sigma = L (I + E) L'):
 *   mu_i:  m = L^-1 e_i;   gamma_i: g = L^-1 e_i;
 *   D_i:   E = l_i l_i'  (l_i = L^-1 e_i);
 *   B_ia:  E = l_i c_a' + c_a l_i'  (c_a = L^-1 B e_a);
 *   p, a, b: themselves. */
static int fac_jacobian(const ghf__se_ctx *c, const ghf_params *t, double *J, int nf)
{
    const int d = c->d, r = t->nf, k = c->nfree;
    const double *Li = c->der.Linv;
    double *l = malloc((size_t)d * (r + 1) * sizeof(double));
    if (!l) return -1;
    double *ca = l + d;
    /* c_a = L^-1 B e_a (column a of B): ca[a*d + j] */
    for (int a = 0; a < r; a++)
        for (int j = 0; j < d; j++) {
            double s = 0.0;
            for (int q = 0; q <= j; q++) s += Li[j * d + q] * t->B[q * r + a];
            ca[a * d + j] = s;
        }
    memset(J, 0, (size_t)k * nf * sizeof(double));
    int col = 0;
#define JSET(full, v)                                                                                                 \
    do {                                                                                                              \
        const int f_ = c->fidx[(full)];                                                                               \
        if (f_ >= 0) J[(size_t)col * k + f_] += (v);                                                                  \
    } while (0)
    for (int blk = 0; blk < 2; blk++) { /* mu, gamma */
        if (blk == 1 && !c->free_g) continue;
        for (int i = 0; i < d; i++, col++)
            for (int j = i; j < d; j++) JSET(blk * d + j, Li[j * d + i]);
    }
    for (int i = 0; i < d; i++) { /* B_ia */
        for (int j = 0; j < d; j++) l[j] = Li[j * d + i];
        for (int a = 0; a < r; a++, col++) {
            const double *cv = ca + (size_t)a * d;
            for (int j = 0; j < d; j++)
                for (int q = 0; q <= j; q++) {
                    const double v = l[j] * cv[q] + cv[j] * l[q];
                    if (v != 0.0) JSET(2 * d + ghf__se_tri(j, q), v);
                }
        }
    }
    for (int i = 0; i < d; i++, col++) /* D_i */
        for (int j = i; j < d; j++)
            for (int q = i; q <= j; q++) JSET(2 * d + ghf__se_tri(j, q), Li[j * d + i] * Li[q * d + i]);
    const int fr[3] = {c->free_p, c->free_a, c->free_b};
    for (int q = 0; q < 3; q++)
        if (fr[q]) {
            JSET(c->ip + q, 1.0);
            col++;
        }
#undef JSET
    free(l);
    return col == nf ? 0 : -1;
}

int ghf__se_factor_nfree(const ghf__se_ctx *c, const ghf_params *t)
{
    const int d = c->d;
    return d * (2 + (c->free_g ? 1 : 0) + t->nf) + c->free_p + c->free_a + c->free_b;
}

int ghf__se_factor_inverse(const ghf__se_ctx *c, const ghf_params *t, double *Im, const double *score, double *cond,
                           double *newton, char *why, size_t len)
{
    const int d = c->d, r = t->nf, k = c->nfree;
    const int nf = ghf__se_factor_nfree(c, t);
    const int ib0 = d * (c->free_g ? 2 : 1); /* the first B coordinate */
    const int nrot = r * (r - 1) / 2, m = (c->has_sub ? 1 : 0) + nrot;
    const int n2 = nf - m;
    *cond = NAN;
    *newton = NAN;
    if (n2 <= 0) {
        snprintf(why, len, "the factor form has no free parameter left once its gauge is fixed");
        return -1;
    }
    double *J = malloc((size_t)k * nf * sizeof(double));
    double *tmp = malloc((size_t)k * nf * sizeof(double));
    double *If = malloc((size_t)nf * nf * sizeof(double));
    double *Q = malloc((size_t)nf * nf * sizeof(double));
    double *A = malloc((size_t)n2 * n2 * sizeof(double));
    double *W = malloc(((size_t)nf * n2 + 4 * (size_t)nf + 2 * (size_t)d * d + (size_t)c->kfull) * sizeof(double));
    int rc = -1;
    if (!J || !tmp || !If || !Q || !A || !W || fac_jacobian(c, t, J, nf) != 0) {
        snprintf(why, len, "not enough memory for the factor form's %d x %d information matrix", nf, nf);
        goto out;
    }
    double *TA = W, *sf = TA + (size_t)nf * n2, *tau = sf + nf, *Dg = tau + nf, *cw = Dg + nf;
    double *Gs = cw + c->kfull, *Sw = Gs + (size_t)d * d;
    /* I_f = J' I J - (the score's term: the second derivative of Sigma in B) */
    cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, k, nf, 1.0, Im, k, J, k, 0.0, tmp, k);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, nf, nf, k, 1.0, J, k, tmp, k, 0.0, If, nf);
    /* dl = tr(Gs dSigma), Gs = L^-T Sw L^-1 with Sw the score of E as a symmetric
     * matrix; Sigma(B + dB) has the term dB dB', so H[(i,a),(j,b)] += 2 delta_ab Gs_ij */
    for (int j = 0; j < d; j++)
        for (int q = 0; q <= j; q++) {
            const double v = score[2 * d + ghf__se_tri(j, q)] * (j == q ? 1.0 : 0.5);
            Sw[j * d + q] = Sw[q * d + j] = v;
        }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, d, 1.0, c->der.Linv, d, Sw, d, 0.0, Gs, d);
    memcpy(Sw, Gs, (size_t)d * d * sizeof(double));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, Sw, d, c->der.Linv, d, 0.0, Gs, d);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            for (int a = 0; a < r; a++) If[(size_t)(ib0 + j * r + a) * nf + ib0 + i * r + a] -= 2.0 * Gs[i * d + j];
    for (int j = 0; j < nf; j++) /* symmetric up to rounding */
        for (int i = 0; i < j; i++) {
            const double v = 0.5 * (If[(size_t)j * nf + i] + If[(size_t)i * nf + j]);
            If[(size_t)j * nf + i] = If[(size_t)i * nf + j] = v;
        }
    /* the score in factor coordinates */
    double *sk = malloc((size_t)k * sizeof(double));
    if (!sk) {
        snprintf(why, len, "out of memory");
        goto out;
    }
    for (int i = 0; i < k; i++) sk[i] = score[c->full_of[i]];
    cblas_dgemv(CblasColMajor, CblasTrans, k, nf, 1.0, J, k, sk, 1, 0.0, sf, 1);
    /* the constraints (columns of Q's first m columns): the gauge d log|Sigma| = 0
     * (J' c, c its gradient in full coordinates) and, for a < b, the tangent of
     * the rotations B -> B (I + s (e_a e_b' - e_b e_a')) */
    memset(Q, 0, (size_t)nf * nf * sizeof(double));
    int col = 0;
    if (c->has_sub) {
        double *tv = malloc((size_t)c->kfull * sizeof(double));
        if (!tv) {
            free(sk);
            snprintf(why, len, "out of memory");
            goto out;
        }
        ghf__se_gauge(c, cw, tv);
        free(tv);
        for (int i = 0; i < k; i++) sk[i] = cw[c->full_of[i]];
        cblas_dgemv(CblasColMajor, CblasTrans, k, nf, 1.0, J, k, sk, 1, 0.0, Q, 1);
        col = 1;
    }
    free(sk);
    for (int a = 0; a < r; a++)
        for (int b = a + 1; b < r; b++, col++)
            for (int i = 0; i < d; i++) {
                Q[(size_t)col * nf + ib0 + i * r + a] = t->B[i * r + b];
                Q[(size_t)col * nf + ib0 + i * r + b] = -t->B[i * r + a];
            }
    /* T: an orthonormal basis of the complement of the constraints (the last
     * n2 columns of the full Q of their QR factorisation) */
    if (m > 0) {
        if (LAPACKE_dgeqrf(LAPACK_COL_MAJOR, nf, m, Q, nf, tau) != 0 ||
            LAPACKE_dorgqr(LAPACK_COL_MAJOR, nf, nf, m, Q, nf, tau) != 0) {
            snprintf(why, len, "the QR factorisation of the factor form's gauge failed");
            goto out;
        }
    } else {
        for (int i = 0; i < nf; i++) Q[(size_t)i * nf + i] = 1.0;
    }
    const double *T = Q + (size_t)m * nf;
    /* A = T' I_f T, scaled to a unit diagonal */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nf, n2, nf, 1.0, If, nf, T, nf, 0.0, TA, nf);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, n2, n2, nf, 1.0, T, nf, TA, nf, 0.0, A, n2);
    for (int i = 0; i < n2; i++) {
        const double v = A[(size_t)i * n2 + i];
        if (!(v > 0.0) || !isfinite(v)) {
            snprintf(why, len, "the observed information of the factor form is not positive definite (a diagonal "
                     "entry is %.3g): the point is not a maximum of the likelihood", v);
            goto out;
        }
        Dg[i] = 1.0 / sqrt(v);
    }
    for (int j = 0; j < n2; j++)
        for (int i = 0; i < n2; i++) A[(size_t)j * n2 + i] *= Dg[i] * Dg[j];
    const double anorm = LAPACKE_dlansy(LAPACK_COL_MAJOR, '1', 'L', n2, A, n2);
    const int old = ghf__se_blas_threads(c->nthreads);
    int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n2, A, n2);
    double rcond = 0.0;
    if (info == 0) info = LAPACKE_dpocon(LAPACK_COL_MAJOR, 'L', n2, A, n2, anorm, &rcond) ? -1 : 0;
    *cond = info == 0 && rcond > 0.0 ? 1.0 / rcond : INFINITY;
    if (info != 0)
        snprintf(why, len, "the observed information of the factor form is not positive definite: the point is not "
                 "a strict maximum of the likelihood (a parameter is not identified, or the fit has not converged)");
    else if (*cond > SEF_COND_MAX)
        snprintf(why, len, "the observed information of the factor form is singular (condition number %.3g after "
                 "scaling to a unit diagonal): some parameters are not identified by these data (too many factors?)",
                 *cond);
    else if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', n2, A, n2) != 0)
        snprintf(why, len, "inverting the observed information failed");
    else
        info = 1;
    ghf__se_blas_threads(old);
    if (info != 1) goto out;
    for (int j = 0; j < n2; j++)
        for (int i = j; i < n2; i++) {
            const double v = Dg[i] * A[(size_t)j * n2 + i] * Dg[j];
            A[(size_t)j * n2 + i] = A[(size_t)i * n2 + j] = v;
        }
    /* V_f = T A^-1 T' (into If), the Newton decrement sqrt(s' V_f s) */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nf, n2, n2, 1.0, T, nf, A, n2, 0.0, TA, nf);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, nf, nf, n2, 1.0, TA, nf, T, nf, 0.0, If, nf);
    double nd = 0.0;
    for (int j = 0; j < nf; j++)
        for (int i = 0; i < nf; i++) nd += sf[i] * If[(size_t)j * nf + i] * sf[j];
    *newton = sqrt(fmax(nd, 0.0));
    /* the implied covariance of the full form's parameters: J V_f J' (into Im) */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, k, nf, nf, 1.0, J, k, If, nf, 0.0, tmp, k);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, k, k, nf, 1.0, tmp, k, J, k, 0.0, Im, k);
    for (int j = 0; j < k; j++)
        for (int i = 0; i < j; i++) {
            const double v = 0.5 * (Im[(size_t)j * k + i] + Im[(size_t)i * k + j]);
            Im[(size_t)j * k + i] = Im[(size_t)i * k + j] = v;
        }
    rc = 0;
out:
    free(J), free(tmp), free(If), free(Q), free(A), free(W);
    return rc;
}
