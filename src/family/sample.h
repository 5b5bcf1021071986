/* sample.h - reproducible random variates for `ghfit generate` and
 * `ghfit sample` (one code path: ghf_sample_rows).
 *
 * Each row has its own xoshiro256** stream seeded from (seed, global row
 * index), so a data set depends on the seed only, never on how many ranks
 * wrote it. */
#ifndef GHF_SAMPLE_H
#define GHF_SAMPLE_H

#include <stdint.h>

#include "model.h"

typedef struct ghf_rng { uint64_t s[4]; } ghf_rng;

/* Every rejection loop is bounded: the normal sampler gives up (NaN) after
 * GHF_SAMPLE_MAX_TRIES tries (acceptance pi/4), the GIG sampler after
 * GHF_SAMPLE_GIG_MAX_TRIES (its acceptance is at least ~1% on the parameter
 * range `ghfit generate` accepts: |p| <= 1e6, a and b in [1e-30, 1e30],
 * sqrt(a b) >= 1e-3 when |p| < 1). */
#define GHF_SAMPLE_MAX_TRIES 1000
#define GHF_SAMPLE_GIG_MAX_TRIES 100000

void   ghf_rng_seed(ghf_rng *r, uint64_t seed, uint64_t stream);
double ghf_rng_uniform(ghf_rng *r); /* in (0, 1) */
double ghf_rng_normal(ghf_rng *r);

/* Y ~ GIG(p, a, b), density proportional to y^(p-1) exp(-(a y + b/y)/2), a, b > 0.
 * Ratio-of-uniforms (Dagpunar 1989 / Lehner 1989 with mode shift; without the
 * shift for p < 1 and sqrt(ab) <= 1, after Hoermann & Leydold 2014).
 * Returns NaN if a parameter is not finite and positive (a, b) or finite (p),
 * or if the bounded rejection loop gives up (parameters too extreme). */
double ghf_rng_gig(ghf_rng *r, double p, double a, double b);

/* G ~ Gamma(shape, rate 1), Marsaglia-Tsang (bounded loop; NaN when it gives up
 * or shape is not finite and positive). */
double ghf_rng_gamma(ghf_rng *r, double shape);

/* The mixing variable Y of every family: GIG(p, a, b) for a, b > 0,
 * Gamma(p, rate a/2) on the face b = 0 (vg), 1/Gamma(-p, rate b/2) on the
 * face a = 0 (t), and Y = 1 when p, a and b are NaN (the Gaussian). */
double ghf_rng_mixing(ghf_rng *r, double p, double a, double b);

/* Rows [row0, row0 + nrows) of X = mu + gamma Y + sqrt(Y) L Z into x
 * (row-major, t->d columns; zb: scratch of d doubles); row i draws from its
 * own stream (seed, i): the rows depend on the seed only, never on the
 * ranks.  Returns -1, or the global index of the first row whose draw is not
 * finite (the loop stops there). */
int64_t ghf_sample_rows(const ghf_params *t, const double *L, uint64_t seed, int64_t row0, int64_t nrows,
                        double *x, double *zb);

/* Rows of a K-component mixture (docs/output-schema.md "Mixtures"): row i's
 * own stream (seed, i) first draws a uniform u and takes the first
 * component k with u < pi_0 + ... + pi_k (the last when round-off leaves
 * none), then draws that component's row as ghf_sample_rows does, from the
 * same stream.  L: the K Cholesky factors [K][d*d]; comp [nrows] (or NULL)
 * receives each row's component.  Returns as ghf_sample_rows. */
int64_t ghf_sample_mix_rows(const ghf_mixture *m, const double *L, uint64_t seed, int64_t row0, int64_t nrows,
                            double *x, double *zb, int32_t *comp);

#endif
