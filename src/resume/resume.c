/* resume.c - see resume.h */
#include "resume.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "h5io.h"
#include "pack.h"
#include "agree.h"
#include "util.h"

void ghf_params_pack(const ghf_params *t, double *buf)
{
    const int d = t->d;
    memcpy(buf, t->mu, (size_t)d * sizeof(double));
    memcpy(buf + d, t->gamma, (size_t)d * sizeof(double));
    int o = 2 * d;
    if (t->disp) { /* diag, factor: B [d*nf], D [d] */
        if (t->nf > 0) memcpy(buf + o, t->B, (size_t)d * t->nf * sizeof(double));
        o += d * t->nf;
        memcpy(buf + o, t->D, (size_t)d * sizeof(double));
        o += d;
    } else {
        memcpy(buf + o, t->sigma, (size_t)d * d * sizeof(double));
        o += d * d;
    }
    buf[o] = t->p;
    buf[o + 1] = t->a;
    buf[o + 2] = t->b;
}

void ghf_params_unpack(const double *buf, ghf_params *t)
{
    const int d = t->d;
    memcpy(t->mu, buf, (size_t)d * sizeof(double));
    memcpy(t->gamma, buf + d, (size_t)d * sizeof(double));
    int o = 2 * d;
    if (t->disp) {
        if (t->nf > 0) memcpy(t->B, buf + o, (size_t)d * t->nf * sizeof(double));
        o += d * t->nf;
        memcpy(t->D, buf + o, (size_t)d * sizeof(double));
        o += d;
    } else {
        memcpy(t->sigma, buf + o, (size_t)d * d * sizeof(double));
        o += d * d;
    }
    t->p = buf[o];
    t->a = buf[o + 1];
    t->b = buf[o + 2];
}

void ghf_ckpt_run_clear(ghf_ckpt_run *r)
{
    free(r->cur);
    free(r->prev);
    free(r->trace);
    memset(r, 0, sizeof *r);
}

int ghf_ckpt_run_set(ghf_ckpt_run *r, int64_t index, const char *name, const ghf_em_state *st)
{
    const int d = st->cur.d;
    const int disp = st->cur.disp, nf = st->cur.disp ? st->cur.nf : 0;
    const int np = ghf_ckpt_run_len(d, disp, nf);
    if (r->d != d || r->disp != disp || r->nf != nf || !r->cur || !r->prev) {
        free(r->cur);
        free(r->prev);
        r->cur = malloc((size_t)np * sizeof(double));
        r->prev = malloc((size_t)np * sizeof(double));
    }
    free(r->trace);
    r->trace = malloc((size_t)(st->iter > 0 ? st->iter : 1) * sizeof(double));
    if (!r->cur || !r->prev || !r->trace) return -1;
    r->index = index;
    if (name != r->name) snprintf(r->name, sizeof r->name, "%s", name);
    r->d = d;
    r->disp = disp;
    r->nf = nf;
    r->iter = st->iter;
    ghf_params_pack(&st->cur, r->cur);
    if (st->iter > 0) ghf_params_pack(&st->prev, r->prev);
    else ghf_params_pack(&st->cur, r->prev);
    if (st->iter > 0) memcpy(r->trace, st->trace, (size_t)st->iter * sizeof(double));
    return 0;
}

