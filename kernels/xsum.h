/* xsum.h - order-independent (reproducible) sums of doubles: binned integer
 * accumulators, so that the E-step statistics have the same bits whatever
 * the number of ranks and threads that summed them.
 *
 * Every double x = M 2^e (M a 53-bit integer) is cut at FIXED global bit
 * positions, multiples of GHF_XSUM_W, into at most three pieces, each added to
 * the 64-bit integer bin of its position.  An accumulator keeps the
 * GHF_XSUM_K bins below its top: top = the bin of the largest value added so
 * far plus one (headroom for the sum), and pieces below the window are
 * dropped.  Because the cut points are global and bins hold exact integer
 * sums (no carries move between bins until the very end), the kept bins are
 * the same whatever the order of the additions, and whichever bins were
 * dropped on the way are exactly those below the window of the final top:
 * the sum depends on the set of values only (the idea of Demmel and Nguyen's
 * binned summation, ReproBLAS, reduced to what ghfit needs).
 *
 * Precision: the window spans GHF_XSUM_W (GHF_XSUM_K - 1) = 96 bits below the
 * headroom bin, i.e. everything down to ~2^-64 of the largest value is kept,
 * far below double rounding.  Capacity: a bin receives pieces < 2^W, so up to
 * 2^31 values (here: blocks of rows, threads, ranks together) can be added
 * before an int64 bin could overflow.
 *
 * Merging accumulators (threads, ranks) aligns them to the larger top and
 * adds bins: the same result as adding all their values to one.  Across MPI
 * ranks: an all-reduce (MAX) of the tops, ghf_xsum_align to the global top,
 * then an all-reduce (SUM) of the bins as int64 (ghf_xsum_reduce does both).
 * ghf_xsum_value then turns an accumulator into a double (correctly rounded,
 * the same bits on every rank; GCC/Clang __int128).  Non-finite values are counted apart (the sum becomes NaN).
 */
#ifndef GHF_XSUM_H
#define GHF_XSUM_H

#include "ghf_defs.h"

#include <stdint.h>
#include <string.h>

#define GHF_XSUM_W 32
#define GHF_XSUM_K 4
/* bin index of bit position b (b = -1074 .. 1023 for doubles): (b + GHF_XSUM_OFF) / W */
#define GHF_XSUM_OFF 1088
#define GHF_XSUM_EMPTY (-1) /* top of an accumulator that holds nothing */

/* One accumulator: bins bin[0] (= top, the headroom bin) .. bin[K-1], and the
 * count of non-finite values. */
typedef struct ghf_xsum {
    int64_t top;               /* bin index of bin[0], or GHF_XSUM_EMPTY */
    int64_t bin[GHF_XSUM_K];
    int64_t nonfinite;
} ghf_xsum;

GHF_HD static inline void ghf_xsum_init(ghf_xsum *a)
{
    a->top = GHF_XSUM_EMPTY;
    for (int i = 0; i < GHF_XSUM_K; i++) a->bin[i] = 0;
    a->nonfinite = 0;
}

/* Move a to a higher top (dropping the bins that fall below the window). */
GHF_HD static inline void ghf_xsum_align(ghf_xsum *a, int64_t top)
{
    if (a->top == GHF_XSUM_EMPTY) {
        a->top = top;
        return;
    }
    const int64_t s = top - a->top;
    if (s <= 0) return;
    for (int i = GHF_XSUM_K - 1; i >= 0; i--) a->bin[i] = (i - s >= 0) ? a->bin[i - s] : 0;
    a->top = top;
}

