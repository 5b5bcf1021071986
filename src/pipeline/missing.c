/* missing.c - the rows of a fit with missing coordinates (--missing em):
 * complete rows first (the backend's fast path), the rows with NaN entries
 * after them (src/em/em_missing.c), and what the result file records. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "pipe.h"
#include "util.h"

int ghf__missing_arrange(MPI_Comm comm, ghf_shard *sh, double *w, int64_t *n_complete, double *counts,
                         char *err, size_t errlen)
{
    const int d = sh->d;
    const int64_t n = sh->nrows;
    double *tx = malloc((size_t)(n > 0 ? n : 1) * (size_t)d * sizeof(double));
    double *tw = w ? malloc((size_t)(n > 0 ? n : 1) * sizeof(double)) : NULL;
    if (ghf_any(comm, !tx || (w && !tw))) {
        snprintf(err, errlen, "out of memory (arranging the rows with missing entries)");
        free(tx), free(tw);
        return GHF_EXIT_RUNTIME;
    }
    for (int j = 0; j <= d; j++) counts[j] = 0.0;
    *n_complete = 0;
    int64_t k = 0;
    for (int pass = 0; pass < 2; pass++) /* complete rows, then the others, each in row order */
        for (int64_t i = 0; i < n; i++) {
            int nm = 0;
            for (int j = 0; j < d; j++) nm += isnan(sh->x[i * d + j]) ? 1 : 0;
            if ((nm > 0) != pass) continue;
            if (pass == 0) *n_complete = k + 1;
            counts[nm] += 1.0;
            memcpy(tx + k * d, sh->x + i * d, (size_t)d * sizeof(double));
            if (w) tw[k] = w[i];
            k++;
        }
    if (n > 0) { /* a rank without rows has x (and w) NULL: no memcpy from or to NULL */
        memcpy(sh->x, tx, (size_t)n * (size_t)d * sizeof(double));
        if (w) memcpy(w, tw, (size_t)n * sizeof(double));
    }
    free(tx), free(tw);
    MPI_Allreduce(MPI_IN_PLACE, counts, d + 1, MPI_DOUBLE, MPI_SUM, comm);
    return 0;
}