int ghf_ckpt_run_to_state(const ghf_ckpt_run *r, int max_iter, ghf_em_state *st)
{
    if (ghf_em_state_alloc(st, r->d, max_iter > r->iter ? max_iter : r->iter) != 0) return -1;
    if (r->disp) { /* diag, factor: B and D instead of sigma */
        ghf_params_free(&st->cur);
        ghf_params_free(&st->prev);
        if (ghf_params_alloc_factor(&st->cur, r->d, r->nf, 0) || ghf_params_alloc_factor(&st->prev, r->d, r->nf, 0)) {
            ghf_em_state_free(st);
            return -1;
        }
    }
    st->iter = r->iter;
    ghf_params_unpack(r->cur, &st->cur);
    ghf_params_unpack(r->prev, &st->prev);
    if (r->iter > 0) memcpy(st->trace, r->trace, (size_t)r->iter * sizeof(double));
    return 0;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

int ghf_ckpt_set_id(ghf_ckpt *c, const ghf_ckpt_id *id)
{
    snprintf(c->kind, sizeof c->kind, "%s", id->kind);
    free(c->data_path);
    free(c->dataset);
    free(c->config_text);
    char real[PATH_MAX];
    c->data_path = dup_or_empty(realpath(id->data_path, real) ? real : id->data_path);
    c->dataset = dup_or_empty(id->dataset && *id->dataset ? id->dataset : "/X");
    c->config_text = id->config_text ? strdup(id->config_text) : NULL;
    c->n_rows = id->n_rows;
    c->d = id->d;
    c->hash = id->hash;
    c->n_fits = id->n_fits;
    c->data_fp = id->data_fp;
    c->data_fp_rows = id->data_fp_rows;
    c->data_sum = id->data_sum;
    c->weights_sum = id->weights_sum;
    return c->data_path && c->dataset ? 0 : -1;
}

/* Collective: the checksum of every value of path:dataset, on rank 0. */
static int checksum_all(MPI_Comm comm, const char *path, const char *dataset, uint64_t *sum, char *err, size_t errlen)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    uint32_t cr = 0, ad = 0;
    int64_t nb = 0;
    int st = ghf_ckpt_rows_checksum(path, dataset, rank, size, &cr, &ad, &nb, err, errlen);
    if ((st = ghf_agree(comm, st, err, errlen)) != 0) return st;
    int64_t mine[3] = {cr, ad, nb}, *all = NULL;
    int oom = 0;
    if (rank == 0) oom = !(all = malloc((size_t)size * sizeof mine));
    if (ghf_any(comm, oom)) {
        snprintf(err, errlen, "out of memory (the data's checksum on %d ranks)", size);
        return GHF_EXIT_RUNTIME;
    }
    MPI_Gather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, 0, comm);
    if (rank == 0) {
        uint32_t *c = malloc((size_t)size * sizeof *c), *a = malloc((size_t)size * sizeof *a);
        int64_t *n = malloc((size_t)size * sizeof *n);
        if (c && a && n) {
            for (int r = 0; r < size; r++) {
                c[r] = (uint32_t)all[3 * r];
                a[r] = (uint32_t)all[3 * r + 1];
                n[r] = all[3 * r + 2];
            }
            *sum = ghf_ckpt_checksum_combine(size, c, a, n);
        } else {
            *sum = 0; /* out of memory on rank 0: compared by the sampled fingerprint only */
        }
        free(c), free(a), free(n);
    }
    free(all);
    return 0;
}

int ghf_ckpt_id_fingerprint(MPI_Comm comm, ghf_ckpt_id *id, char *err, size_t errlen)
{
    int rank, st = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) st = ghf_ckpt_data_fingerprint(id->data_path, id->dataset, &id->data_fp, &id->data_fp_rows, err, errlen);
    ghf_bcast_status(comm, &st, err, errlen);
    if (!st) st = checksum_all(comm, id->data_path, id->dataset, &id->data_sum, err, errlen);
    if (!st && id->weights) {
        char file[4096], ds[1024];
        const char *c = strrchr(id->weights, ':');
        snprintf(file, sizeof file, "%.*s", c ? (int)(c - id->weights) : 0, id->weights);
        snprintf(ds, sizeof ds, "%s", c ? c + 1 : id->weights);
        st = checksum_all(comm, file, ds, &id->weights_sum, err, errlen);
    }
    return st;
}

/* ---- the whole checkpoint as bytes (for the broadcast) ---- */

