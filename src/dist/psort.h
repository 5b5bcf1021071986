/* psort.h - a deterministic parallel sort of (value, global index) keys across
 * the ranks of a communicator (sample sort), for order statistics of data
 * that no single rank holds (`ghfit gof`, src/pipeline/gofdist.h).
 *
 * The keys are ordered by value, ties by index; the indices are distinct (a
 * row's global number), so the global order is unique and does not depend on
 * the number of ranks.  Method: every rank sorts its keys (an LSD radix sort
 * over 11-bit digits of the row and of the value's bits), takes up to
 * S regular samples (S = 8P for P <= 64 ranks, 2P up to 512, else P, and
 * S P <= 2^22 in all: 2^22/P beyond 2048 ranks), each
 * weighted by the number of keys it stands for; the samples are all-gathered
 * and sorted, and P - 1 splitters are the samples at which the weighted count
 * passes N t / P; the keys go to their ranks in one MPI_Alltoallv and are
 * merged there (P sorted runs, pairwise).  Rank r then holds a contiguous piece of the global order,
 * the pieces in rank order, each within about N/P (1 + 2P/S) keys.
 *
 * Limits: MPI counts are ints, so every rank must receive fewer than 2^31
 * keys (in practice N/P < 2^31 / (1 + 2P/S)); a larger sort is refused. */
#ifndef GHF_PSORT_H
#define GHF_PSORT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ghf_sortkey {
    double x;   /* finite (NaN is not ordered) */
    int64_t i;  /* distinct over all ranks */
} ghf_sortkey;

/* The order of keys: by x, then by i (qsort comparator). */
int ghf_sortkey_cmp(const void *a, const void *b);

/* Collective.  *keys (malloc'd, n_in keys in any order; NULL allowed when
 * n_in = 0) is replaced by this rank's piece of the global order (*n_out
 * keys, malloc'd, never NULL), *off is the global position of its first key
 * and *n_all the total.  0; 1 out of memory or MPI failure; 2 a rank would
 * receive 2^31 keys or more (err says so).  Agreed across comm; on failure
 * *keys is freed and set to NULL. */
int ghf_psort(MPI_Comm comm, ghf_sortkey **keys, int64_t n_in, int64_t *n_out, int64_t *off, int64_t *n_all,
              char *err, size_t errlen);

#endif