GHF_HD static inline void ghf_xsum_add(ghf_xsum *a, double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    const int ex = (int)((u >> 52) & 0x7ff);
    if (ex == 0x7ff) {
        a->nonfinite++;
        return;
    }
    uint64_t m = u & 0xfffffffffffffULL;
    if (ex == 0 && m == 0) return;        /* +-0 */
    int lsb;                              /* bit position of the mantissa's lowest bit */
    if (ex == 0) {
        lsb = -1074;                      /* subnormal */
    } else {
        m |= 0x10000000000000ULL;
        lsb = ex - 1075;
    }
    /* the mantissa's bits lie at positions L .. L + 52 above the lowest bit
     * position, within the bins bhi - 2 .. bhi; shifted left by s (12 <= s
     * < 44) it is a 96-bit number whose three 32-bit words are the pieces of
     * those bins.  The pieces below the window are dropped; branch-free
     * (the number of pieces a value has, 2 or 3, does not predict well). */
    const int64_t L = lsb + GHF_XSUM_OFF;
    const int64_t bhi = (L + 52) / GHF_XSUM_W;
    if (a->top == GHF_XSUM_EMPTY || bhi + 1 > a->top) ghf_xsum_align(a, bhi + 1);
    const int s = (int)(L - (bhi - 2) * GHF_XSUM_W);
    const uint64_t lo = m << s, hi = m >> (64 - s);
    const uint64_t neg = (uint64_t)0 - (u >> 63); /* all ones for a negative x */
    const uint64_t piece[3] = {hi, lo >> 32, lo & 0xffffffffULL}; /* bins bhi, bhi - 1, bhi - 2 */
    const int64_t t = a->top - bhi;                               /* bin[t] is bin bhi; t >= 1 */
    for (int i = 0; i < 3; i++) {
        const int64_t idx = t + i;
        const uint64_t keep = idx < GHF_XSUM_K ? ~(uint64_t)0 : 0;
        a->bin[idx < GHF_XSUM_K ? idx : GHF_XSUM_K - 1] += (int64_t)(((piece[i] & keep) ^ neg) - neg);
    }
}

/* a += b (any order of merges gives the same result). */
GHF_HD static inline void ghf_xsum_merge(ghf_xsum *a, const ghf_xsum *b)
{
    a->nonfinite += b->nonfinite;
    if (b->top == GHF_XSUM_EMPTY) return;
    if (a->top == GHF_XSUM_EMPTY || b->top > a->top) ghf_xsum_align(a, b->top);
    const int64_t s = a->top - b->top;
    for (int i = 0; i + s < GHF_XSUM_K; i++) a->bin[i + s] += b->bin[i];
}

/* Carries moved up (bins 1.. into [0, 2^W)): the same value and the same
 * ghf_xsum_value, and room for 2^31 more additions of normalised
 * accumulators; it changes what a later ghf_xsum_align drops, so normalise
 * only an accumulator that is complete (all its values added and reduced). */
GHF_HD static inline void ghf_xsum_normalize(ghf_xsum *a)
{
    if (a->top == GHF_XSUM_EMPTY) return;
    for (int i = GHF_XSUM_K - 1; i >= 1; i--) {
        const int64_t c = a->bin[i] >> GHF_XSUM_W; /* floor division by 2^W (arithmetic shift) */
        a->bin[i] -= c * ((int64_t)1 << GHF_XSUM_W);
        a->bin[i - 1] += c;
    }
}

/* The sum as a double, correctly rounded from the exact binned value: carries
 * normalised (bins 1.. in [0, 2^W)), the bins joined into one 128-bit integer
 * (the headroom bin holds at most the number of values added) and scaled.
 * The same bits on every rank. */
GHF_HD static inline double ghf_xsum_value(const ghf_xsum *a)
{
    if (a->nonfinite) return NAN;
    if (a->top == GHF_XSUM_EMPTY) return 0.0;
    int64_t b[GHF_XSUM_K];
    for (int i = 0; i < GHF_XSUM_K; i++) b[i] = a->bin[i];
    for (int i = GHF_XSUM_K - 1; i >= 1; i--) {
        const int64_t c = b[i] >> GHF_XSUM_W; /* floor division by 2^W (arithmetic shift) */
        b[i] -= c * ((int64_t)1 << GHF_XSUM_W);
        b[i - 1] += c;
    }
    const int scale = (int)((a->top - (GHF_XSUM_K - 1)) * GHF_XSUM_W - GHF_XSUM_OFF);
    if (b[0] > ((int64_t)1 << 30) || b[0] < -((int64_t)1 << 30)) /* more than 2^30 values: not reached */
        return ldexp((double)b[0], scale + (GHF_XSUM_K - 1) * GHF_XSUM_W);
    __int128 v = b[0];
    for (int i = 1; i < GHF_XSUM_K; i++) v = v * ((__int128)1 << GHF_XSUM_W) + b[i];
    return ldexp((double)v, scale);
}

#endif /* GHF_XSUM_H */