static void pack_ckpt(ghf_pack *b, const ghf_ckpt *c)
{
    ghf_pack_str(b, c->kind);
    ghf_pack_str(b, c->data_path);
    ghf_pack_str(b, c->dataset);
    ghf_pack_i64(b, c->n_rows);
    ghf_pack_i64(b, c->d);
    ghf_pack_i64(b, (int64_t)c->hash);
    ghf_pack_i64(b, c->n_fits);
    ghf_pack_str(b, c->config_text);
    ghf_pack_i64(b, c->n_run);
    for (int i = 0; i < c->n_run; i++) {
        const ghf_ckpt_run *r = &c->run[i];
        const int np = ghf_ckpt_run_len(r->d, r->disp, r->nf);
        ghf_pack_i64(b, r->index);
        ghf_pack_str(b, r->name);
        ghf_pack_i64(b, r->d);
        ghf_pack_i64(b, r->disp);
        ghf_pack_i64(b, r->nf);
        ghf_pack_i64(b, r->iter);
        ghf_pack_f64s(b, r->cur, np);
        ghf_pack_f64s(b, r->prev, np);
        ghf_pack_f64s(b, r->trace, r->iter);
    }
    ghf_pack_i64(b, c->n_done);
    for (int i = 0; i < c->n_done; i++) ghf_pack_i64(b, c->done_index[i]);
    for (int i = 0; i <= c->n_done; i++) ghf_pack_i64(b, c->n_done ? c->done_off[i] : 0);
    const int64_t nb = c->n_done ? c->done_off[c->n_done] : 0;
    ghf_pack_i64(b, nb);
    ghf_pack_bytes(b, c->done_blob, (size_t)nb);
}

static int unpack_ckpt(ghf_unpack *u, ghf_ckpt *c)
{
    memset(c, 0, sizeof *c);
    char *kind = ghf_unpack_str(u);
    snprintf(c->kind, sizeof c->kind, "%s", kind ? kind : "");
    free(kind);
    c->data_path = ghf_unpack_str(u);
    c->dataset = ghf_unpack_str(u);
    c->n_rows = ghf_unpack_i64(u);
    c->d = (int)ghf_unpack_i64(u);
    c->hash = (uint64_t)ghf_unpack_i64(u);
    c->n_fits = ghf_unpack_i64(u);
    c->config_text = ghf_unpack_str(u);
    const int64_t nr = ghf_unpack_i64(u);
    if (u->bad || nr < 0 || nr > 1 << 24) return -1;
    c->run = calloc((size_t)nr + 1, sizeof *c->run);
    if (!c->run) return -1;
    for (int64_t i = 0; i < nr && !u->bad; i++) {
        ghf_ckpt_run *r = &c->run[c->n_run++];
        int64_t n;
        r->index = ghf_unpack_i64(u);
        char *nm = ghf_unpack_str(u);
        snprintf(r->name, sizeof r->name, "%s", nm ? nm : "");
        free(nm);
        r->d = (int)ghf_unpack_i64(u);
        r->disp = (int)ghf_unpack_i64(u);
        r->nf = (int)ghf_unpack_i64(u);
        r->iter = (int)ghf_unpack_i64(u);
        r->cur = ghf_unpack_f64s(u, &n);
        r->prev = ghf_unpack_f64s(u, &n);
        r->trace = ghf_unpack_f64s(u, &n);
    }
    const int64_t nd = ghf_unpack_i64(u);
    if (u->bad || nd < 0 || nd > 1 << 28) return -1;
    c->n_done = (int)nd;
    c->done_index = malloc((size_t)(nd + 1) * sizeof(int64_t));
    c->done_off = malloc((size_t)(nd + 1) * sizeof(int64_t));
    if (!c->done_index || !c->done_off) return -1;
    for (int64_t i = 0; i < nd; i++) c->done_index[i] = ghf_unpack_i64(u);
    for (int64_t i = 0; i <= nd; i++) c->done_off[i] = ghf_unpack_i64(u);
    const int64_t nb = ghf_unpack_i64(u);
    if (u->bad || nb < 0 || (size_t)nb > u->n - u->off) return -1;
    c->done_blob = malloc((size_t)(nb > 0 ? nb : 1));
    if (!c->done_blob) return -1;
    memcpy(c->done_blob, u->p + u->off, (size_t)nb);
    u->off += (size_t)nb;
    return u->bad ? -1 : 0;
}

