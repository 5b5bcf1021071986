/* family.c - the family table (family.h): one row per family, and the
 * subordinator pieces of each (starts, M-step, near-Gaussian point). */
#include "family.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gig_solver.h"

/* ---------------------------------------------------------------------------
 * Shared pieces
 * ------------------------------------------------------------------------- */

static double p_free(int d)
{
    (void)d;
    return NAN;
}

static int p_any(double p, char *why, size_t whylen)
{
    if (fabs(p) <= 50.0) return 1;
    snprintf(why, whylen, "p must lie in [-50, 50]");
    return 0;
}

static int p_never(double p, char *why, size_t whylen)
{
    (void)p;
    snprintf(why, whylen, "p is fixed by the family");
    return 0;
}

/* splitmix64: the seed's extra starts */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* GIG with a > 0, b > 0 and the index p: a = b = 1/kappa gives E[Y] ~ 1 and
 * CV^2(Y) ~ kappa for every p once kappa is small. */
static int gig_near_gauss(double p, double kappa, double out[3])
{
    out[0] = p;
    out[1] = out[2] = 1.0 / kappa;
    return 0;
}

/* ---------------------------------------------------------------------------
 * gh: GIG(p, a, b), p free or fixed
 * ------------------------------------------------------------------------- */

static int gh_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3])
{
    (void)d;
    int nc = 0;
    if (m->fix_p) {
        cand[0][0] = m->p, cand[0][1] = 1.0, cand[0][2] = 1.0;
        return 1;
    }
    /* NIG-like, VG-like (b small), Student-t-like (a small), hyperbolic-like */
    const double base[4][3] = {{-0.5, 1.0, 1.0}, {2.0, 4.0, 1e-2}, {-3.0, 1e-2, 4.0}, {1.0, 1.0, 1.0}};
    const int nb = n_starts < 4 ? (n_starts < 1 ? 1 : n_starts) : 4;
    for (int i = 0; i < nb; i++, nc++)
        for (int j = 0; j < 3; j++) cand[nc][j] = base[i][j];
    uint64_t s = seed * 0x2545F4914F6CDD1DULL + 12345u;
    for (int i = 4; i < n_starts && nc < 16; i++, nc++) {
        const double u1 = (double)(splitmix(&s) >> 11) * 0x1.0p-53;
        const double u2 = (double)(splitmix(&s) >> 11) * 0x1.0p-53;
        cand[nc][0] = -4.0 + 8.0 * u1;
        cand[nc][1] = exp(-2.0 + 4.0 * u2);
        cand[nc][2] = cand[nc][1];
    }
    return nc;
}

/* The GIG M-step at a fixed index p (gh with p fixed, hyp); the optimum may
 * lie on a face: a = 0 (p < 0) or b = 0 (p > 0). */
static ghf_sub_status gig_msub_fixed(double p, const double eta[3], const double cur[3], double out[3])
{
    out[0] = p;
    out[1] = out[2] = NAN;
    /* The objective is concave in (a, b), so a face is the optimum exactly
     * when the objective does not grow into the interior from the face's own
     * optimum (KKT).  On b = 0 (p > 0): Y ~ Gamma(p, rate a/2) with
     * a = 2p / E Y; the interior direction helps iff E[1/Y] of the data's
     * posterior (eta[1]) is below the face's E[1/Y] = (a/2)/(p - 1) (infinite
     * for p <= 1).  On a = 0 (p < 0) likewise with Y and 1/Y swapped.
     * Deciding it here reaches the face exactly instead of letting the
     * interior solver creep towards it (hyp on return data, math.md 3.2). */
    if (p > 1.0 && eta[2] > 0.0 && eta[1] >= p / ((p - 1.0) * eta[2])) {
        out[1] = 2.0 * p / eta[2];
        out[2] = 0.0;
        return GHF_SUB_OK;
    }
    if (p < -1.0 && eta[1] > 0.0 && eta[2] >= -p / ((-p - 1.0) * eta[1])) {
        out[1] = 0.0;
        out[2] = 2.0 * -p / eta[1];
        return GHF_SUB_OK;
    }
    const int rc = ghf_gig_solve_fixed_p(p, eta[1], eta[2], cur[1], cur[2], &out[1], &out[2]);
    if (rc == 1) {
        if (p < 0.0) out[1] = 0.0;
        else if (p > 0.0) out[2] = 0.0;
    }
    return GHF_SUB_OK;
}

