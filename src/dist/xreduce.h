/* xreduce.h - sums over the rows of the ranks' shards with the same bits
 * whatever the number of ranks and threads (kernels/xsum.h accumulators over
 * fixed blocks of GHF_ROW_BLOCK rows; shards start at multiples of it). */
#ifndef GHF_XREDUCE_H
#define GHF_XREDUCE_H

#include <mpi.h>
#include <stdint.h>

#include "xsum.h"

/* Rows per block: every block's partial sums are formed in row order by one
 * thread, and the blocks' partials are added exactly.  The reader gives each
 * rank whole blocks (ghf_block_range_granular), so a block never straddles
 * two ranks and the sums do not depend on the rank count. */
#define GHF_ROW_BLOCK 256

/* Collective: acc[len] summed over comm, in place (exact: MAX of the tops,
 * align, SUM of the bins).  0, or non-zero if MPI fails. */
int ghf_xsum_allreduce(MPI_Comm comm, ghf_xsum *acc, int len);

/* The partial sums of one block of rows: x points to its nb rows (row-major,
 * d columns), part[len] is zeroed before the call. */
typedef void (*ghf_block_fn)(void *ctx, const double *x, int nb, int d, double *part);

/* Collective: out[len] = the sums over all blocks of all ranks of fn's
 * partials (OpenMP over blocks).  Returns 0, or 1 (out of memory; agreed
 * across ranks). */
int ghf_xreduce_rows(MPI_Comm comm, const double *x, int64_t nrows, int d, int len, ghf_block_fn fn, void *ctx,
                     double *out);

#endif