static int check_id(const ghf_ckpt *c, const ghf_ckpt_id *id, const char *path, char *err, size_t errlen)
{
    char real[PATH_MAX];
    const char *dp = realpath(id->data_path, real) ? real : id->data_path;
    const char *ds = id->dataset && *id->dataset ? id->dataset : "/X";
    char what[1024] = "";
    if (strcmp(c->kind, id->kind) != 0)
        snprintf(what, sizeof what, "it was written by 'ghfit %s', not 'ghfit %s'", c->kind, id->kind);
    else if (strcmp(c->data_path, dp) != 0)
        snprintf(what, sizeof what, "its data file is %.480s, not %.480s", c->data_path, dp);
    else if (strcmp(c->dataset, ds) != 0)
        snprintf(what, sizeof what, "its dataset is %.480s, not %.480s", c->dataset, ds);
    else if (c->n_rows != id->n_rows || c->d != id->d)
        snprintf(what, sizeof what, "its data had %lld x %d values, these have %lld x %d", (long long)c->n_rows, c->d,
                 (long long)id->n_rows, id->d);
    else if (id->data_fp && c->data_fp != id->data_fp)
        snprintf(what, sizeof what,
                 "it was written for other data of the same shape (fingerprint of %lld sampled rows %016" PRIx64
                 ", these data %016" PRIx64 ")",
                 (long long)id->data_fp_rows, c->data_fp, id->data_fp);
    else if (id->data_sum && c->data_sum && c->data_sum != id->data_sum)
        snprintf(what, sizeof what,
                 "it was written for other data of the same shape (the same %lld sampled rows, but the checksum of "
                 "every value is %016" PRIx64 ", these data %016" PRIx64 ")",
                 (long long)id->data_fp_rows, c->data_sum, id->data_sum);
    else if (id->weights_sum && c->weights_sum && c->weights_sum != id->weights_sum)
        snprintf(what, sizeof what,
                 "it was written for other weights (%.480s: the checksum of every weight is %016" PRIx64
                 ", these %016" PRIx64 ")",
                 id->weights ? id->weights : "", c->weights_sum, id->weights_sum);
    else if (c->hash != id->hash || c->n_fits != id->n_fits)
        snprintf(what, sizeof what, "it was written with other options (options hash %016" PRIx64 ", this run %016" PRIx64 ")",
                 c->hash, id->hash);
    if (!what[0]) return 0;
    snprintf(err, errlen, "%s: the checkpoint does not belong to this run: %s (remove it, or run without --resume)", path,
             what);
    return 2;
}

/* The first invalid value of a packed parameter set (what = "cur" or
 * "prev"; full: the model's domain too), or 0. */
