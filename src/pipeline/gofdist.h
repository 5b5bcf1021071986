/* gofdist.h - the observed statistics of `ghfit gof` at cluster scale: the
 * rows stay in the ranks' shards.  Per margin (and for the radial statistic
 * q) the values are sorted across the ranks (src/dist/psort.h, ties by global
 * row), so that each rank holds a contiguous piece of the global order; the
 * PITs are those of ghf_gof_pit_sorted (the same knots, each evaluated
 * exactly by the rank that holds it, all-gathered, the same interpolation);
 * KS is a maximum and the A^2 and W^2 sums are exact (kernels/xsum.h); the
 * QQ sample quantiles come from the ranks holding the order statistics.  The
 * result has the same bits as ghf_gof_compute on all the rows, whatever the
 * number of ranks.
 *
 * Memory per rank: its shard, plus for the column at hand 16-byte keys for
 * its rows and as many as scratch (the radix sort), then its piece (about
 * N/P keys, see psort.h) with a scratch copy for the merge, then the piece
 * with two doubles per key: at most about 32 bytes per row of its share
 * beyond the shard (8 d bytes per row).  Limit: a rank's piece must stay below
 * 2^31 keys (MPI counts), i.e. N/P < 2^31 with some margin. */
#ifndef GHF_GOFDIST_H
#define GHF_GOFDIST_H

#include <mpi.h>
#include <stddef.h>

#include "gof.h"

/* Collective: the statistics of u, sorted across comm: this rank holds the
 * m order statistics off+1 .. off+m of n.  Every rank gets them; the same
 * bits as ghf_gof_stats on the whole.  0, or 1 if MPI fails. */
int ghf_gof_stats_dist(MPI_Comm comm, const double *u, size_t m, size_t off, size_t n, ghf_gof_stat *s);

/* Collective: u[i] for this rank's m values xs (sorted across comm as above)
 * = what ghf_gof_pit_sorted gives at those ranks on the whole sample;
 * *maxerr (every rank) likewise.  0, or 1 (a cdf call failed somewhere or
 * memory ran out; agreed). */
int ghf_gof_pit_dist(MPI_Comm comm, const double *xs, size_t m, size_t off, size_t n, ghf_gof_cdf_fn f,
                     const void *ctx, size_t nexact, size_t nknots, double *u, double *maxerr);

/* Collective: ghf_gof_compute over the rows of all ranks.  in->n is the
 * total number of rows, in->x is ignored: this rank's nloc rows are x
 * (row-major, in->d columns), and the global row order is rank 0's rows, then
 * rank 1's, ...  out is filled on every rank, except pit and rpit: on rank 0
 * only (when in->want_pit).  0; 2 (err: as ghf_gof_compute); 1 (out of
 * memory, a failed cdf, or a rank's sorted piece would reach 2^31 keys).
 * Agreed across comm; on failure nothing is left to free. */
int ghf_gof_compute_dist(MPI_Comm comm, const ghf_gof_input *in, const double *x, size_t nloc, ghf_gof_result *out,
                         char *err, size_t errlen);

#endif
