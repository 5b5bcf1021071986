/* devmap.c - see devmap.h */
#include "devmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* index of the least-loaded GPU not in used[] (ties: the lowest index); -1 if all used */
static int least_loaded(int ngpu, const int *load, const unsigned char *used)
{
    int best = -1;
    for (int k = 0; k < ngpu; k++)
        if (!used[k] && (best < 0 || load[k] < load[best])) best = k;
    return best;
}

int ghf_devmap_assign(int nloc, const int *group, int ngpu, int *dev)
{
    if (nloc <= 0) return 0;
    if (ngpu < 1) ngpu = 1;
    int *load = calloc((size_t)ngpu, sizeof(int)), *size = calloc((size_t)nloc, sizeof(int));
    unsigned char *used = calloc((size_t)ngpu, 1), *done = calloc((size_t)nloc, 1);
    if (!load || !size || !used || !done) { /* no memory: node-local rank order */
        for (int i = 0; i < nloc; i++) dev[i] = i % ngpu;
        free(load), free(size), free(used), free(done);
        return nloc > ngpu;
    }
    /* ranks of each local rank's group on this node */
    for (int i = 0; i < nloc; i++)
        for (int j = 0; j < nloc; j++) size[i] += group[j] == group[i];
    int over = 0;
    /* multi-rank groups first (larger first, then node order), one group at a time */
    for (int pass = 0; pass < 2; pass++)
        for (;;) {
            int lead = -1;
            for (int i = 0; i < nloc; i++) {
                if (done[i] || (pass == 0) != (size[i] > 1)) continue;
                if (lead < 0 || size[i] > size[lead]) lead = i;
            }
            if (lead < 0) break;
            memset(used, 0, (size_t)ngpu);
            int nused = 0;
            for (int i = lead; i < nloc; i++) {
                if (done[i] || group[i] != group[lead]) continue;
                if (nused == ngpu) { /* more ranks than GPUs: the group shares */
                    memset(used, 0, (size_t)ngpu);
                    nused = 0;
                    over = 1;
                }
                const int k = least_loaded(ngpu, load, used);
                dev[i] = k;
                load[k]++;
                used[k] = 1;
                nused++;
                done[i] = 1;
            }
        }
    free(load), free(size), free(used), free(done);
    return over;
}

int ghf_devmap_collective(MPI_Comm world, MPI_Comm group, int ngpu, int *dev, int *shared, char *note,
                          size_t notelen)
{
    *dev = 0;
    *shared = 0;
    if (note && notelen) note[0] = '\0';
    int wrank, lrank, lsize;
    MPI_Comm_rank(world, &wrank);
    /* a group's id: the smallest world rank in it */
    int gid = wrank;
    if (MPI_Allreduce(&wrank, &gid, 1, MPI_INT, MPI_MIN, group) != MPI_SUCCESS) return 1;
    MPI_Comm node;
    if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &node) != MPI_SUCCESS) return 1;
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    int mine[2] = {gid, ngpu}, *all = malloc(2 * (size_t)lsize * sizeof(int)), *grp = malloc((size_t)lsize * sizeof(int));
    int *devs = calloc((size_t)lsize, sizeof(int));
    int fail = !all || !grp || !devs, anyfail = 0;
    MPI_Allreduce(&fail, &anyfail, 1, MPI_INT, MPI_MAX, world);
    if (anyfail) {
        free(all), free(grp), free(devs);
        MPI_Comm_free(&node);
        return 1;
    }
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, node);
    int g = ngpu;
    for (int i = 0; i < lsize; i++) {
        grp[i] = all[2 * i];
        if (all[2 * i + 1] < g) g = all[2 * i + 1];
    }
    if (g < 1) g = 1;
    const int over = ghf_devmap_assign(lsize, grp, g, devs);
    *dev = devs[lrank];
    /* does my group share a GPU on this node? (then on any node) */
    int sh = 0;
    for (int i = 0; i < lsize; i++)
        if (i != lrank && grp[i] == gid && devs[i] == *dev) sh = 1;
    MPI_Allreduce(&sh, shared, 1, MPI_INT, MPI_MAX, group);
    /* the note: per node, ranks per GPU; world rank 0 gathers the node leaders' lines */
    char line[256];
    {
        int n = snprintf(line, sizeof line, "%d GPU%s for %d rank%s:", g, g == 1 ? "" : "s", lsize,
                         lsize == 1 ? "" : "s");
        for (int k = 0; k < g && n < (int)sizeof line - 24; k++) {
            int c = 0;
            for (int i = 0; i < lsize; i++) c += devs[i] == k;
            n += snprintf(line + n, sizeof line - (size_t)n, " cuda:%d x%d", k, c);
        }
        if (over) snprintf(line + n, sizeof line - (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1),
                           " (a group shares a GPU: host reduction)");
    }
    MPI_Comm leaders;
    MPI_Comm_split(world, lrank == 0 ? 0 : MPI_UNDEFINED, wrank, &leaders);
    if (leaders != MPI_COMM_NULL) {
        int nl;
        MPI_Comm_size(leaders, &nl);
        char *lines = wrank == 0 ? malloc((size_t)nl * sizeof line) : NULL;
        MPI_Gather(line, (int)sizeof line, MPI_CHAR, lines, (int)sizeof line, MPI_CHAR, 0, leaders);
        if (wrank == 0 && note && notelen) {
            size_t off = 0;
            for (int i = 0; i < nl && lines && off + 1 < notelen; i++) {
                const int w = snprintf(note + off, notelen - off, "%snode %d: %s", i ? "; " : "", i,
                                       lines + (size_t)i * sizeof line);
                if (w < 0) break;
                off += (size_t)w;
            }
        }
        free(lines);
        MPI_Comm_free(&leaders);
    }
    free(all), free(grp), free(devs);
    MPI_Comm_free(&node);
    return 0;
}