static ghf_sub_status gh_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3])
{
    (void)d;
    if (m->fix_p) return gig_msub_fixed(m->p, eta, cur, out);
    ghf_gig_solver_opts so;
    ghf_gig_solver_defaults(&so);
    const int warm_ok = cur[1] > 0.0 && cur[2] > 0.0; /* on a face: cold start */
    int iters = 0;
    const ghf_gig_status st = ghf_gig_solve(eta, warm_ok ? cur : NULL, &so, out, &iters);
    if (st == GHF_GIG_INFEASIBLE) return GHF_SUB_GAUSS; /* eta of a constant, to rounding */
    if (st == GHF_GIG_BADINPUT) return GHF_SUB_FAILED;
    /* OK; BOUNDARY: the optimum on a face a = 0 (the skewed Student-t limit)
     * or b = 0 (the variance-gamma limit), where the E-step and the
     * likelihood are defined, or on |p| = p_max: valid updates; MAXITER: the
     * best point the solver found (kept only if it improves) */
    return GHF_SUB_OK;
}

static int gh_near_gauss(const ghf_model *m, int d, double kappa, double out[3])
{
    (void)d;
    return gig_near_gauss(m->fix_p ? m->p : -0.5, kappa, out);
}

/* ---------------------------------------------------------------------------
 * nig: p = -1/2, closed form
 * ------------------------------------------------------------------------- */

static double nig_p(int d)
{
    (void)d;
    return -0.5;
}

static int nig_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3])
{
    (void)m, (void)d, (void)n_starts, (void)seed;
    cand[0][0] = -0.5, cand[0][1] = 1.0, cand[0][2] = 1.0;
    return 1;
}

/* Inverse Gaussian IG(mu, lambda) = GIG(-1/2, lambda/mu^2, lambda): mu = E Y,
 * 1/lambda = E 1/Y - 1/E Y (math.md 3.2). */
static ghf_sub_status nig_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3])
{
    (void)m, (void)d, (void)cur;
    const double mu = eta[2], lam = 1.0 / (eta[1] - 1.0 / eta[2]);
    if (!(lam > 0.0) || !isfinite(lam)) return GHF_SUB_GAUSS;
    out[0] = -0.5;
    out[1] = lam / (mu * mu);
    out[2] = lam;
    return GHF_SUB_OK;
}

static int nig_near_gauss(const ghf_model *m, int d, double kappa, double out[3])
{
    (void)m, (void)d;
    return gig_near_gauss(-0.5, kappa, out);
}

/* ---------------------------------------------------------------------------
 * hyp: p = (d + 1)/2 (Barndorff-Nielsen's hyperbolic law: for d = 1 the
 * log-density is a hyperbola)
 * ------------------------------------------------------------------------- */

static double hyp_p(int d) { return 0.5 * (d + 1); }

static int hyp_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3])
{
    (void)m, (void)n_starts, (void)seed;
    cand[0][0] = hyp_p(d), cand[0][1] = 1.0, cand[0][2] = 1.0;
    return 1;
}

static ghf_sub_status hyp_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3])
{
    (void)m;
    return gig_msub_fixed(hyp_p(d), eta, cur, out);
}

static int hyp_near_gauss(const ghf_model *m, int d, double kappa, double out[3])
{
    (void)m;
    return gig_near_gauss(hyp_p(d), kappa, out);
}

/* ---------------------------------------------------------------------------
 * vg: b = 0, Y ~ Gamma(p, rate a/2)
 * ------------------------------------------------------------------------- */

static int p_positive(double p, char *why, size_t whylen)
{
    if (p > 0.0 && p <= 1e6) return 1;
    snprintf(why, whylen, "the variance-gamma family needs p > 0 (the Gamma shape; at most 1e6)");
    return 0;
}

