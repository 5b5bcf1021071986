/* psort.c - see psort.h */
#include "psort.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"

int ghf_sortkey_cmp(const void *a, const void *b)
{
    const ghf_sortkey *p = a, *q = b;
    if (p->x < q->x) return -1;
    if (p->x > q->x) return 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* The radix digits of a key, least significant first: 6 of 11 bits of the
 * row (offset to unsigned), then 6 of the value's bits mapped to an unsigned
 * order (-0 as +0, so that they tie as the comparator has it). */
#define RB 11
#define RN (1 << RB)
static inline uint64_t value_bits(double x)
{
    x += 0.0;
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u >> 63) ? ~u : u | 0x8000000000000000ULL;
}
static inline uint64_t row_bits(int64_t i) { return (uint64_t)i ^ 0x8000000000000000ULL; }
static inline unsigned digit(const ghf_sortkey *k, int d)
{
    const uint64_t u = d < 6 ? row_bits(k->i) : value_bits(k->x);
    return (unsigned)(u >> (RB * (d % 6))) & (RN - 1);
}

static int key_lt(const ghf_sortkey *a, const ghf_sortkey *b)
{
    return a->x < b->x || (a->x == b->x && a->i < b->i);
}

/* k[0..n) in the order of ghf_sortkey_cmp: LSD radix sort, 11-bit digits
 * (a digit that is the same for every key is skipped, and the row's digits
 * when the keys come in row order, as a column's do), O(n) per pass instead
 * of qsort's O(n log n) comparisons; qsort when n is small or the scratch
 * buffer cannot be had. */
static void key_sort(ghf_sortkey *k, size_t n)
{
    ghf_sortkey *tmp = n > 256 ? malloc(n * sizeof *tmp) : NULL;
    size_t(*h)[RN] = tmp ? calloc(12, sizeof *h) : NULL;
    if (!tmp || !h) {
        free(tmp), free(h);
        qsort(k, n, sizeof *k, ghf_sortkey_cmp);
        return;
    }
    int by_row = 1;
    for (size_t j = 0; j < n; j++) {
        const uint64_t lo = row_bits(k[j].i), hi = value_bits(k[j].x);
        for (int d = 0; d < 6; d++) h[d][(lo >> (RB * d)) & (RN - 1)]++, h[d + 6][(hi >> (RB * d)) & (RN - 1)]++;
        if (j > 0) by_row &= k[j].i > k[j - 1].i;
    }
    ghf_sortkey *src = k, *dst = tmp;
    for (int d = by_row ? 6 : 0; d < 12; d++) {
        if (h[d][digit(&k[0], d)] == n) continue; /* one digit value: nothing to order */
        size_t acc = 0;
        for (int b = 0; b < RN; b++) {
            const size_t c = h[d][b];
            h[d][b] = acc, acc += c;
        }
        for (size_t j = 0; j < n; j++) dst[h[d][digit(&src[j], d)]++] = src[j];
        ghf_sortkey *t = src;
        src = dst, dst = t;
    }
    if (src != k) memcpy(k, src, n * sizeof *k);
    free(tmp), free(h);
}

/* k[0..n): the P sorted runs of lengths len[] merged in pairs (log2 P
 * rounds) into the order of ghf_sortkey_cmp; key_sort when the scratch
 * buffer cannot be had. */
