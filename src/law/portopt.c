/* portopt.c - minimum-risk portfolios under one fitted law (portopt.h). */
#include "portopt.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_linalg.h>
#include <nlopt.h>

#include "gig.h"
#include "risk.h"

#define OPT_KKT_TOL 1e-6   /* converged: the first-order residual at most this */
#define OPT_POLISH 4       /* at most this many SLSQP runs, each from the last point (OPT_RESTART_TOL) */
#define OPT_POLISH_TOL 1e-11 /* working set: a held asset joins when its residual is below -this */
#define OPT_RESTART_TOL 1e-7 /* SLSQP is restarted while the residual is above this */
#define OPT_OOM (-100)     /* slsqp_runs: out of memory (not an NLopt code) */
#define OPT_WS_MIN 200     /* above this many assets with finite lower bounds: a working set */
#define OPT_WS_START 100
#define OPT_WS_ADD 50
#define OPT_NEWTON_MAX 300 /* a Newton polish on at most this many free coordinates */
#define OPT_ACTIVE 1e-9    /* a bound within this (relative to 1 + |bound|) is active */
#define AT_LO(w, c, i) (isfinite((c)->lo[i]) && (w)[i] - (c)->lo[i] <= OPT_ACTIVE * (1.0 + fabs((c)->lo[i])))
#define AT_HI(w, c, i) (isfinite((c)->hi[i]) && (c)->hi[i] - (w)[i] <= OPT_ACTIVE * (1.0 + fabs((c)->hi[i])))

void ghf_opt_quad_dense(const void *ctx, int d, const double *w, double *Sw, double *wsw)
{
    const double *S = (const double *)ctx;
    double q = 0.0;
    for (int i = 0; i < d; i++) {
        const double *row = S + (size_t)i * d;
        double t = 0.0;
        for (int k = 0; k < d; k++) t += row[k] * w[k];
        Sw[i] = t;
        q += w[i] * t;
    }
    *wsw = q;
}

void ghf_opt_quad_factor(const void *ctx, int d, const double *w, double *Sw, double *wsw)
{
    const ghf_opt_factor *f = (const ghf_opt_factor *)ctx;
    const int r = f->nf;
    double bw[r > 0 ? r : 1];
    *wsw = ghf_factor_quad(d, r, f->B, f->D, w, bw); /* risk.c: |B'w|^2 + w'Dw, B'w into bw */
    for (int i = 0; i < d; i++) {
        const double *row = f->B + (size_t)i * r;
        double t = f->D[i] * w[i];
        for (int k = 0; k < r; k++) t += row[k] * bw[k];
        Sw[i] = t;
    }
}

static int gamma_zero(const ghf_opt_law *law)
{
    for (int i = 0; i < law->d; i++)
        if (law->gamma[i] != 0.0) return 0;
    return 1;
}

int ghf_opt_law_init(ghf_opt_law *law)
{
    const int st = ghf_uni_mix_init(&law->mix, law->gauss, law->p, law->a, law->b);
    if (st != GHF_UNI_OK) return st;
    if (law->gauss) {
        law->ey = 1.0;
        law->vy = 0.0;
    } else if (law->a == 0.0) { /* inverse Gamma(shape nu/2 = -p, scale b/2) */
        const double sh = -law->p, sc = 0.5 * law->b;
        law->ey = sh > 1.0 ? sc / (sh - 1.0) : INFINITY;
        law->vy = sh > 2.0 ? sc * sc / ((sh - 1.0) * (sh - 1.0) * (sh - 2.0)) : INFINITY;
    } else {
        const ghf_gig_stats g = ghf__gig_eval(law->p, law->a, law->b, 1);
        law->ey = g.e_y;
        law->vy = g.h33;
        if (!isfinite(law->ey) || !isfinite(law->vy)) return GHF_UNI_EDOM;
    }
    return GHF_UNI_OK;
}

const char *ghf_opt_law_lacks(const ghf_opt_law *law, int measure, int need_mean)
{
    const int gz = gamma_zero(law);
    const int tface = !law->gauss && law->a == 0.0;
    /* E[w'X] = w'mu + w'gamma E[Y]: needs E[Y] (or gamma = 0 and E[sqrt Y] < inf) */
    const int mean_ok = isfinite(law->ey) || (gz && (!tface || law->p < -0.5));
    if ((need_mean || measure == GHF_OPT_SD) && !mean_ok)
        return "the fit's mean does not exist (a t law with nu <= 2 and skewness, or nu <= 1)";
    if (measure == GHF_OPT_SD && !(isfinite(law->ey) && (isfinite(law->vy) || gz)))
        return "the fit's variance does not exist (t with nu <= 2, or nu <= 4 with skewness gamma != 0)";
    if (measure == GHF_OPT_ES && tface && (law->p >= -0.5 || (!gz && law->p >= -1.0)))
        return "ES is infinite for some portfolios (t with nu <= 1, or nu <= 2 with skewness gamma != 0)";
    return NULL;
}