static int vg_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3])
{
    (void)d, (void)n_starts, (void)seed;
    /* E[Y] = p / (a/2) = 1 */
    if (m->fix_p) {
        cand[0][0] = m->p, cand[0][1] = 2.0 * m->p, cand[0][2] = 0.0;
        return 1;
    }
    const double p[2] = {2.0, 1.0};
    for (int i = 0; i < 2; i++) cand[i][0] = p[i], cand[i][1] = 2.0 * p[i], cand[i][2] = 0.0;
    return 2;
}

/* Gamma(al, rate be): E log Y - log E Y = digamma(al) - log(al) (math.md 3.2) */
static ghf_sub_status vg_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3])
{
    (void)d, (void)cur;
    double al = m->p;
    if (!m->fix_p) {
        const double gap = eta[0] - log(eta[2]);
        if (!(gap < -1e-15 * (1.0 + fabs(eta[0])))) return GHF_SUB_GAUSS; /* Jensen: equality for a constant */
        al = ghf_gamma_shape_from_logmean_gap(gap);
        if (!(al > 0.0) || !isfinite(al)) return GHF_SUB_FAILED;
    }
    out[0] = al;
    out[1] = 2.0 * al / eta[2];
    out[2] = 0.0;
    return GHF_SUB_OK;
}

static int vg_near_gauss(const ghf_model *m, int d, double kappa, double out[3])
{
    (void)d;
    if (m->fix_p) return -1;
    out[0] = 1.0 / kappa; /* CV^2 = 1/shape */
    out[1] = 2.0 * out[0];
    out[2] = 0.0;
    return 0;
}

/* ---------------------------------------------------------------------------
 * t: a = 0, Y ~ 1/Gamma(-p, rate b/2), nu = -2p
 * ------------------------------------------------------------------------- */

static int p_negative(double p, char *why, size_t whylen)
{
    if (p < 0.0 && p >= -1e6) return 1;
    snprintf(why, whylen, "the Student-t family needs p < 0 (nu = -2p degrees of freedom; p at least -1e6)");
    return 0;
}

static int t_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3])
{
    (void)d, (void)n_starts, (void)seed;
    /* 1/Gamma(al, rate be): E[Y] = be / (al - 1) = 1 where finite */
    if (m->fix_p) {
        const double al = -m->p;
        cand[0][0] = m->p, cand[0][1] = 0.0, cand[0][2] = 2.0 * (al > 1.0 ? al - 1.0 : 1.0);
        return 1;
    }
    const double al[2] = {3.0, 6.0};
    for (int i = 0; i < 2; i++) cand[i][0] = -al[i], cand[i][1] = 0.0, cand[i][2] = 2.0 * (al[i] - 1.0);
    return 2;
}

/* 1/Y ~ Gamma(al, rate be): E log(1/Y) - log E(1/Y) = digamma(al) - log(al) */
static ghf_sub_status t_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3])
{
    (void)d, (void)cur;
    double al = -m->p;
    if (!m->fix_p) {
        const double gap = -eta[0] - log(eta[1]);
        if (!(gap < -1e-15 * (1.0 + fabs(eta[0])))) return GHF_SUB_GAUSS;
        al = ghf_gamma_shape_from_logmean_gap(gap);
        if (!(al > 0.0) || !isfinite(al)) return GHF_SUB_FAILED;
    }
    out[0] = -al;
    out[1] = 0.0;
    out[2] = 2.0 * al / eta[1];
    return GHF_SUB_OK;
}

static int t_near_gauss(const ghf_model *m, int d, double kappa, double out[3])
{
    (void)d;
    if (m->fix_p) return -1;
    const double al = 2.0 + 1.0 / kappa; /* CV^2 = 1/(al - 2) */
    out[0] = -al;
    out[1] = 0.0;
    out[2] = 2.0 * (al - 1.0);
    return 0;
}

/* ---------------------------------------------------------------------------
 * gauss: no subordinator (closed form; EM does not run)
 * ------------------------------------------------------------------------- */

static int none_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3])
{
    (void)m, (void)d, (void)n_starts, (void)seed, (void)cand;
    return 0;
}