static int bad_params(const double *v, const ghf_ckpt_run *r, const char *what, int full, char *out, size_t len)
{
    const int d = r->d, disp = r->disp, nf = r->nf;
    const char *family = r->family;
    const int np = ghf_ckpt_run_len(d, disp, nf);
    for (int i = 0; i < np; i++) {
        if (isfinite(v[i])) continue;
        if (i < d) snprintf(out, len, "%s.mu[%d] = %g", what, i, v[i]);
        else if (i < 2 * d) snprintf(out, len, "%s.gamma[%d] = %g", what, i - d, v[i]);
        else if (disp && i < 2 * d + d * nf) snprintf(out, len, "%s.B[%d][%d] = %g", what, (i - 2 * d) / nf, (i - 2 * d) % nf, v[i]);
        else if (disp && i < 3 * d + d * nf) snprintf(out, len, "%s.D[%d] = %g", what, i - 2 * d - d * nf, v[i]);
        else if (i < 2 * d + d * d) snprintf(out, len, "%s.sigma[%d][%d] = %g", what, (i - 2 * d) / d, (i - 2 * d) % d, v[i]);
        else snprintf(out, len, "%s.%s = %g", what, i == np - 3 ? "p" : i == np - 2 ? "a" : "b", v[i]);
        return 1;
    }
    if (!full) return 0;
    const double p = v[np - 3], a = v[np - 2], b = v[np - 1];
    ghf_model m = {GHF_FAMILY_GH, 0, 0, 0.0};
    const int known = family[0] && ghf_family_parse(family, &m.family) == 0;
    char why[200];
    if (family[0] && !known) snprintf(out, len, "family '%s' is unknown", family);
    else if (known && !ghf_model_sub_ok(&m, d, p, a, b, why, sizeof why)) snprintf(out, len, "%s.%s", what, why);
    else if (fabs(p) > GHF_P_MAX_ANY) snprintf(out, len, "%s.p = %g is outside [-%g, %g]", what, p, GHF_P_MAX_ANY, GHF_P_MAX_ANY);
    else if (a < 0.0 || b < 0.0 || (a == 0.0 && b == 0.0))
        snprintf(out, len, "%s.a = %g, %s.b = %g: not a GIG law (a, b >= 0, not both 0)", what, a, what, b);
    else if (disp) {
        if (isfinite(ghf_factor_logdet(d, nf, v + 2 * d, v + 2 * d + d * nf))) return 0;
        snprintf(out, len, "%s: B B' + D is not positive definite (D must be positive)", what);
    } else {
        ghf_params t;
        ghf_derived g;
        int rc = -1;
        if (ghf_params_alloc(&t, d) == 0 && ghf_derived_alloc(&g, d) == 0) {
            ghf_params_unpack(v, &t);
            rc = ghf_derive(&t, &g);
            ghf_derived_free(&g);
        }
        ghf_params_free(&t);
        if (rc == 0) return 0;
        snprintf(out, len, "%s.sigma is not symmetric positive definite (or the law's constants are not finite)", what);
    }
    return 1;
}

/* Rank 0: the EM states must be usable: finite, cur in the model's domain. */
static int validate(const ghf_ckpt *c, const char *path, char *err, size_t errlen)
{
    for (int i = 0; i < c->n_run; i++) {
        const ghf_ckpt_run *r = &c->run[i];
        char what[256] = "";
        if (r->d != c->d) snprintf(what, sizeof what, "dim = %d, the data have %d columns", r->d, c->d);
        else if (r->iter < 0) snprintf(what, sizeof what, "iter = %d", r->iter);
        else if (!bad_params(r->cur, r, "cur", 1, what, sizeof what) &&
                 !bad_params(r->prev, r, "prev", 0, what, sizeof what))
            for (int k = 0; k < r->iter && !what[0]; k++)
                if (!isfinite(r->trace[k])) snprintf(what, sizeof what, "trace[%d] = %g", k, r->trace[k]);
        if (what[0]) {
            snprintf(err, errlen, "%s: invalid checkpoint: running/%d (fit %s): %s", path, i, r->name, what);
            return 2;
        }
    }
    return 0;
}

static int read_valid(const char *path, ghf_ckpt *c, char *err, size_t errlen)
{
    int st = ghf_ckpt_read(path, c, err, errlen);
    if (!st) st = validate(c, path, err, errlen);
    if (st) ghf_ckpt_free(c);
    return st;
}