static double sgn_of(const ghf_opt_law *law) { return law->losses ? 1.0 : -1.0; }

/* E[Y] as it enters the mean: 0 when gamma = 0 (the mean is mu, E[Y] may be inf) */
static double ey_eff(const ghf_opt_law *law) { return isfinite(law->ey) ? law->ey : 0.0; }

double ghf_opt_return(const ghf_opt_law *law, const double *w, double *grad)
{
    const double sg = -sgn_of(law), ey = ey_eff(law);
    double r = 0.0;
    for (int i = 0; i < law->d; i++) {
        const double ri = sg * (law->mu[i] + ey * law->gamma[i]);
        r += ri * w[i];
        if (grad) grad[i] = ri;
    }
    return r;
}

/* (m, g, s) of the loss, Sigma w into Sw */
static void loss_mgs(const ghf_opt_law *law, const double *w, double *Sw, double *m, double *g, double *s2)
{
    const double sg = sgn_of(law);
    double mw = 0.0, gw = 0.0;
    for (int i = 0; i < law->d; i++) {
        mw += w[i] * law->mu[i];
        gw += w[i] * law->gamma[i];
    }
    law->disp.quad(law->disp.ctx, law->d, w, Sw, s2);
    if (!(*s2 > 0.0)) *s2 = 0.0;
    *m = sg * mw;
    *g = sg * gw;
}

static int risk_buf(const ghf_opt_law *law, int measure, double alpha, const double *w, double *risk, double *grad,
                    double *u_hint, double *Sw)
{
    const int d = law->d;
    const double sg = sgn_of(law);
    double m, g, s2;
    loss_mgs(law, w, Sw, &m, &g, &s2);
    if (measure == GHF_OPT_SD) {
        const double vy = isfinite(law->vy) ? law->vy : 0.0, ey = law->ey;
        const double V = ey * s2 + vy * g * g, sd = sqrt(V);
        *risk = sd;
        if (grad)
            for (int i = 0; i < d; i++) grad[i] = (ey * Sw[i] + vy * g * sg * law->gamma[i]) / sd;
        return sd > 0.0 ? GHF_UNI_OK : GHF_UNI_EDOM;
    }
    {
        const double s = sqrt(s2);
        const ghf_uni_law L = {&law->mix, m, g, s};
        double var, es, dv[3], de[3];
        const int st = ghf_uni_var_es_grad(&L, alpha, u_hint, &var, &es, dv, de);
        const double *f = measure == GHF_OPT_VAR ? dv : de;
        *risk = measure == GHF_OPT_VAR ? var : es;
        if (grad)
            for (int i = 0; i < d; i++) grad[i] = sg * (f[0] * law->mu[i] + f[1] * law->gamma[i]) + f[2] * Sw[i] / s;
        return st;
    }
}

int ghf_opt_risk(const ghf_opt_law *law, int measure, double alpha, const double *w, double *risk, double *grad,
                 double *u_hint)
{
    double *Sw = malloc((size_t)law->d * sizeof(double));
    if (!Sw) return GHF_UNI_EACC;
    const int st = risk_buf(law, measure, alpha, w, risk, grad, u_hint, Sw);
    free(Sw);
    return st;
}

static int worse(int a, int b)
{
    static const int rank[4] = {0, 3, 1, 2}; /* OK < INF < EACC < EDOM */
    const int ra = (a >= 0 && a < 4) ? rank[a] : 3, rb = (b >= 0 && b < 4) ? rank[b] : 3;
    return ra >= rb ? a : b;
}

int ghf_opt_measures(const ghf_opt_law *law, double alpha, const double *w, double *sd, double *var, double *es)
{
    double *Sw = malloc((size_t)law->d * sizeof(double));
    if (!Sw) return GHF_UNI_EACC;
    double m, g, s2;
    loss_mgs(law, w, Sw, &m, &g, &s2);
    free(Sw);
    const double vy = isfinite(law->vy) ? law->vy : 0.0;
    *sd = isfinite(law->ey) ? sqrt(law->ey * s2 + vy * g * g) : NAN;
    const ghf_uni_law L = {&law->mix, m, g, sqrt(s2)};
    return ghf_uni_var_es(&L, alpha, var, es);
}

/* ---------------------------------------------------------------------------
 * The feasible set.
 * -------------------------------------------------------------------------*/
