/* test_devmap.c - the GPU assignment of ranks (src/backend/devmap.h) without a GPU: the pure function on fixed layouts and random ones, and the collective version under MPI with a pretended GPU count. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmap.h"
#include "testutil.h"

static void expect(const char *what, int nloc, const int *group, int ngpu, const int *want, int want_rc)
{
    int dev[64];
    const int rc = ghf_devmap_assign(nloc, group, ngpu, dev);
    int same = rc == want_rc;
    for (int i = 0; i < nloc; i++) same = same && dev[i] == want[i];
    CHECK(same, "%s: rc %d (want %d)", what, rc, want_rc);
    if (!same) {
        for (int i = 0; i < nloc; i++) fprintf(stderr, " %d", dev[i]);
        fputc('\n', stderr);
    }
}

/* properties on any layout: devices in range; a group with at most ngpu
 * ranks uses distinct GPUs; the rc says whether a group has more; loads
 * differ by at most one when every group has one rank */
static void properties(int nloc, const int *group, int ngpu)
{
    int dev[64], load[64] = {0};
    const int rc = ghf_devmap_assign(nloc, group, ngpu, dev);
    int ok = 1, over = 0, single = 1;
    for (int i = 0; i < nloc; i++) {
        ok = ok && dev[i] >= 0 && dev[i] < ngpu;
        load[dev[i] >= 0 && dev[i] < ngpu ? dev[i] : 0]++;
        int n = 0;
        for (int j = 0; j < nloc; j++) n += group[j] == group[i];
        if (n > 1) single = 0;
        if (n > ngpu) over = 1;
        for (int j = i + 1; j < nloc; j++)
            if (group[j] == group[i] && dev[j] == dev[i] && n <= ngpu) ok = 0;
    }
    CHECK(ok, "random layout: devices in range, a group's ranks on distinct GPUs");
    CHECK(rc == over, "random layout: rc %d says whether a group outnumbers the GPUs (%d)", rc, over);
    if (single) {
        int lo = nloc, hi = 0;
        for (int k = 0; k < ngpu; k++) {
            lo = load[k] < lo ? load[k] : lo;
            hi = load[k] > hi ? load[k] : hi;
        }
        CHECK(hi - lo <= 1, "one-rank groups spread evenly (loads %d..%d)", lo, hi);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        { /* a sweep of one-rank groups: every GPU used */
            const int g[4] = {0, 1, 2, 3}, w[4] = {0, 1, 2, 3};
            expect("4 one-rank groups, 4 GPUs", 4, g, 4, w, 0);
        }
        {
            const int g[8] = {0, 1, 2, 3, 4, 5, 6, 7}, w[8] = {0, 1, 0, 1, 0, 1, 0, 1};
            expect("8 one-rank groups, 2 GPUs: spread, shared", 8, g, 2, w, 0);
        }
        {
            const int g[4] = {0, 1, 2, 3}, w[4] = {0, 0, 0, 0};
            expect("4 one-rank groups, 1 GPU", 4, g, 1, w, 0);
        }
        { /* one fit on the whole node */
            const int g[4] = {7, 7, 7, 7}, w[4] = {0, 1, 2, 3};
            expect("one 4-rank group, 4 GPUs", 4, g, 4, w, 0);
        }
        {
            const int g[4] = {0, 0, 2, 2}, w[4] = {0, 1, 2, 3};
            expect("two 2-rank groups, 4 GPUs", 4, g, 4, w, 0);
        }
        {
            const int g[4] = {0, 0, 2, 2}, w[4] = {0, 1, 0, 1};
            expect("two 2-rank groups, 2 GPUs: distinct within, shared across", 4, g, 2, w, 0);
        }
        {
            const int g[4] = {0, 2, 0, 2}, w[4] = {0, 2, 1, 3};
            expect("two interleaved 2-rank groups, 4 GPUs", 4, g, 4, w, 0);
        }
        {
            const int g[3] = {5, 5, 5}, w[3] = {0, 1, 0};
            expect("a 3-rank group on 2 GPUs: shares, rc 1", 3, g, 2, w, 1);
        }
        { /* a 2-rank group and four one-rank groups on 3 GPUs: balanced */
            const int g[6] = {1, 1, 2, 3, 4, 5}, w[6] = {0, 1, 2, 0, 1, 2};
            expect("mixed sizes, 3 GPUs", 6, g, 3, w, 0);
        }
        { /* the larger group first, wherever it sits */
            const int g[5] = {9, 3, 3, 3, 8}, w[5] = {3, 0, 1, 2, 0};
            expect("a 3-rank group after a one-rank one, 4 GPUs", 5, g, 4, w, 0);
        }
        uint64_t s = 12345;
        for (int t = 0; t < 2000; t++) {
            int nloc = 1 + (int)((s = s * 6364136223846793005ULL + 1) >> 60) % 16, group[64];
            const int ngpu = 1 + (int)((s = s * 6364136223846793005ULL + 1) >> 61);
            const int ng = 1 + (int)((s = s * 6364136223846793005ULL + 1) >> 59) % nloc;
            for (int i = 0; i < nloc; i++) group[i] = (int)((s = s * 6364136223846793005ULL + 1) >> 33) % ng;
            properties(nloc, group, ngpu);
            for (int i = 0; i < nloc; i++) group[i] = 100 + i; /* one-rank groups */
            properties(nloc, group, ngpu);
        }
    }
    /* collective: pretend 2 GPUs per node; one-rank groups, then pairs, then the world */
    for (int mode = 0; mode < 3; mode++) {
        const int color = mode == 0 ? rank : mode == 1 ? rank / 2 : 0;
        MPI_Comm grp;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &grp);
        int gsize, dev = -1, shared = -1;
        MPI_Comm_size(grp, &gsize);
        char note[1024];
        const int rc = ghf_devmap_collective(MPI_COMM_WORLD, grp, 2, &dev, &shared, note, sizeof note);
        CHECK(rc == 0 && dev >= 0 && dev < 2, "collective mode %d: rank %d device %d", mode, rank, dev);
        /* all ranks are on one node here: a group of more than 2 ranks shares */
        CHECK(shared == (gsize > 2), "collective mode %d: rank %d shared %d (group of %d)", mode, rank, shared, gsize);
        int devs[64];
        MPI_Allgather(&dev, 1, MPI_INT, devs, 1, MPI_INT, grp);
        if (gsize <= 2 && gsize > 1) CHECK(devs[0] != devs[1], "collective mode %d: a pair on distinct GPUs", mode);
        if (mode == 0 && size > 1) {
            int all[64];
            MPI_Allgather(&dev, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
            int used[2] = {0, 0};
            for (int i = 0; i < size; i++) used[all[i]]++;
            CHECK(used[0] > 0 && used[1] > 0, "one-rank groups use both GPUs");
        }
        if (rank == 0) printf("mode %d: %s\n", mode, note);
        MPI_Comm_free(&grp);
    }
    const int rc = test_summary("test_devmap");
    MPI_Finalize();
    return rc;
}
