/* sample.c - see sample.h */
#include "sample.h"

#include <math.h>

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void ghf_rng_seed(ghf_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ULL);
    x = splitmix64(&x) ^ stream;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t next(ghf_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ghf_rng_uniform(ghf_rng *r)
{
    return ((double)(next(r) >> 11) + 0.5) * 0x1.0p-53;
}

double ghf_rng_normal(ghf_rng *r)
{
    /* Marsaglia's polar method; the second variate is discarded to keep one
     * draw per call stateless.  Acceptance pi/4: GHF_SAMPLE_MAX_TRIES tries
     * fail with probability 0.22^1000, i.e. never, but the loop is bounded. */
    for (int i = 0; i < GHF_SAMPLE_MAX_TRIES; i++) {
        const double u = 2.0 * ghf_rng_uniform(r) - 1.0, v = 2.0 * ghf_rng_uniform(r) - 1.0;
        const double s = u * u + v * v;
        if (s > 0.0 && s < 1.0) return u * sqrt(-2.0 * log(s) / s);
    }
    return NAN;
}

static double gig_mode(double lambda, double omega)
{
    if (lambda >= 1.0) return (sqrt((lambda - 1.0) * (lambda - 1.0) + omega * omega) + (lambda - 1.0)) / omega;
    return omega / (sqrt((1.0 - lambda) * (1.0 - lambda) + omega * omega) + (1.0 - lambda));
}

/* X ~ density proportional to x^(lambda-1) exp(-omega/2 (x + 1/x)), lambda >= 0. */
static double gig_std(ghf_rng *r, double lambda, double omega)
{
    const double t = 0.5 * (lambda - 1.0), s = 0.25 * omega;
    const double xm = gig_mode(lambda, omega);
    const double nc = t * log(xm) - s * (xm + 1.0 / xm);
    const long max_tries = GHF_SAMPLE_GIG_MAX_TRIES;
    if (lambda > 1.0 || omega > 1.0) {
        /* ratio-of-uniforms with mode shift: the bounding rectangle from the
         * roots of a cubic (Dagpunar 1989) */
        const double a = -(2.0 * (lambda + 1.0) / omega + xm);
        const double b = 2.0 * (lambda - 1.0) * xm / omega - 1.0;
        const double c = xm;
        const double p = b - a * a / 3.0;
        const double q = (2.0 * a * a * a) / 27.0 - (a * b) / 3.0 + c;
        const double fi = acos(-q / (2.0 * sqrt(-(p * p * p) / 27.0)));
        const double fak = 2.0 * sqrt(-p / 3.0);
        const double y1 = fak * cos(fi / 3.0) - a / 3.0;
        const double y2 = fak * cos(fi / 3.0 + 4.0 / 3.0 * M_PI) - a / 3.0;
        const double uplus = (y1 - xm) * exp(t * log(y1) - s * (y1 + 1.0 / y1) - nc);
        const double uminus = (y2 - xm) * exp(t * log(y2) - s * (y2 + 1.0 / y2) - nc);
        if (!isfinite(uplus) || !isfinite(uminus) || !(uplus > uminus) || !isfinite(xm)) return NAN;
        for (long i = 0; i < max_tries; i++) {
            const double U = uminus + ghf_rng_uniform(r) * (uplus - uminus);
            const double V = ghf_rng_uniform(r);
            const double X = U / V + xm;
            if (X > 0.0 && log(V) <= t * log(X) - s * (X + 1.0 / X) - nc) return X;
        }
        return NAN;
    }
    /* ratio-of-uniforms without mode shift */
    const double ym = ((lambda + 1.0) + sqrt((lambda + 1.0) * (lambda + 1.0) + omega * omega)) / omega;
    const double um = exp(0.5 * (lambda + 1.0) * log(ym) - s * (ym + 1.0 / ym) - nc);
    if (!isfinite(um) || !(um > 0)) return NAN;
    for (long i = 0; i < max_tries; i++) {
        const double U = um * ghf_rng_uniform(r);
        const double V = ghf_rng_uniform(r);
        const double X = U / V;
        if (log(V) <= t * log(X) - s * (X + 1.0 / X) - nc) return X;
    }
    return NAN;
}

double ghf_rng_gig(ghf_rng *r, double p, double a, double b)
{
    /* Y = sqrt(b/a) X with X ~ GIG(p, omega, omega), omega = sqrt(ab);
     * for p < 0, X = 1 / GIG(-p, omega, omega). */
    const double omega = sqrt(a * b), scale = sqrt(b / a);
    if (!isfinite(p) || !(omega > 0) || !isfinite(omega) || !(scale > 0) || !isfinite(scale)) return NAN;
    const double x = gig_std(r, fabs(p), omega);
    return p < 0.0 ? scale / x : scale * x;
}

double ghf_rng_gamma(ghf_rng *r, double shape)
{
    /* Marsaglia & Tsang (2000); shape < 1 through G(shape + 1) U^(1/shape) */
    if (!(shape > 0.0) || !isfinite(shape)) return NAN;
    double boost = 1.0;
    if (shape < 1.0) {
        boost = pow(ghf_rng_uniform(r), 1.0 / shape);
        shape += 1.0;
    }
    const double dd = shape - 1.0 / 3.0, cc = 1.0 / sqrt(9.0 * dd);
    for (int i = 0; i < GHF_SAMPLE_MAX_TRIES; i++) {
        const double z = ghf_rng_normal(r);
        const double v1 = 1.0 + cc * z;
        if (!(v1 > 0.0)) continue;
        const double v = v1 * v1 * v1, u = ghf_rng_uniform(r);
        if (log(u) < 0.5 * z * z + dd - dd * v + dd * log(v)) return dd * v * boost;
    }
    return NAN;
}

double ghf_rng_mixing(ghf_rng *r, double p, double a, double b)
{
    if (isnan(p) && isnan(a) && isnan(b)) return 1.0;       /* the Gaussian: Y = 1 */
    if (b == 0.0 && a > 0.0) return ghf_rng_gamma(r, p) / (0.5 * a);  /* Gamma(p, rate a/2) */
    if (a == 0.0 && b > 0.0) return 0.5 * b / ghf_rng_gamma(r, -p);   /* 1/Gamma(-p, rate b/2) */
    return ghf_rng_gig(r, p, a, b);
}

/* One row of t from the stream r into xi: 0, or -1 when the draw is not finite. */
static int draw_row(const ghf_params *t, const double *L, ghf_rng *r, double *xi, double *zb)
{
    const int d = t->d;
    const double y = ghf_rng_mixing(r, t->p, t->a, t->b);
    if (!isfinite(y) || !(y > 0)) return -1;
    const double sy = sqrt(y);
    for (int j = 0; j < d; j++) zb[j] = ghf_rng_normal(r);
    int ok = 1;
    for (int j = 0; j < d; j++) {
        double s = 0.0;
        for (int k = 0; k <= j; k++) s += L[j * d + k] * zb[k];
        xi[j] = t->mu[j] + t->gamma[j] * y + sy * s;
        ok &= isfinite(xi[j]) ? 1 : 0;
    }
    return ok ? 0 : -1;
}

int64_t ghf_sample_rows(const ghf_params *t, const double *L, uint64_t seed, int64_t row0, int64_t nrows,
                        double *x, double *zb)
{
    const int d = t->d;
    for (int64_t i = 0; i < nrows; i++) {
        ghf_rng r;
        ghf_rng_seed(&r, seed, (uint64_t)(row0 + i));
        if (draw_row(t, L, &r, x + i * d, zb) != 0) return row0 + i;
    }
    return -1;
}

int64_t ghf_sample_mix_rows(const ghf_mixture *m, const double *L, uint64_t seed, int64_t row0, int64_t nrows,
                            double *x, double *zb, int32_t *comp)
{
    const int d = m->d, K = m->K;
    for (int64_t i = 0; i < nrows; i++) {
        ghf_rng r;
        ghf_rng_seed(&r, seed, (uint64_t)(row0 + i));
        const double u = ghf_rng_uniform(&r);
        int k = 0;
        double c = m->prop[0];
        while (k < K - 1 && u >= c) c += m->prop[++k];
        if (comp) comp[i] = k;
        if (draw_row(&m->comp[k], L + (size_t)k * d * d, &r, x + i * d, zb) != 0) return row0 + i;
    }
    return -1;
}