int ghf_opt_feasible(const ghf_opt_cons *c, int d, char *err, size_t errlen)
{
    double slo = 0.0, shi = 0.0;
    for (int i = 0; i < d; i++) {
        if (!(c->lo[i] <= c->hi[i])) {
            snprintf(err, errlen, "the bounds of asset %d are empty (%g > %g)", i, c->lo[i], c->hi[i]);
            return -1;
        }
        slo += c->lo[i];
        shi += c->hi[i];
    }
    if (slo > c->budget * (1.0 + 1e-12) + 1e-300 || shi < c->budget - 1e-12 * fabs(c->budget)) {
        snprintf(err, errlen, "no portfolio within the bounds sums to the budget %g (the bounds allow sums from %g to %g)",
                 c->budget, slo, shi);
        return -1;
    }
    return 0;
}

static double clamp_sum(const ghf_opt_cons *c, int d, double t, double *w)
{
    double s = 0.0;
    for (int i = 0; i < d; i++) {
        const double v = fmin(fmax(t, c->lo[i]), c->hi[i]);
        if (w) w[i] = v;
        s += v;
    }
    return s;
}

/* a feasible point: w_i = clamp(t, lo_i, hi_i) with t found by bisection
 * (the equal-weight point when the bounds allow it) */
static void feasible_point(const ghf_opt_cons *c, int d, double *w)
{
    double a = c->budget / d, b = a, step = 1.0 + fabs(a);
    for (int it = 0; it < 1100 && clamp_sum(c, d, a, NULL) > c->budget; it++, step *= 2.0) a -= step;
    step = 1.0 + fabs(b);
    for (int it = 0; it < 1100 && clamp_sum(c, d, b, NULL) < c->budget; it++, step *= 2.0) b += step;
    for (int it = 0; it < 200 && b - a > 1e-16 * (fabs(a) + fabs(b)); it++) {
        const double t = 0.5 * (a + b);
        if (clamp_sum(c, d, t, NULL) < c->budget) a = t;
        else b = t;
    }
    clamp_sum(c, d, 0.5 * (a + b), w);
}

typedef struct idx_r {
    double r;
    int i;
} idx_r;

static int by_r_desc(const void *x, const void *y)
{
    const idx_r *a = (const idx_r *)x, *b = (const idx_r *)y;
    return a->r > b->r ? -1 : a->r < b->r ? 1 : (a->i > b->i) - (a->i < b->i);
}

double ghf_opt_max_return(const ghf_opt_law *law, const ghf_opt_cons *c, double *w)
{
    const int d = law->d;
    double *r = malloc((size_t)d * sizeof(double)), *x = malloc((size_t)d * sizeof(double));
    idx_r *o = malloc((size_t)d * sizeof(idx_r));
    double res = NAN;
    if (!r || !x || !o) goto done;
    for (int i = 0; i < d; i++) x[i] = 0.0;
    ghf_opt_return(law, x, r); /* its gradient: the expected return of each asset */
    double rem = c->budget;
    for (int i = 0; i < d; i++) {
        if (!isfinite(c->lo[i])) {
            res = INFINITY;
            goto done;
        }
        x[i] = c->lo[i];
        rem -= c->lo[i];
        o[i].r = r[i];
        o[i].i = i;
    }
    qsort(o, (size_t)d, sizeof *o, by_r_desc);
    for (int k = 0; k < d && rem > 0.0; k++) {
        const int i = o[k].i;
        const double add = fmin(rem, c->hi[i] - c->lo[i]);
        x[i] += add;
        rem -= add;
    }
    res = 0.0;
    for (int i = 0; i < d; i++) res += r[i] * x[i];
    if (w) memcpy(w, x, (size_t)d * sizeof(double));
done:
    free(r), free(x), free(o);
    return res;
}

/* ---------------------------------------------------------------------------
 * The objective.
 * -------------------------------------------------------------------------*/
typedef struct opt_ctx {
    const ghf_opt_law *law;
    int measure, type;
    double alpha, rf, budget;
    double u_hint;
    double fscale;          /* SLSQP sees f * fscale (gradients of order 1) */
    double *Sw, *gr, *gret; /* scratch [d] */
    int n_eval, worst;
} opt_ctx;

/* the function minimised: the risk, or -(ret - rf budget) / risk (tangency) */
static double obj_eval(opt_ctx *C, const double *w, double *grad)
{
    const int d = C->law->d;
    double risk = NAN;
    const int st = risk_buf(C->law, C->measure, C->alpha, w, &risk, grad ? C->gr : NULL, &C->u_hint, C->Sw);
    C->n_eval++;
    C->worst = worse(C->worst, st);
    if (C->type != GHF_OPT_TANGENCY) {
        if (grad) memcpy(grad, C->gr, (size_t)d * sizeof(double));
        return risk;
    }
    const double ex = ghf_opt_return(C->law, w, C->gret) - C->rf * C->budget, f = -ex / risk;
    if (grad)
        for (int i = 0; i < d; i++) grad[i] = -(C->gret[i] - ex * C->gr[i] / risk) / risk;
    return f;
}

typedef struct tgt_ctx {
    const ghf_opt_law *law;
    double target, scale; /* the constraint is (ret - target) * scale, scale = 1 / max |r_i| */
} tgt_ctx;

