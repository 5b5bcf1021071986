/* agree.c - see agree.h */
#include "agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ghf_agree(MPI_Comm comm, int status, char *msg, size_t len)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    /* MPI_MAXLOC on MPI_2INT: the largest status, and the lowest rank that
     * holds it (MPI breaks ties by the smaller index) */
    int pair_in[2] = {status, rank}, pair_out[2];
    MPI_Allreduce(pair_in, pair_out, 1, MPI_2INT, MPI_MAXLOC, comm);
    const int worst = pair_out[0], who = pair_out[1];
    if (worst != 0 && msg && len > 0) {
        msg[len - 1] = '\0';
        if (len > (size_t)0x7fffffff) len = 0x7fffffff;
        MPI_Bcast(msg, (int)len, MPI_CHAR, who, comm);
    }
    return worst;
}

int ghf_any(MPI_Comm comm, int flag)
{
    int in = flag != 0, out = in;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, comm);
    return out;
}

void ghf_bcast_status(MPI_Comm comm, int *status, char *msg, size_t len)
{
    int st = *status;
    MPI_Bcast(&st, 1, MPI_INT, 0, comm);
    *status = st;
    if (st != 0 && msg && len > 0) {
        msg[len - 1] = '\0';
        MPI_Bcast(msg, (int)len, MPI_CHAR, 0, comm);
    }
}

int ghf_test_fail(const char *step, char *msg, size_t len)
{
    const char *spec = getenv("GHFIT_TEST_FAIL");
    if (!spec || !*spec) return 0;
    int wrank = 0, init = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    const size_t sl = strlen(step);
    for (const char *p = spec; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *at = memchr(p, '@', n);
        if (at && (size_t)(at - p) == sl && strncmp(p, step, sl) == 0 && atoi(at + 1) == wrank) {
            if (msg && len) snprintf(msg, len, "rank %d: %s failed (injected by GHFIT_TEST_FAIL)", wrank, step);
            return 1;
        }
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}
