/* cpu_vec.h - eight lanes of doubles for the CPU E-step's kernels, in the widest form the translation unit's instruction set has.
 *
 * Included by src/backend/cpu_block_impl.h, which every cpu_block_*.c
 * compiles for one instruction set:
 *   __AVX512F__ (x86-64-v4): one __m512d;
 *   __AVX2__ and __FMA__ (x86-64-v3): two __m256d (rows 0-3, rows 4-7);
 *   otherwise: eight doubles in a struct, lane by lane (fma(): glibc's exact
 *   software fused multiply-add where the CPU has none).
 * Every operation is lane by lane and IEEE (the build has FP contraction
 * off; v8_fma rounds once), so all three give the same bits; reductions
 * over lanes are written out in one fixed order (v8_hsum). */
#ifndef GHF_CPU_VEC_H
#define GHF_CPU_VEC_H

#include <math.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#define GHF_CPU_VEC_NAME "x86-64-v4 (AVX-512)"
#define GHF_CPU_VEC_REGS 32 /* vec8 registers: the kernels' tile sizes follow */
typedef __m512d vec8;
AI vec8 v8_load(const double *p) { return _mm512_loadu_pd(p); }
AI void v8_store(double *p, vec8 a) { _mm512_storeu_pd(p, a); }
AI vec8 v8_bcast(double s) { return _mm512_set1_pd(s); }
AI vec8 v8_zero(void) { return _mm512_setzero_pd(); }
AI vec8 v8_add(vec8 a, vec8 b) { return _mm512_add_pd(a, b); }
AI vec8 v8_sub(vec8 a, vec8 b) { return _mm512_sub_pd(a, b); }
AI vec8 v8_mul(vec8 a, vec8 b) { return _mm512_mul_pd(a, b); }
AI vec8 v8_fma(vec8 a, vec8 b, vec8 c) { return _mm512_fmadd_pd(a, b, c); }
/* lanes 0-3 from a[0..3], lanes 4-7 from b[0..3] */
AI vec8 v8_load4x2(const double *a, const double *b)
{
    return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(a)), _mm256_loadu_pd(b), 1);
}
AI void v8_store4x2(double *a, double *b, vec8 x)
{
    _mm256_storeu_pd(a, _mm512_castpd512_pd256(x));
    _mm256_storeu_pd(b, _mm512_extractf64x4_pd(x, 1));
}
/* x where u, v, l and ll are all finite, +0 elsewhere; *bad gets 1 where not */
AI vec8 v8_keep_finite(vec8 u, vec8 v, vec8 l, vec8 ll, vec8 x, vec8 *bad)
{
    const vec8 t = _mm512_add_pd(_mm512_add_pd(_mm512_sub_pd(u, u), _mm512_sub_pd(v, v)),
                                 _mm512_add_pd(_mm512_sub_pd(l, l), _mm512_sub_pd(ll, ll)));
    const __mmask8 ok = _mm512_cmp_pd_mask(t, _mm512_setzero_pd(), _CMP_EQ_OQ);
    *bad = _mm512_maskz_mov_pd((__mmask8)~ok, _mm512_set1_pd(1.0));
    return _mm512_maskz_mov_pd(ok, x);
}
AI vec8 v8_abs(vec8 a) { return _mm512_abs_pd(a); }
/* dst[8 c + r] = src[r ld + c], r, c < 8 */
AI void v8_transpose8(const double *src, int ld, double *dst)
{
    typedef double v8 __attribute__((vector_size(64)));
    const v8 r0 = (v8)v8_load(src), r1 = (v8)v8_load(src + ld), r2 = (v8)v8_load(src + 2 * ld),
             r3 = (v8)v8_load(src + 3 * ld), r4 = (v8)v8_load(src + 4 * ld), r5 = (v8)v8_load(src + 5 * ld),
             r6 = (v8)v8_load(src + 6 * ld), r7 = (v8)v8_load(src + 7 * ld);
    const v8 t0 = __builtin_shufflevector(r0, r1, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8 t1 = __builtin_shufflevector(r0, r1, 1, 9, 3, 11, 5, 13, 7, 15);
    const v8 t2 = __builtin_shufflevector(r2, r3, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8 t3 = __builtin_shufflevector(r2, r3, 1, 9, 3, 11, 5, 13, 7, 15);
    const v8 t4 = __builtin_shufflevector(r4, r5, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8 t5 = __builtin_shufflevector(r4, r5, 1, 9, 3, 11, 5, 13, 7, 15);
    const v8 t6 = __builtin_shufflevector(r6, r7, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8 t7 = __builtin_shufflevector(r6, r7, 1, 9, 3, 11, 5, 13, 7, 15);
    const v8 u0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8 u1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8 u2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8 u3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8 u4 = __builtin_shufflevector(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8 u5 = __builtin_shufflevector(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8 u6 = __builtin_shufflevector(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8 u7 = __builtin_shufflevector(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
    v8_store(dst, (vec8)__builtin_shufflevector(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11));
    v8_store(dst + 8, (vec8)__builtin_shufflevector(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11));
    v8_store(dst + 16, (vec8)__builtin_shufflevector(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11));
    v8_store(dst + 24, (vec8)__builtin_shufflevector(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11));
    v8_store(dst + 32, (vec8)__builtin_shufflevector(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15));
    v8_store(dst + 40, (vec8)__builtin_shufflevector(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15));
    v8_store(dst + 48, (vec8)__builtin_shufflevector(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15));
    v8_store(dst + 56, (vec8)__builtin_shufflevector(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15));
}

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define GHF_CPU_VEC_NAME "x86-64-v3 (AVX2, FMA)"
#define GHF_CPU_VEC_REGS 8
typedef struct vec8 {
    __m256d lo, hi;
} vec8;
AI vec8 v8_mk(__m256d lo, __m256d hi)
{
    vec8 r = {lo, hi};
    return r;
}
AI vec8 v8_load(const double *p) { return v8_mk(_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)); }
AI void v8_store(double *p, vec8 a)
{
    _mm256_storeu_pd(p, a.lo);
    _mm256_storeu_pd(p + 4, a.hi);
}
AI vec8 v8_bcast(double s) { return v8_mk(_mm256_set1_pd(s), _mm256_set1_pd(s)); }
AI vec8 v8_zero(void) { return v8_mk(_mm256_setzero_pd(), _mm256_setzero_pd()); }
AI vec8 v8_add(vec8 a, vec8 b) { return v8_mk(_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)); }
AI vec8 v8_sub(vec8 a, vec8 b) { return v8_mk(_mm256_sub_pd(a.lo, b.lo), _mm256_sub_pd(a.hi, b.hi)); }
AI vec8 v8_mul(vec8 a, vec8 b) { return v8_mk(_mm256_mul_pd(a.lo, b.lo), _mm256_mul_pd(a.hi, b.hi)); }
AI vec8 v8_fma(vec8 a, vec8 b, vec8 c)
{
    return v8_mk(_mm256_fmadd_pd(a.lo, b.lo, c.lo), _mm256_fmadd_pd(a.hi, b.hi, c.hi));
}
AI vec8 v8_load4x2(const double *a, const double *b) { return v8_mk(_mm256_loadu_pd(a), _mm256_loadu_pd(b)); }
AI void v8_store4x2(double *a, double *b, vec8 x)
{
    _mm256_storeu_pd(a, x.lo);
    _mm256_storeu_pd(b, x.hi);
}
AI __m256d v4_ok(__m256d u, __m256d v, __m256d l, __m256d ll)
{
    const __m256d t = _mm256_add_pd(_mm256_add_pd(_mm256_sub_pd(u, u), _mm256_sub_pd(v, v)),
                                    _mm256_add_pd(_mm256_sub_pd(l, l), _mm256_sub_pd(ll, ll)));
    return _mm256_cmp_pd(t, _mm256_setzero_pd(), _CMP_EQ_OQ);
}
AI vec8 v8_keep_finite(vec8 u, vec8 v, vec8 l, vec8 ll, vec8 x, vec8 *bad)
{
    const __m256d one = _mm256_set1_pd(1.0);
    const __m256d m0 = v4_ok(u.lo, v.lo, l.lo, ll.lo), m1 = v4_ok(u.hi, v.hi, l.hi, ll.hi);
    *bad = v8_mk(_mm256_andnot_pd(m0, one), _mm256_andnot_pd(m1, one));
    return v8_mk(_mm256_and_pd(m0, x.lo), _mm256_and_pd(m1, x.hi));
}
AI vec8 v8_abs(vec8 a)
{
    const __m256d m = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    return v8_mk(_mm256_and_pd(a.lo, m), _mm256_and_pd(a.hi, m));
}
/* a 4 x 4 transpose: c[j][i] = r[i][j] */
AI void v4_transpose(__m256d r0, __m256d r1, __m256d r2, __m256d r3, __m256d *c)
{
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    c[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    c[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    c[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    c[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}
AI void v8_transpose8(const double *src, int ld, double *dst)
{
    for (int cb = 0; cb < 8; cb += 4)     /* columns cb..cb+3 */
        for (int rb = 0; rb < 8; rb += 4) { /* rows rb..rb+3 */
            const double *s = src + (size_t)rb * ld + cb;
            __m256d c[4];
            v4_transpose(_mm256_loadu_pd(s), _mm256_loadu_pd(s + ld), _mm256_loadu_pd(s + 2 * ld),
                         _mm256_loadu_pd(s + 3 * ld), c);
            for (int j = 0; j < 4; j++) _mm256_storeu_pd(dst + 8 * (cb + j) + rb, c[j]);
        }
}

#else
#define GHF_CPU_VEC_NAME "x86-64 / portable"
#define GHF_CPU_VEC_REGS 8
typedef struct vec8 {
    double v[8];
} vec8;
AI vec8 v8_load(const double *p)
{
    vec8 r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
AI void v8_store(double *p, vec8 a) { memcpy(p, a.v, sizeof a.v); }
AI vec8 v8_bcast(double s)
{
    vec8 r;
    for (int i = 0; i < 8; i++) r.v[i] = s;
    return r;
}
AI vec8 v8_zero(void) { return v8_bcast(0.0); }
#define GHF__V8_OP(name, expr)                              \
    AI vec8 name(vec8 a, vec8 b)                            \
    {                                                       \
        vec8 r;                                             \
        for (int i = 0; i < 8; i++) r.v[i] = (expr);        \
        return r;                                           \
    }
GHF__V8_OP(v8_add, a.v[i] + b.v[i])
GHF__V8_OP(v8_sub, a.v[i] - b.v[i])
GHF__V8_OP(v8_mul, a.v[i] * b.v[i])
#undef GHF__V8_OP
AI vec8 v8_fma(vec8 a, vec8 b, vec8 c)
{
    vec8 r;
    for (int i = 0; i < 8; i++) r.v[i] = fma(a.v[i], b.v[i], c.v[i]);
    return r;
}
AI vec8 v8_load4x2(const double *a, const double *b)
{
    vec8 r;
    memcpy(r.v, a, 4 * sizeof(double));
    memcpy(r.v + 4, b, 4 * sizeof(double));
    return r;
}
AI void v8_store4x2(double *a, double *b, vec8 x)
{
    memcpy(a, x.v, 4 * sizeof(double));
    memcpy(b, x.v + 4, 4 * sizeof(double));
}
AI vec8 v8_keep_finite(vec8 u, vec8 v, vec8 l, vec8 ll, vec8 x, vec8 *bad)
{
    vec8 r;
    for (int i = 0; i < 8; i++) {
        const int ok = isfinite(u.v[i]) && isfinite(v.v[i]) && isfinite(l.v[i]) && isfinite(ll.v[i]);
        r.v[i] = ok ? x.v[i] : 0.0;
        bad->v[i] = ok ? 0.0 : 1.0;
    }
    return r;
}
AI vec8 v8_abs(vec8 a)
{
    vec8 r;
    for (int i = 0; i < 8; i++) r.v[i] = fabs(a.v[i]);
    return r;
}
AI void v8_transpose8(const double *src, int ld, double *dst)
{
    for (int c = 0; c < 8; c++)
        for (int r = 0; r < 8; r++) dst[8 * c + r] = src[(size_t)r * ld + c];
}
#endif

/* ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) */
AI double v8_hsum(vec8 a)
{
    double t[8];
    v8_store(t, a);
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

#endif