static ghf_sub_status none_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3])
{
    (void)m, (void)d, (void)eta, (void)cur;
    out[0] = out[1] = out[2] = NAN;
    return GHF_SUB_FAILED;
}

static int none_near_gauss(const ghf_model *m, int d, double kappa, double out[3])
{
    (void)m, (void)d, (void)kappa, (void)out;
    return -1;
}

/* ---------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------- */

static const ghf_family_def g_families[GHF_N_FAMILIES] = {
    [GHF_FAMILY_GH] = {"gh", "generalized hyperbolic", GHF_SUB_GIG, p_free, p_any, gh_starts, gh_msub,
                       gh_near_gauss, 50.0},
    [GHF_FAMILY_HYP] = {"hyp", "hyperbolic", GHF_SUB_GIG, hyp_p, p_never, hyp_starts, hyp_msub, hyp_near_gauss,
                        1e6},
    [GHF_FAMILY_NIG] = {"nig", "normal inverse Gaussian", GHF_SUB_GIG, nig_p, p_never, nig_starts, nig_msub,
                        nig_near_gauss, 50.0},
    [GHF_FAMILY_VG] = {"vg", "variance gamma", GHF_SUB_GAMMA, p_free, p_positive, vg_starts, vg_msub,
                       vg_near_gauss, 1e6},
    [GHF_FAMILY_T] = {"t", "skewed Student t", GHF_SUB_INVGAMMA, p_free, p_negative, t_starts, t_msub,
                      t_near_gauss, 1e6},
    [GHF_FAMILY_GAUSS] = {"gauss", "Gaussian", GHF_SUB_NONE, p_free, p_never, none_starts, none_msub,
                          none_near_gauss, 0.0},
};

const ghf_family_def *ghf_family_get(ghf_family f)
{
    return (f >= 0 && f < GHF_N_FAMILIES && g_families[f].name) ? &g_families[f] : NULL;
}

const char *ghf_family_name(ghf_family f)
{
    const ghf_family_def *fd = ghf_family_get(f);
    return fd ? fd->name : "?";
}

int ghf_family_parse(const char *s, ghf_family *f)
{
    for (int i = 0; i < GHF_N_FAMILIES; i++)
        if (g_families[i].name && s && strcmp(s, g_families[i].name) == 0) {
            *f = (ghf_family)i;
            return 0;
        }
    return -1;
}

/* the order people read them in: the general family, its fixed-p members,
 * its faces, the limit */
static const ghf_family g_order[GHF_N_FAMILIES] = {GHF_FAMILY_GH, GHF_FAMILY_HYP, GHF_FAMILY_NIG,
                                                   GHF_FAMILY_VG, GHF_FAMILY_T,   GHF_FAMILY_GAUSS};

const char *ghf_family_list(void)
{
    static char buf[128];
    if (!buf[0]) {
        size_t n = 0;
        for (int k = 0; k < GHF_N_FAMILIES; k++) {
            const char *sep = k == 0 ? "" : (k == GHF_N_FAMILIES - 1 ? " or " : ", ");
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", sep, g_families[g_order[k]].name);
        }
    }
    return buf;
}

double ghf_model_fixed_p(const ghf_model *m, int d)
{
    const ghf_family_def *fd = ghf_family_get(m->family);
    const double p = fd ? fd->family_p(d) : NAN;
    if (!isnan(p)) return p;
    return m->fix_p ? m->p : NAN;
}

int ghf_model_check(const ghf_model *m, int d, char *why, size_t whylen)
{
    (void)d;
    const ghf_family_def *fd = ghf_family_get(m->family);
    if (!fd) {
        snprintf(why, whylen, "unknown family (expected %s)", ghf_family_list());
        return 2;
    }
    char w[200];
    if (m->fix_p && !fd->p_allowed(m->p, w, sizeof w)) {
        snprintf(why, whylen, "--p-fixed %g with --model %s: %s", m->p, fd->name, w);
        return 2;
    }
    return 0;
}

