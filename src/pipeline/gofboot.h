/* gofboot.h - goodness of fit with parametric-bootstrap p-values (`ghfit gof
 * --bootstrap B`, job key `gof:`): draw N rows from the fitted law, refit the
 * same model with the EM driver, recompute the statistics under the refitted
 * law, and compare; and the datasets a gof writes (the gof file and a fit's
 * gof/ group share their names).
 *
 * Replicate b (0-based) draws with `ghfit sample`'s generator
 * (ghf_sample_rows) from seed ghf_gof_boot_seed(S, b) and is refitted on
 * MPI_COMM_SELF by the rank b mod P, so every replicate's numbers are the
 * same whatever the number of ranks P; the statistics are then summed onto
 * rank 0 (each slot filled by one rank only: exact). */
#ifndef GHF_GOFBOOT_H
#define GHF_GOFBOOT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "family.h"
#include "gof.h"
#include "h5io.h"

#define GHF_GOF_BOOT_MAX 100000 /* the largest --bootstrap B */

/* What a replicate refits: the fit's model and its EM settings. */
typedef struct ghf_gof_refit {
    ghf_family family;
    int symmetric, fix_p;
    double p_fixed;
    double tol;
    int max_iter;
} ghf_gof_refit;

/* The model of a fit read from a result file (attributes family,
 * symmetric, p_fixed; absent: p free, not symmetric), with tol and max_iter. */
void ghf_gof_refit_of_law(const ghf_fit_law *law, ghf_family fam, double tol, int max_iter, ghf_gof_refit *m);

/* Bootstrap p-values (rank 0). */
typedef struct ghf_gof_boot {
    int B, n_ok, n_failed;
    int n_capped;                      /* of n_ok: refits that stopped at max_iter (kept) */
    int64_t seed;
    double *ks_p, *ad_p, *cvm_p;       /* [d]: (1 + #{T_b >= T_obs}) / (n_ok + 1), NaN when n_ok = 0 */
    double rks_p, rad_p, rcvm_p;       /* the radial statistics' */
    int64_t iters;                     /* EM iterations of all refits (rank 0: summed) */
    char why[320];                     /* the first failed replicate's reason ("" when none failed) */
} ghf_gof_boot;

/* The sample seed of replicate b (splitmix64 of S and b). */
uint64_t ghf_gof_boot_seed(int64_t seed, int b);

/* Collective over comm: B replicates of n rows.  tmpl gives nexact and
 * nknots (the observed statistics' PIT settings; the replicates write no QQ
 * table); obs the observed statistics (read on rank 0 only).  A replicate
 * whose draw, preparation, refit or statistics fail is counted in n_failed
 * and left out.  progress: rank 0 prints about every 10 % of the
 * replicates; tick(tick_arg), when set, is called after every replicate
 * (a job's rank 0 beats its heartbeat).  0 (out filled on rank 0), or 1
 * with a message (out of memory; every rank agrees).  Free out with
 * ghf_gof_boot_free. */
/* Can B replicates of a d-dimensional fit be tabled?  0, or 2 with the
 * message ghf_gof_bootstrap gives (`ghfit check gof` asks first). */
int ghf_gof_boot_check(int B, int d, char *err, size_t errlen);
int ghf_gof_bootstrap(MPI_Comm comm, const ghf_fit_law *law, const ghf_gof_refit *m, int64_t n,
                      const ghf_gof_input *tmpl, const ghf_gof_result *obs, int B, int64_t seed, int progress,
                      void (*tick)(void *), void *tick_arg, ghf_gof_boot *out, char *err, size_t errlen);
void ghf_gof_boot_free(ghf_gof_boot *b);

/* The datasets of a gof result: margins/..., radial/... (and the *_p_boot
 * ones when bt is not NULL) under prefix ("" for the gof file,
 * "/fits/NAME/gof/" in a result file); names kept in nm.  Returns their
 * number (at most GHF_GOF_MAX_ARRAYS). */
#define GHF_GOF_MAX_ARRAYS 24
typedef struct ghf_gof_names {
    char s[GHF_GOF_MAX_ARRAYS][192];
} ghf_gof_names;
int ghf_gof_arrays(const char *prefix, int64_t d, int64_t Q, int64_t n, const ghf_gof_result *r,
                   const ghf_gof_boot *bt, ghf_gof_names *nm, ghf_h5_array *a);

#endif
