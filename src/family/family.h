/* family.h - the family table: every distribution ghfit fits, and what the
 * rest of the program needs to know about it (one row per family in
 * family.c; the CLI, job files, writer, checkpoints and generate derive from
 * it).
 *
 * Every family is a normal variance-mean mixture X = mu + gamma Y +
 * sqrt(Y) A Z (Sigma = A A^T) with Y ~ GIG(p, a, b), density proportional to
 * y^(p-1) exp(-(a y + b/y)/2), restricted to one subset of the GIG domain:
 *   gh     a, b > 0, p free (or held fixed)
 *   hyp    GH with p = (d+1)/2 (the multivariate hyperbolic of R's ghyp)
 *   nig    p = -1/2
 *   vg     b = 0: Y ~ Gamma(shape p, rate a/2), p > 0
 *   t      a = 0: Y ~ 1/Gamma(shape -p, rate b/2), p < 0; nu = -2p
 *   gauss  Y = 1 (the limit of every family): closed form, no EM
 * Any of them can also be fitted symmetric (gamma = 0), and, where p is
 * free, with p held fixed.  docs/math.md gives the mathematics. */
#ifndef GHF_FAMILY_H
#define GHF_FAMILY_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    GHF_FAMILY_GH = 0,
    GHF_FAMILY_NIG = 1,
    GHF_FAMILY_VG = 2,
    GHF_FAMILY_T = 3,
    GHF_FAMILY_GAUSS = 4,
    GHF_FAMILY_HYP = 5,
    GHF_N_FAMILIES
} ghf_family;

/* The largest |p| of any family (vg and t: 1e6; gh: 50). */
#define GHF_P_MAX_ANY 1e6

/* Which part of the GIG domain the subordinator lives in. */
typedef enum {
    GHF_SUB_GIG,      /* a > 0, b > 0 (p free or fixed) */
    GHF_SUB_GAMMA,    /* b = 0, p > 0 */
    GHF_SUB_INVGAMMA, /* a = 0, p < 0 */
    GHF_SUB_NONE      /* Y = 1 */
} ghf_sub_kind;

/* What is fitted: a family, its restrictions, the GIG index when held fixed. */
typedef struct ghf_model {
    ghf_family family;
    int symmetric; /* gamma = 0 */
    int fix_p;     /* p held at p (for families whose p is not fixed by definition) */
    double p;
} ghf_model;

/* The subordinator M-step's verdict (see ghf_family_msub). */
typedef enum {
    GHF_SUB_OK = 0,    /* out holds a candidate (the caller keeps it only if it improves) */
    GHF_SUB_GAUSS = 1, /* the statistics are those of a constant Y: the Gaussian limit */
    GHF_SUB_FAILED = 2 /* invalid statistics */
} ghf_sub_status;

typedef struct ghf_family_def {
    const char *name;  /* the --model / job-file name */
    const char *title; /* for people */
    ghf_sub_kind sub;
    /* the GIG index fixed by the family (nig: -1/2, hyp: (d+1)/2), NAN if free */
    double (*family_p)(int d);
    /* 1 if p may be held at p (message in why otherwise) */
    int (*p_allowed)(double p, char *why, size_t whylen);
    /* the subordinator candidates of the starts (rows of (p, a, b)); returns their number */
    int (*starts)(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3]);
    /* the subordinator M-step from eta = (E log Y, E 1/Y, E Y) per observation */
    ghf_sub_status (*msub)(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3]);
    /* a point of the family with E[Y] ~ 1 and CV^2(Y) = kappa (the Gaussian
     * limit); 0, or -1 if the family has no such point (p fixed on a face) */
    int (*near_gauss)(const ghf_model *m, int d, double kappa, double out[3]);
    double p_max; /* bound on |p| of the free index */
} ghf_family_def;

const ghf_family_def *ghf_family_get(ghf_family f);
const char *ghf_family_name(ghf_family f);
/* 0, or -1 if the name is unknown */
int ghf_family_parse(const char *s, ghf_family *f);
/* "gh, hyp, nig, vg, t or gauss" */
const char *ghf_family_list(void);

/* The model's GIG index when it is fixed (by the family or by fix_p), NAN if free. */
double ghf_model_fixed_p(const ghf_model *m, int d);
/* Checks a model: fix_p where the family allows it.  0, or 2 with a message. */
int ghf_model_check(const ghf_model *m, int d, char *why, size_t whylen);
/* Number of free parameters (for AIC/BIC): mu, gamma unless symmetric, Sigma,
 * the free subordinator parameters, one scale direction removed. */
int ghf_model_nparams(const ghf_model *m, int d);

/* Whether (p, a, b) lies in the model's subordinator domain (a checkpoint's
 * or a warm start's): 1, or 0 with the reason. */
int ghf_model_sub_ok(const ghf_model *m, int d, double p, double a, double b, char *why, size_t whylen);

/* "normal inverse Gaussian, symmetric", "generalized hyperbolic, p = 1.5 fixed" */
const char *ghf_model_label(const ghf_model *m, int d, char *buf, size_t len);

/* The subordinator candidates of the model's starts; returns their number. */
int ghf_model_starts(const ghf_model *m, int d, int n_starts, uint64_t seed, double cand[16][3]);
/* The subordinator M-step (dispatch through the table). */
ghf_sub_status ghf_model_msub(const ghf_model *m, int d, const double eta[3], const double cur[3], double out[3]);
/* The near-Gaussian subordinator; 0 or -1. */
int ghf_model_near_gauss(const ghf_model *m, int d, double kappa, double out[3]);

#endif