/* What SLSQP sees: the coordinates idx [n] of the full w (the others held
 * where they are: a working set); gf [d] scratch. */
typedef struct sub_ctx {
    opt_ctx *C;
    tgt_ctx *T;
    int n;
    const int *idx;
    double *w, *gf;
    double budget; /* the budget less the held coordinates */
} sub_ctx;

static void scatter(const sub_ctx *P, const double *x)
{
    for (int k = 0; k < P->n; k++) P->w[P->idx[k]] = x[k];
}

static double nl_obj(unsigned n, const double *x, double *grad, void *data)
{
    sub_ctx *P = (sub_ctx *)data;
    scatter(P, x);
    const double f = obj_eval(P->C, P->w, grad ? P->gf : NULL) * P->C->fscale;
    if (grad)
        for (unsigned k = 0; k < n; k++) grad[k] = P->gf[P->idx[k]] * P->C->fscale;
    return isfinite(f) ? f : HUGE_VAL;
}

static double nl_budget(unsigned n, const double *x, double *grad, void *data)
{
    const sub_ctx *P = (const sub_ctx *)data;
    double s = 0.0;
    for (unsigned k = 0; k < n; k++) {
        s += x[k];
        if (grad) grad[k] = 1.0;
    }
    return s - P->budget;
}

static double nl_target(unsigned n, const double *x, double *grad, void *data)
{
    sub_ctx *P = (sub_ctx *)data;
    scatter(P, x);
    const double v = (ghf_opt_return(P->T->law, P->w, P->gf) - P->T->target) * P->T->scale;
    if (grad)
        for (unsigned k = 0; k < n; k++) grad[k] = P->gf[P->idx[k]] * P->T->scale;
    return v;
}

/* ghf_opt_kkt, and the residuals g_i - lambda - nu r_i into resid [d] (may be NULL) */
static double kkt_core(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, const double *w,
                       int *n_active, double *resid)
{
    const int d = law->d;
    double *g = malloc((size_t)d * sizeof(double)), *r = malloc((size_t)d * sizeof(double));
    double *Sw = malloc((size_t)d * 3 * sizeof(double));
    double res = NAN;
    if (!g || !r || !Sw) goto done;
    opt_ctx C = {law, sp->measure, sp->type, sp->alpha, sp->rf, c->budget, NAN, 1.0, Sw, Sw + d, Sw + 2 * d, 0, 0};
    obj_eval(&C, w, g);
    ghf_opt_return(law, w, r);
    const int nm = sp->type == GHF_OPT_TARGET ? 2 : 1;
    /* multipliers: least squares of g on (1, r) over the free coordinates */
    double A11 = 0, A12 = 0, A22 = 0, b1 = 0, b2 = 0, gmax = 0;
    int nfree = 0, nact = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < d; i++) {
            const int atlo = AT_LO(w, c, i), athi = AT_HI(w, c, i);
            if (pass == 0) nact += atlo || athi;
            if (pass == 0 ? (atlo || athi) : 0) continue;
            A11 += 1.0, A12 += r[i], A22 += r[i] * r[i], b1 += g[i], b2 += r[i] * g[i];
            nfree++;
        }
        if (nfree >= nm) break;
        A11 = A12 = A22 = b1 = b2 = 0.0; /* too few free coordinates: fit on all */
        nfree = 0;
    }
    double lam = 0.0, nu = 0.0;
    if (nm == 1) lam = b1 / A11;
    else {
        const double det = A11 * A22 - A12 * A12;
        if (fabs(det) > 1e-300) {
            lam = (A22 * b1 - A12 * b2) / det;
            nu = (A11 * b2 - A12 * b1) / det;
        } else lam = b1 / A11;
    }
    double viol = 0.0;
    for (int i = 0; i < d; i++) {
        const double ri = g[i] - lam - nu * r[i];
        if (resid) resid[i] = ri;
        const int atlo = AT_LO(w, c, i), athi = AT_HI(w, c, i);
        double v = fabs(ri);
        if (atlo && athi) v = 0.0;
        else if (atlo) v = ri < 0.0 ? -ri : 0.0;
        else if (athi) v = ri > 0.0 ? ri : 0.0;
        viol = fmax(viol, v);
        gmax = fmax(gmax, fabs(g[i]));
    }
    if (sp->type == GHF_OPT_TANGENCY) {
        /* the ratio is homogeneous of degree 0 in w: at the optimum its
         * gradient vanishes, so the scale is that of its first term,
         * max |d ret / dw| / risk */
        double risk = NAN, rm = 0.0;
        risk_buf(law, sp->measure, sp->alpha, w, &risk, NULL, NULL, Sw);
        for (int i = 0; i < d; i++) rm = fmax(rm, fabs(r[i]));
        if (risk > 0.0) gmax = fmax(gmax, rm / risk);
    }
    res = gmax > 0.0 ? viol / gmax : viol;
    if (resid && gmax > 0.0)
        for (int i = 0; i < d; i++) resid[i] /= gmax;
    if (n_active) *n_active = nact;
