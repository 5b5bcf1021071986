/* test_bessel_plain.c - the public Bessel headers build with a plain C11
 * compiler (cc -std=c11 -I kernels x.c -lm, no feature macros) and give the
 * same values as a direct evaluation.  Compiled and run by a ctest command
 * (tests/bessel.cmake), outside the project's build flags. */
#include <math.h>
#include <stdio.h>

#include "bessel.h"
#include "bessel_plan.h"

static ghf_bessel_plan pl;

int main(void)
{
    int bad = 0;
    /* DLMF 10.39.2: K_{1/2}(z) = sqrt(pi/(2z)) e^{-z} */
    for (double z = 0.01; z < 100.0; z *= 1.7) {
        double ref = 0.5 * log(3.14159265358979323846 / (2.0 * z)) - z;
        double got = ghf_log_kv(0.5, z);
        if (!(fabs(got - ref) <= 1e-14 * fmax(1.0, fabs(ref)))) bad++;
        /* K_{3/2}/K_{1/2} = 1 + 1/z */
        if (!(fabs(ghf_log_kv_ratio(0.5, z) - log1p(1.0 / z)) <= 1e-13 * fmax(1.0, log1p(1.0 / z)))) bad++;
        if (!isfinite(ghf_dlog_kv_dv(0.5, z))) bad++;
    }
    ghf_bessel_plan_build(&pl, -3.7, 0.1, 50.0);
    for (double z = 0.1; z < 50.0; z *= 1.3) {
        ghf_bessel_eval a = ghf_bessel_plan_eval(&pl, z), b = ghf_bessel_fused(-3.7, z);
        if (!(fabs(a.logk_s - b.logk_s) <= 1e-14 * fmax(1.0, fabs(b.logk_s)))) bad++;
    }
    printf("plain C11 build of the Bessel headers: %d failures\n", bad);
    return bad != 0;
}