int ghf_ckpt_load_local(const char *path, const ghf_ckpt_id *id, ghf_ckpt *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    int st = read_valid(path, c, err, errlen);
    if (st) {
        char prev[4200], err2[1024];
        ghf_ckpt_prev_path(path, prev, sizeof prev);
        if (access(prev, F_OK) == 0 && read_valid(prev, c, err2, sizeof err2) == 0) {
            fprintf(stderr, "ghfit: warning: %s; resuming from the previous checkpoint %s\n", err, prev);
            st = 0;
        }
    }
    if (st == 0) st = check_id(c, id, path, err, errlen);
    if (st) ghf_ckpt_free(c);
    return st;
}

int ghf_ckpt_load(MPI_Comm comm, const char *path, const ghf_ckpt_id *id, ghf_ckpt *c, char *err, size_t errlen)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    memset(c, 0, sizeof *c);
    int st = 0;
    ghf_pack b = {0};
    if (rank == 0) {
        st = ghf_ckpt_load_local(path, id, c, err, errlen);
        if (st == 0) {
            pack_ckpt(&b, c);
            if (b.oom) {
                st = 1;
                snprintf(err, errlen, "out of memory");
            }
        }
    }
    ghf_bcast_status(comm, &st, err, errlen);
    if (st) {
        ghf_ckpt_free(c);
        ghf_pack_free(&b);
        return st;
    }
    int64_t nb = (int64_t)b.n;
    MPI_Bcast(&nb, 1, MPI_INT64_T, 0, comm);
    char msg[256] = "";
    int oom = 0;
    if (rank != 0) {
        b.p = ghf_test_fail("ckpt_bcast", NULL, 0) ? NULL : malloc((size_t)(nb > 0 ? nb : 1));
        b.n = b.cap = b.p ? (size_t)nb : 0;
        if (!b.p) {
            oom = 1;
            snprintf(msg, sizeof msg, "%s: rank %d: out of memory for the checkpoint (%lld bytes) to be distributed",
                     path, rank, (long long)nb);
        }
    }
    /* agreed before the broadcast: no rank receives into a buffer it has not got */
    if (ghf_agree(comm, oom, msg, sizeof msg)) {
        ghf_ckpt_free(c);
        ghf_pack_free(&b);
        snprintf(err, errlen, "%s", msg);
        return 1;
    }
    /* in pieces below 2^31 bytes */
    for (int64_t off = 0; off < nb; off += 1 << 30) {
        const int64_t k = nb - off < (1 << 30) ? nb - off : (1 << 30);
        MPI_Bcast(b.p + off, (int)k, MPI_BYTE, 0, comm);
    }
    if (rank != 0) {
        ghf_unpack u = {b.p, b.n, 0, 0};
        if (unpack_ckpt(&u, c) != 0) st = 1;
    }
    ghf_pack_free(&b);
    st = ghf_any(comm, st) ? 1 : 0;
    if (st) {
        ghf_ckpt_free(c);
        snprintf(err, errlen, "%s: the checkpoint could not be distributed to every rank", path);
    }
    return st;
}

void ghf_ckpt_remove(const char *path)
{
    char prev[4200], log[4200];
    ghf_ckpt_prev_path(path, prev, sizeof prev);
    ghf_ckpt_log_path(path, log, sizeof log);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path); /* left by a writer killed mid-write */
    /* only ghfit's own files (a file put there since the start stays) */
    if (ghf_path_is_ghfit(path, GHF_PATH_CHECKPOINT, NULL)) unlink(path);
    if (ghf_path_is_ghfit(prev, GHF_PATH_CHECKPOINT, NULL)) unlink(prev);
    if (ghf_ckpt_log_is_ours(log)) unlink(log);
    if (ghf_ckpt_is_ours(tmp)) unlink(tmp);
}

int ghf_ckpt_test_iter_sleep_ms(void)
{
    const char *s = getenv("GHFIT_TEST_ITER_SLEEP");
    return s ? atoi(s) : 0;
}

void ghf_sleep_ms(int ms)
{
    if (ms <= 0) return;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}



