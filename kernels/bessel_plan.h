/* bessel_plan.h - fixed-order fast path for the fused Bessel evaluator.
 *
 * PROVISIONAL: this first version stores only the order and evaluates every
 * point with ghf_bessel_fused.  The API is final.
 */
#ifndef GHF_BESSEL_PLAN_H
#define GHF_BESSEL_PLAN_H

#include "ghf_defs.h"
#include "bessel.h"

#define GHF_BESSEL_PLAN_MAX_PIECES 64

typedef struct ghf_bessel_plan {
    double v;
    int npieces;
} ghf_bessel_plan;

GHF_HD static inline int ghf_bessel_plan_setup(ghf_bessel_plan *pl, double v, double zmin, double zmax)
{
    (void)zmin;
    (void)zmax;
    pl->v = v;
    pl->npieces = 0;
    return 0;
}

GHF_HD static inline int ghf_bessel_plan_num_nodes(const ghf_bessel_plan *pl) { (void)pl; return 0; }
GHF_HD static inline void ghf_bessel_plan_node(ghf_bessel_plan *pl, int i) { (void)pl; (void)i; }
GHF_HD static inline void ghf_bessel_plan_finish_piece(ghf_bessel_plan *pl, int piece) { (void)pl; (void)piece; }
GHF_HD static inline int ghf_bessel_plan_num_pieces(const ghf_bessel_plan *pl) { return pl->npieces; }

GHF_HD static inline void ghf_bessel_plan_build(ghf_bessel_plan *pl, double v, double zmin, double zmax)
{
    ghf_bessel_plan_setup(pl, v, zmin, zmax);
    int n = ghf_bessel_plan_num_nodes(pl);
    for (int i = 0; i < n; i++) ghf_bessel_plan_node(pl, i);
    for (int k = 0; k < ghf_bessel_plan_num_pieces(pl); k++) ghf_bessel_plan_finish_piece(pl, k);
}

GHF_HD static inline ghf_bessel_eval ghf_bessel_plan_eval(const ghf_bessel_plan *pl, double z)
{
    return ghf_bessel_fused(pl->v, z);
}

#endif /* GHF_BESSEL_PLAN_H */
