/* sample.h - reproducible random variates for `ghfit generate`.
 *
 * Each row has its own xoshiro256** stream seeded from (seed, global row
 * index), so a data set depends on the seed only, never on how many ranks
 * wrote it. */
#ifndef GHF_SAMPLE_H
#define GHF_SAMPLE_H

#include <stdint.h>

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

#endif