int ghf_model_sub_ok(const ghf_model *m, int d, double p, double a, double b, char *why, size_t whylen)
{
    const ghf_family_def *fd = ghf_family_get(m->family);
    if (!fd) {
        snprintf(why, whylen, "unknown family");
        return 0;
    }
    if (fd->sub == GHF_SUB_NONE) return 1;
    const double fp = ghf_model_fixed_p(m, d);
    if (!isnan(fp) && p != fp) {
        snprintf(why, whylen, "p = %.17g, the %s fit holds p = %.17g", p, fd->name, fp);
        return 0;
    }
    if (!(fabs(p) <= fd->p_max)) {
        snprintf(why, whylen, "p = %g is outside [-%g, %g]", p, fd->p_max, fd->p_max);
        return 0;
    }
    const int ok = fd->sub == GHF_SUB_GAMMA      ? (b == 0.0 && a > 0.0 && p > 0.0)
                   : fd->sub == GHF_SUB_INVGAMMA ? (a == 0.0 && b > 0.0 && p < 0.0)
                                                 : (a >= 0.0 && b >= 0.0 && !(a == 0.0 && b == 0.0) &&
                                                    !(a == 0.0 && p >= 0.0) && !(b == 0.0 && p <= 0.0));
    if (!ok || !isfinite(a) || !isfinite(b)) {
        snprintf(why, whylen, "p = %g, a = %g, b = %g is not a %s subordinator", p, a, b, fd->title);
        return 0;
    }
    return 1;
}

const char *ghf_model_label(const ghf_model *m, int d, char *buf, size_t len)
{
    const ghf_family_def *fd = ghf_family_get(m->family);
    const double fp = fd ? fd->family_p(d) : NAN;
    int k = snprintf(buf, len, "%s", fd ? fd->title : "?");
    if (k >= 0 && (size_t)k < len && m->symmetric && fd && fd->sub != GHF_SUB_NONE)
        k += snprintf(buf + k, len - (size_t)k, ", symmetric");
    if (k >= 0 && (size_t)k < len && m->fix_p && isnan(fp))
        snprintf(buf + k, len - (size_t)k, ", p = %g fixed", m->p);
    return buf;
}

int ghf_model_nparams(const ghf_model *m, int d)
{
    const ghf_family_def *fd = ghf_family_get(m->family);
    const int sigma = d * (d + 1) / 2;
    if (!fd || fd->sub == GHF_SUB_NONE) return d + sigma;
    const int normal = d + (m->symmetric ? 0 : d) + sigma;
    /* the subordinator's free parameters: p (unless fixed) and a, b off the faces */
    int sub = fd->sub == GHF_SUB_GIG ? 2 : 1;
    if (isnan(ghf_model_fixed_p(m, d))) sub++;
    return normal + sub - 1; /* one direction of the scale orbit removed */
}

int ghf_model_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3])
{
    const ghf_family_def *fd = ghf_family_get(m->family);
    ghf_model mm = *m;
    const double fp = ghf_model_fixed_p(m, d);
    if (!isnan(fp)) {
        mm.fix_p = 1;
        mm.p = fp;
    }
    return fd ? fd->starts(&mm, d, n_starts, seed, cand) : 0;
}

ghf_sub_status ghf_model_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3])
{
    const ghf_family_def *fd = ghf_family_get(m->family);
    if (!fd) return GHF_SUB_FAILED;
    ghf_model mm = *m;
    const double fp = fd->family_p(d);
    if (!isnan(fp)) {
        /* a family whose p is fixed by definition: solve at that p with the
         * GIG pieces (nig has its closed form) */
        mm.fix_p = 1;
        mm.p = fp;
    }
    return fd->msub(&mm, d, eta, cur, out);
}

int ghf_model_near_gauss(const ghf_model *m, int d, double kappa, double out[3])
{
    const ghf_family_def *fd = ghf_family_get(m->family);
    ghf_model mm = *m;
    const double fp = ghf_model_fixed_p(m, d);
    if (!isnan(fp)) {
        mm.fix_p = 1;
        mm.p = fp;
    }
    return fd ? fd->near_gauss(&mm, d, kappa, out) : -1;
}