done:
    free(g), free(r), free(Sw);
    return res;
}

double ghf_opt_kkt(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, const double *w,
                   int *n_active)
{
    return kkt_core(law, c, sp, w, n_active, NULL);
}

/* primal feasibility of w (budget, box, target), relative */
static int feasible_w(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, const double *w)
{
    double s = 0.0, sa = 0.0;
    for (int i = 0; i < law->d; i++) {
        if (w[i] < c->lo[i] - 1e-9 * (1.0 + fabs(c->lo[i])) || w[i] > c->hi[i] + 1e-9 * (1.0 + fabs(c->hi[i])))
            return 0;
        s += w[i];
        sa += fabs(w[i]);
    }
    if (fabs(s - c->budget) > 1e-9 * (1.0 + sa)) return 0;
    if (sp->type == GHF_OPT_TARGET) {
        const double r = ghf_opt_return(law, w, NULL);
        if (fabs(r - sp->target) > 1e-9 * (1.0 + fabs(sp->target))) return 0;
    }
    return 1;
}

/* A Newton step on the coordinates off their bounds, with the active bounds
 * held: the KKT system [H A'; A 0] [dx; lambda] = [-g; b - A w] with H a
 * forward-difference Hessian of the analytic gradient (A: the budget row and
 * the target row).  SLSQP's line search compares function values, which
 * cannot place a minimum closer than about sqrt(eps) relative; the gradient
 * can.  The step is kept only if it stays in the box and lowers the
 * first-order residual without raising the objective beyond round-off.
 * Returns the new residual (or the old one). */
static double newton_polish(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, double *w,
                            double kkt, int *n_active)
{
    const int d = law->d;
    int nf = 0;
    for (int i = 0; i < d; i++) nf += !(AT_LO(w, c, i) || AT_HI(w, c, i));
    const int nm = sp->type == GHF_OPT_TARGET ? 2 : 1, n = nf + nm;
    if (nf == 0 || nf > OPT_NEWTON_MAX) return kkt;
    int *fi = malloc((size_t)nf * sizeof(int));
    double *scr = malloc((size_t)d * 6 * sizeof(double));
    gsl_matrix *M = gsl_matrix_alloc((size_t)n, (size_t)n);
    gsl_vector *rhs = gsl_vector_alloc((size_t)n), *x = gsl_vector_alloc((size_t)n);
    gsl_permutation *perm = gsl_permutation_alloc((size_t)n);
    if (!fi || !scr || !M || !rhs || !x || !perm) goto done;
    {
        double *g = scr + 3 * d, *g2 = scr + 4 * d, *wt = scr + 5 * d;
        opt_ctx C = {law, sp->measure, sp->type, sp->alpha, sp->rf, c->budget, NAN, 1.0, scr, scr + d, scr + 2 * d, 0, 0};
        for (int i = 0, k = 0; i < d; i++)
            if (!(AT_LO(w, c, i) || AT_HI(w, c, i))) fi[k++] = i;
        const double f0 = obj_eval(&C, w, g);
        for (int a = 0; a < nf; a++) {
            const int j = fi[a];
            const double h = 1e-7 * fmax(fabs(w[j]), 1e-2);
            memcpy(wt, w, (size_t)d * sizeof(double));
            wt[j] += h;
            obj_eval(&C, wt, g2);
            for (int b = 0; b < nf; b++) gsl_matrix_set(M, (size_t)b, (size_t)a, (g2[fi[b]] - g[fi[b]]) / h);
        }
        for (int a = 0; a < nf; a++) /* symmetrise */
            for (int b = a + 1; b < nf; b++) {
                const double v = 0.5 * (gsl_matrix_get(M, a, b) + gsl_matrix_get(M, b, a));
                gsl_matrix_set(M, a, b, v), gsl_matrix_set(M, b, a, v);
            }
        double *rr = wt; /* the return gradient */
        ghf_opt_return(law, w, rr);
        double sum = 0.0, ret = 0.0;
        for (int i = 0; i < d; i++) sum += w[i], ret += rr[i] * w[i];
        for (int a = 0; a < nf; a++) {
            gsl_matrix_set(M, (size_t)(nf), (size_t)a, 1.0), gsl_matrix_set(M, (size_t)a, (size_t)nf, 1.0);
            if (nm == 2) {
                gsl_matrix_set(M, (size_t)(nf + 1), (size_t)a, rr[fi[a]]);
                gsl_matrix_set(M, (size_t)a, (size_t)(nf + 1), rr[fi[a]]);
            }
            gsl_vector_set(rhs, (size_t)a, -g[fi[a]]);
        }
        for (int a = nf; a < n; a++)
            for (int b = nf; b < n; b++) gsl_matrix_set(M, (size_t)a, (size_t)b, 0.0);
        gsl_vector_set(rhs, (size_t)nf, c->budget - sum);
        if (nm == 2) gsl_vector_set(rhs, (size_t)(nf + 1), sp->target - ret);
        int sg = 0;
        if (gsl_linalg_LU_decomp(M, perm, &sg) || gsl_linalg_LU_solve(M, perm, rhs, x)) goto done;
        memcpy(wt, w, (size_t)d * sizeof(double));
        for (int a = 0; a < nf; a++) {
            const int j = fi[a];
            wt[j] = w[j] + gsl_vector_get(x, (size_t)a);
            if (!(wt[j] >= c->lo[j] && wt[j] <= c->hi[j])) goto done;
        }
        const double f1 = obj_eval(&C, wt, NULL);
        int na = 0;
        const double k1 = ghf_opt_kkt(law, c, sp, wt, &na);
        if (k1 < kkt && f1 <= f0 + 1e-13 * fabs(f0)) {
            memcpy(w, wt, (size_t)d * sizeof(double));
            kkt = k1;
            *n_active = na;
        }
    }
done:
    free(fi), free(scr);
    if (M) gsl_matrix_free(M);
    if (rhs) gsl_vector_free(rhs);
    if (x) gsl_vector_free(x);
    if (perm) gsl_permutation_free(perm);
    return kkt;
}