static void merge_runs(ghf_sortkey *k, size_t n, const int *len, int P)
{
    ghf_sortkey *tmp = malloc((n > 0 ? n : 1) * sizeof *tmp);
    size_t *b = malloc((size_t)(P + 1) * sizeof *b); /* run boundaries */
    if (!tmp || !b) {
        free(tmp), free(b);
        key_sort(k, n);
        return;
    }
    b[0] = 0;
    for (int r = 0; r < P; r++) b[r + 1] = b[r] + (size_t)len[r];
    ghf_sortkey *src = k, *dst = tmp;
    for (int w = 1; w < P; w *= 2) {
        for (int r = 0; r < P; r += 2 * w) {
            const size_t lo = b[r], mid = b[r + w < P ? r + w : P], hi = b[r + 2 * w < P ? r + 2 * w : P];
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) dst[o++] = key_lt(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        ghf_sortkey *t = src;
        src = dst, dst = t;
    }
    if (src != k) memcpy(k, src, n * sizeof *k);
    free(tmp), free(b);
}

/* the first position of sorted k[0..n) that is not below s */
static int64_t lower_bound(const ghf_sortkey *k, int64_t n, const ghf_sortkey *s)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (key_lt(&k[mid], s)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

typedef struct wsample {
    ghf_sortkey k;
    int64_t w; /* how many keys of its rank it stands for */
} wsample;

static int wsample_cmp(const void *a, const void *b)
{
    return ghf_sortkey_cmp(&((const wsample *)a)->k, &((const wsample *)b)->k);
}

/* 8P, 2P or P samples per rank, and at most PSORT_SAMPLES in all: every rank
 * all-gathers and sorts them (24 bytes each), and MPI displacements are ints */
#define PSORT_SAMPLES (1 << 22)
static int samples_per_rank(int P)
{
    const int s = P <= 64 ? 8 * P : P <= 512 ? 2 * P : P, cap = PSORT_SAMPLES / P;
    return s < cap ? s : cap > 0 ? cap : 1;
}

/* Collective: the cuts b[0..P] of sorted k[0..n): keys b[t] .. b[t+1]-1 go
 * to rank t.  0 or 1 (out of memory, agreed). */
static int cuts(MPI_Comm comm, int P, const ghf_sortkey *k, int64_t n, int64_t N, int64_t *b)
{
    const int S = samples_per_rank(P), s = n < S ? (int)n : S;
    wsample *mine = malloc((size_t)(s > 0 ? s : 1) * sizeof *mine);
    int *cnt = malloc((size_t)P * sizeof(int)), *dsp = malloc((size_t)P * sizeof(int));
    for (int j = 0; mine && j < s; j++) {
        const int64_t p0 = (int64_t)((__int128)j * n / s), p1 = (int64_t)((__int128)(j + 1) * n / s);
        mine[j] = (wsample){k[p0], p1 - p0};
    }
    if (ghf_any(comm, !mine || !cnt || !dsp)) {
        free(mine), free(cnt), free(dsp);
        return 1;
    }
    MPI_Allgather(&s, 1, MPI_INT, cnt, 1, MPI_INT, comm);
    int64_t tot = 0;
    for (int r = 0; r < P; r++) dsp[r] = (int)tot, tot += cnt[r];
    wsample *all = malloc((size_t)(tot > 0 ? tot : 1) * sizeof *all);
    if (ghf_any(comm, !all)) {
        free(mine), free(cnt), free(dsp), free(all);
        return 1;
    }
    MPI_Datatype t;
    MPI_Type_contiguous((int)sizeof(wsample), MPI_BYTE, &t);
    MPI_Type_commit(&t);
    MPI_Allgatherv(mine, s, t, all, cnt, dsp, t, comm);
    MPI_Type_free(&t);
    qsort(all, (size_t)tot, sizeof *all, wsample_cmp);
    /* splitter t: the first sample with at least N t / P keys (by weight)
     * before it; none (past every key) when the weights run out first */
    b[0] = 0;
    int next = 1;
    int64_t cum = 0;
    for (int64_t q = 0; q < tot && next < P; q++) {
        while (next < P && cum >= (int64_t)((__int128)N * next / P)) b[next++] = lower_bound(k, n, &all[q].k);
        cum += all[q].w;
    }
    while (next <= P) b[next++] = n;
    free(mine), free(cnt), free(dsp), free(all);
    return 0;
}

/* Collective: send counts (b) to receive counts; 0, or 2 when a count or a
 * rank's total passes INT_MAX (err; agreed). */
static int counts(MPI_Comm comm, int P, const int64_t *b, int *sc, int *sd, int *rc, int *rd, int64_t *nrecv,
                  char *err, size_t errlen)
{
    int64_t *s64 = malloc(2 * (size_t)P * sizeof(int64_t));
    if (ghf_any(comm, !s64)) {
        free(s64);
        return 1;
    }
    int64_t *r64 = s64 + P;
    for (int t = 0; t < P; t++) s64[t] = b[t + 1] - b[t];
    MPI_Alltoall(s64, 1, MPI_INT64_T, r64, 1, MPI_INT64_T, comm);
    int64_t st = 0, rt = 0;
    for (int t = 0; t < P; t++) {
        sc[t] = (int)s64[t], sd[t] = (int)(st < INT_MAX ? st : 0), st += s64[t];
        rc[t] = (int)r64[t], rd[t] = (int)(rt < INT_MAX ? rt : 0), rt += r64[t];
    }
    free(s64);
    *nrecv = rt;
    int bad = st > INT_MAX || rt > INT_MAX;
    if (bad) {
        int rank;
        MPI_Comm_rank(comm, &rank);
        snprintf(err, errlen,
                 "parallel sort: rank %d would send %lld and receive %lld keys; MPI counts allow fewer than 2^31 per "
                 "rank (use more ranks)",
                 rank, (long long)st, (long long)rt);
    }
    return ghf_agree(comm, bad ? 2 : 0, err, errlen);
}

int ghf_psort(MPI_Comm comm, ghf_sortkey **keys, int64_t n_in, int64_t *n_out, int64_t *off, int64_t *n_all,
              char *err, size_t errlen)
{
    int P, rank;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &rank);
    ghf_sortkey *k = *keys;
    *n_out = *off = *n_all = 0;
    key_sort(k, (size_t)n_in);
    int64_t N = 0;
    MPI_Allreduce(&n_in, &N, 1, MPI_INT64_T, MPI_SUM, comm);
    *n_all = N;
    if (P == 1) {
        if (!k && !(k = malloc(sizeof *k))) goto oom;
        *keys = k, *n_out = n_in;
        return 0;
    }
    int64_t *b = malloc((size_t)(P + 1) * sizeof *b);
    int *ci = malloc(4 * (size_t)P * sizeof(int));
    if (ghf_any(comm, !b || !ci)) {
        free(b), free(ci);
        goto oom;
    }
    int *sc = ci, *sd = ci + P, *rc = ci + 2 * P, *rd = ci + 3 * P;
    int64_t nr = 0;
    int st = cuts(comm, P, k, n_in, N, b);
    if (!st) st = counts(comm, P, b, sc, sd, rc, rd, &nr, err, errlen);
    ghf_sortkey *out = NULL;
    if (!st) {
        out = malloc((size_t)(nr > 0 ? nr : 1) * sizeof *out);
        st = ghf_any(comm, !out);
    }
    if (!st) {
        MPI_Datatype t;
        MPI_Type_contiguous((int)sizeof(ghf_sortkey), MPI_BYTE, &t);
        MPI_Type_commit(&t);
        st = MPI_Alltoallv(k, sc, sd, t, out, rc, rd, t, comm) != MPI_SUCCESS;
        MPI_Type_free(&t);
    }
    free(b), free(k);
    *keys = NULL;
    if (st) {
        free(out), free(ci);
        if (st == 1) snprintf(err, errlen, "parallel sort: out of memory");
        return st;
    }
    merge_runs(out, (size_t)nr, rc, P); /* P sorted runs, in rank order */
    free(ci);
    MPI_Exscan(&nr, off, 1, MPI_INT64_T, MPI_SUM, comm);
    if (rank == 0) *off = 0;
    *keys = out, *n_out = nr;
    return 0;
oom:
    free(k);
    *keys = NULL;
    snprintf(err, errlen, "parallel sort: out of memory");
    return 1;
}
