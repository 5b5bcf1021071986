/* ghf_defs.h - macros shared by host C and CUDA code.
 *
 * Every function in kernels/ that must run on both the CPU backend and the
 * GPU is declared `GHF_HD static inline`.  Under nvcc GHF_HD expands to
 * __host__ __device__; under a plain C compiler it expands to nothing, so the
 * headers compile with `cc -std=c11 ... -lm` and nothing else. */
#ifndef GHF_DEFS_H
#define GHF_DEFS_H

#ifdef __CUDACC__
#define GHF_HD __host__ __device__
#else
#define GHF_HD
#endif

#ifndef __CUDACC__
#include <math.h>
#endif

#define GHF_LOG_2PI   1.8378770664093454835606594728112 /* log(2 pi) */
#define GHF_LOG_PI    1.1447298858494001741434273513531 /* log(pi) */
#define GHF_LN2       0.69314718055994530941723212145818
#define GHF_EULER     0.57721566490153286060651209008240 /* Euler-Mascheroni */

#endif /* GHF_DEFS_H */