/* SLSQP on the coordinates idx [n] of w (in/out; the others held), with
 * restarts while the first-order residual of the full problem is above
 * OPT_RESTART_TOL.  NLopt's code; OPT_OOM out of memory. */
static int slsqp_runs(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, double *w, const int *idx,
                      int n, opt_ctx *C, tgt_ctx *T, double *kkt, int *n_active)
{
    const int d = law->d;
    double *x = malloc((size_t)n * 3 * sizeof(double)), *gf = malloc((size_t)d * sizeof(double));
    if (!x || !gf) {
        free(x), free(gf);
        return OPT_OOM;
    }
    double *lo = x + n, *hi = x + 2 * n;
    sub_ctx P = {C, T, n, idx, w, gf, c->budget};
    {
        char *in = calloc((size_t)d, 1);
        if (!in) {
            free(x), free(gf);
            return OPT_OOM;
        }
        for (int k = 0; k < n; k++) in[idx[k]] = 1;
        for (int i = 0; i < d; i++)
            if (!in[i]) P.budget -= w[i];
        free(in);
    }
    for (int k = 0; k < n; k++) lo[k] = c->lo[idx[k]], hi[k] = c->hi[idx[k]];
    int code = NLOPT_FAILURE;
    for (int run = 0; run < OPT_POLISH; run++) {
        nlopt_opt o = nlopt_create(NLOPT_LD_SLSQP, (unsigned)n);
        if (!o) {
            free(x), free(gf);
            return OPT_OOM;
        }
        nlopt_set_min_objective(o, nl_obj, &P);
        nlopt_set_lower_bounds(o, lo);
        nlopt_set_upper_bounds(o, hi);
        nlopt_add_equality_constraint(o, nl_budget, &P, 1e-13 * (1.0 + fabs(c->budget)));
        if (sp->type == GHF_OPT_TARGET) nlopt_add_equality_constraint(o, nl_target, &P, 1e-13 * (1.0 + fabs(sp->target)));
        nlopt_set_ftol_rel(o, 0.0);
        nlopt_set_xtol_rel(o, 1e-13);
        nlopt_set_maxeval(o, 2000 + 20 * n);
        for (int k = 0; k < n; k++) x[k] = fmin(fmax(w[idx[k]], lo[k]), hi[k]);
        scatter(&P, x);
        { /* scale: the objective's gradient of order 1 at the start */
            double gmax = 0.0;
            C->fscale = 1.0;
            obj_eval(C, w, gf);
            for (int k = 0; k < n; k++) gmax = fmax(gmax, fabs(gf[idx[k]]));
            C->fscale = gmax > 0.0 && isfinite(gmax) ? 1.0 / gmax : 1.0;
        }
        double f = 0.0;
        code = (int)nlopt_optimize(o, x, &f);
        nlopt_destroy(o);
        scatter(&P, x);
        if (code == NLOPT_ROUNDOFF_LIMITED) code = NLOPT_SUCCESS; /* judged by the residual */
        *kkt = ghf_opt_kkt(law, c, sp, w, n_active);
        /* near sqrt(eps) SLSQP's line search stalls: the Newton polish (run_one) takes it from there */
        if (*kkt <= OPT_RESTART_TOL && feasible_w(law, c, sp, w)) break;
    }
    free(x), free(gf);
    return code;
}

typedef struct ws_key {
    double v;
    int i;
} ws_key;

static int by_v(const void *a, const void *b)
{
    const ws_key *x = (const ws_key *)a, *y = (const ws_key *)b;
    return x->v < y->v ? -1 : x->v > y->v ? 1 : (x->i > y->i) - (x->i < y->i);
}

/* SLSQP from w (in/out), polished; fills res.  Above OPT_WS_MIN assets with
 * finite lower bounds (long-only, say), a working set: SLSQP (whose QP costs
 * O(n^3)) runs on OPT_WS_START assets, the others held at their lower
 * bounds, and the assets whose first-order residual at that bound is
 * negative (their weight should rise) are added, OPT_WS_ADD at a time, until
 * none is: then the point satisfies the full problem's KKT conditions. */
static int run_one(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, double *w,
                   ghf_opt_result *res)
{
    const int d = law->d;
    double *scr = malloc((size_t)d * 4 * sizeof(double));
    int *idx = malloc((size_t)d * sizeof(int));
    ws_key *key = malloc((size_t)d * sizeof(ws_key));
    char *in = calloc((size_t)d, 1);
    if (!scr || !idx || !key || !in) {
        free(scr), free(idx), free(key), free(in);
        return -1;
    }
    opt_ctx C = {law, sp->measure, sp->type, sp->alpha, sp->rf, c->budget, NAN, 1.0, scr, scr + d, scr + 2 * d, 0, 0};
    tgt_ctx T = {law, sp->target, 1.0};
    {
        double rmax = 0.0;
        ghf_opt_return(law, w, scr);
        for (int i = 0; i < d; i++) rmax = fmax(rmax, fabs(scr[i]));
        if (rmax > 0.0) T.scale = 1.0 / rmax;
    }
    int ws = d > OPT_WS_MIN;
    for (int i = 0; ws && i < d; i++) ws &= isfinite(c->lo[i]);
    int code = NLOPT_FAILURE, n = d;
    double kkt = INFINITY;
    if (!ws) {
        for (int i = 0; i < d; i++) idx[i] = i;
        code = slsqp_runs(law, c, sp, w, idx, d, &C, &T, &kkt, &res->n_active);
    } else {
        /* the start: the OPT_WS_START assets of least marginal risk at w (and
         * those already above their lower bounds, up to that count), the
         * others moved to their lower bounds and the budget rescaled onto
         * the set */
        double *g = scr + 3 * d;
        obj_eval(&C, w, g);
        for (int i = 0; i < d; i++) key[i] = (ws_key){g[i], i};
        qsort(key, (size_t)d, sizeof *key, by_v);
        n = OPT_WS_START < d ? OPT_WS_START : d;
        for (int k = 0; k < n; k++) in[key[k].i] = 1;
        double held = 0.0, set = 0.0;
        for (int i = 0; i < d; i++) {
            if (!in[i]) w[i] = c->lo[i];
            if (in[i]) set += w[i];
            else held += w[i];
        }
        for (int i = 0, k = 0; i < d; i++)
            if (in[i]) idx[k++] = i;
        if (set != 0.0)
            for (int k = 0; k < n; k++) w[idx[k]] *= (c->budget - held) / set;
        for (int round = 0; round < 1000; round++) {
            code = slsqp_runs(law, c, sp, w, idx, n, &C, &T, &kkt, &res->n_active);
            if (code == OPT_OOM || code < 0) break;
            double *rs = scr + 3 * d;
            kkt_core(law, c, sp, w, NULL, rs);
            int m = 0;
            for (int i = 0; i < d; i++)
                if (!in[i] && rs[i] < -OPT_POLISH_TOL) key[m++] = (ws_key){rs[i], i};
            if (m == 0) break;
            qsort(key, (size_t)m, sizeof *key, by_v);
            for (int k = 0; k < m && k < OPT_WS_ADD; k++) in[key[k].i] = 1;
            n = 0;
            for (int i = 0; i < d; i++)
                if (in[i]) idx[n++] = i;
        }
    }
    if (code == OPT_OOM) {
        free(scr), free(idx), free(key), free(in);
        return -1;
    }
    for (int it = 0; it < 2 && kkt > 1e-13; it++) kkt = newton_polish(law, c, sp, w, kkt, &res->n_active);
    res->status = code;
    res->kkt = kkt;
    res->n_eval = C.n_eval;
    res->converged = code > 0 && code != NLOPT_MAXEVAL_REACHED && code != NLOPT_MAXTIME_REACHED &&
                     kkt <= OPT_KKT_TOL && feasible_w(law, c, sp, w);
    free(scr), free(idx), free(key), free(in);
    return 0;
}

static void fill_measures(const ghf_opt_law *law, const ghf_opt_spec *sp, const double *w, ghf_opt_result *res)
{
    res->law_status = ghf_opt_measures(law, sp->alpha, w, &res->sd, &res->var, &res->es);
    res->ret = ghf_opt_return(law, w, NULL);
    res->risk = sp->measure == GHF_OPT_SD ? res->sd : sp->measure == GHF_OPT_VAR ? res->var : res->es;
}

/* the value the run minimised (for comparing VaR starts) */
static double objective_at(const ghf_opt_cons *c, const ghf_opt_spec *sp, const ghf_opt_result *r)
{
    return sp->type == GHF_OPT_TANGENCY ? -(r->ret - sp->rf * c->budget) / r->risk : r->risk;
}

int ghf_opt_solve(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, const double *w0,
                  double *w, ghf_opt_result *res)
{
    const int d = law->d;
    memset(res, 0, sizeof *res);
    if (sp->measure != GHF_OPT_VAR) {
        if (w0) memcpy(w, w0, (size_t)d * sizeof(double));
        else feasible_point(c, d, w);
        if (run_one(law, c, sp, w, res)) return -1;
        fill_measures(law, sp, w, res);
        return 0;
    }
    /* VaR: not convex in w.  Starts: the ES optimum at the same alpha, the
     * minimum-sd (or moment-free: ES) point, and w0 or the feasible
     * equal-weight point; the best converged run is kept (the lowest
     * objective; among unconverged runs only if none converged). */
    double *st = malloc((size_t)d * 4 * sizeof(double));
    if (!st) return -1;
    double *ws = st, *cand = st + 3 * d;
    int ns = 0, total = 0;
    {
        ghf_opt_spec es = *sp;
        ghf_opt_result r;
        es.measure = GHF_OPT_ES;
        if (!ghf_opt_law_lacks(law, GHF_OPT_ES, sp->type != GHF_OPT_MIN_RISK)) {
            if (ghf_opt_solve(law, c, &es, w0, ws + (size_t)ns * d, &r)) goto oom;
            total += r.n_eval, ns++;
        }
        es.measure = GHF_OPT_SD;
        if (!ghf_opt_law_lacks(law, GHF_OPT_SD, 1)) {
            if (ghf_opt_solve(law, c, &es, w0, ws + (size_t)ns * d, &r)) goto oom;
            total += r.n_eval, ns++;
        }
        if (w0) memcpy(ws + (size_t)ns * d, w0, (size_t)d * sizeof(double));
        else feasible_point(c, d, ws + (size_t)ns * d);
        ns++;
    }
    int have = 0;
    double best = INFINITY;
    for (int k = 0; k < ns; k++) {
        ghf_opt_result r;
        memset(&r, 0, sizeof r);
        memcpy(cand, ws + (size_t)k * d, (size_t)d * sizeof(double));
        if (run_one(law, c, sp, cand, &r)) goto oom;
        total += r.n_eval;
        fill_measures(law, sp, cand, &r);
        const double f = objective_at(c, sp, &r);
        /* better: converged beats unconverged, then the lower objective */
        if (!have || (r.converged && !res->converged) || (r.converged == res->converged && f < best)) {
            *res = r;
            best = f;
            have = 1;
            memcpy(w, cand, (size_t)d * sizeof(double));
        }
    }
    res->n_eval = total;
    free(st);
    return 0;
oom:
    free(st);
    return -1;
}

int ghf_opt_frontier(const ghf_opt_law *law, const ghf_opt_cons *c, int measure, double alpha, int K, double rmax,
                     double *W, ghf_opt_result *res)
{
    const int d = law->d;
    ghf_opt_spec sp = {measure, GHF_OPT_MIN_RISK, alpha, 0.0, 0.0};
    if (ghf_opt_solve(law, c, &sp, NULL, W, &res[0])) return -1;
    const double r0 = res[0].ret;
    const int vertex = isnan(rmax);
    double *wtop = W + (size_t)(K - 1) * d;
    const double rtop = vertex ? ghf_opt_max_return(law, c, wtop) : rmax;
    for (int k = 1; k < K; k++) {
        double *wk = W + (size_t)k * d;
        if (k == K - 1 && vertex) {
            memset(&res[k], 0, sizeof res[k]);
            sp.type = GHF_OPT_TARGET;
            sp.target = rtop;
            fill_measures(law, &sp, wk, &res[k]);
            res[k].status = 0;
            res[k].converged = 1;
            res[k].kkt = NAN;
            int na = 0;
            for (int i = 0; i < d; i++)
                na += AT_LO(wk, c, i) || AT_HI(wk, c, i);
            res[k].n_active = na;
            break;
        }
        sp.type = GHF_OPT_TARGET;
        sp.target = r0 + (rtop - r0) * (double)k / (double)(K - 1);
        if (ghf_opt_solve(law, c, &sp, W + (size_t)(k - 1) * d, wk, &res[k])) return -1;
    }
    return 0;
}
