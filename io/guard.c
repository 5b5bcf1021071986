/* guard.c - what ghfit may write, replace or remove: files compared by
 * identity (device and inode, or resolved directory + name for a file that
 * does not exist yet), only regular files written, only files that carry
 * ghfit's own signature replaced or removed, and a lock on every output held
 * for the whole run (see ghf_paths_check and ghf_out_lock in h5io.h). */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, gethostname */
#endif

/* standard headers */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* this module */
#include "h5internal.h"

/* ---------------------------------------------------------------------------
 * Identity
 * ------------------------------------------------------------------------- */

/* A path's identity: the file it names (exists), or the directory that
 * would hold it plus its name (not yet). known = 0: cannot tell (the
 * directory does not exist either): equal to nothing. */
typedef struct path_id {
    int known, exists;
    dev_t dev;
    ino_t ino;
    const char *name; /* last component, when !exists */
    size_t name_len;
} path_id;

static void get_id(const char *path, path_id *id)
{
    memset(id, 0, sizeof *id);
    struct stat st;
    if (stat(path, &st) == 0) {
        id->known = id->exists = 1;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        return;
    }
    /* not there (or a dangling link, which a rename replaces): its directory + name */
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0) return;
    id->known = 1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->name = slash ? slash + 1 : path;
    id->name_len = strlen(id->name);
}

static int same_id(const path_id *a, const path_id *b)
{
    if (!a->known || !b->known || a->exists != b->exists || a->dev != b->dev || a->ino != b->ino) return 0;
    return a->exists || (a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0);
}

int ghf_same_file(const char *a, const char *b)
{
    path_id ia, ib;
    get_id(a, &ia);
    get_id(b, &ib);
    return same_id(&ia, &ib);
}

/* ---------------------------------------------------------------------------
 * Signatures
 * ------------------------------------------------------------------------- */

static hid_t open_quiet(const char *path)
{
    ghf__h5_quiet();
    if (H5Fis_hdf5(path) <= 0) return -1;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
    H5Pset_file_locking(fapl, 0, 1); /* a look at root attributes: never blocked by a lock */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    return f;
}

/* Root attribute `name` holds the string `want` (want NULL: exists). */
static int has_attr(hid_t loc, const char *name, const char *want)
{
    if (H5Aexists(loc, name) <= 0) return 0;
    if (!want) return 1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a);
    int ok = 0;
    if (H5Tget_class(t) == H5T_STRING) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_cset(mt, H5Tget_cset(t)); /* no ASCII <-> UTF-8 conversion in HDF5 */
        if (H5Tis_variable_str(t) > 0) {
            char *s = NULL;
            H5Tset_size(mt, H5T_VARIABLE);
            if (H5Aread(a, mt, &s) >= 0 && s) ok = strcmp(s, want) == 0;
            H5free_memory(s);
        } else {
            char buf[64] = "";
            const size_t n = H5Tget_size(t);
            if (n < sizeof buf) {
                H5Tset_size(mt, n + 1);
                if (H5Aread(a, mt, buf) >= 0) ok = strcmp(buf, want) == 0;
            }
        }
        H5Tclose(mt);
    }
    H5Tclose(t);
    H5Aclose(a);
    return ok;
}

/* A data set written by `ghfit generate`: the root attribute of this
 * version, or (older versions) the generator's attributes on the dataset. */
static int is_matrix(hid_t f, const char *dataset)
{
    if (has_attr(f, GHF_MATRIX_SIGNATURE, NULL)) return 1;
    const char *dn = ghf__dsname(dataset);
    if (H5Lexists(f, dn, H5P_DEFAULT) <= 0 || H5Oexists_by_name(f, dn, H5P_DEFAULT) <= 0) return 0;
    hid_t ds = H5Dopen2(f, dn, H5P_DEFAULT);
    if (ds < 0) return 0;
    const int ok = has_attr(ds, "model", NULL) && has_attr(ds, "seed", NULL) && has_attr(ds, "command_line", NULL);
    H5Dclose(ds);
    return ok;
}

/* A root dataset with the attribute fit_name: a data set drawn by `ghfit sample`. */
static herr_t sampled_cb(hid_t g, const char *name, const H5L_info_t *info, void *op)
{
    (void)info;
    if (H5Oexists_by_name(g, name, H5P_DEFAULT) <= 0) return 0;
    int *found = (int *)op;
    if (H5Aexists_by_name(g, name, "fit_name", H5P_DEFAULT) > 0) *found = 1;
    return *found;
}

static int is_sampled(hid_t f)
{
    int found = 0;
    hsize_t idx = 0;
    H5Literate(f, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, sampled_cb, &found);
    return found;
}

int ghf_path_is_ghfit(const char *path, ghf_path_kind kind, const char *dataset)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    /* a checkpoint carries its signature in the user block (also when it is
     * damaged or truncated: the resume then says what is wrong with it) */
    if (kind == GHF_PATH_CHECKPOINT && ghf__file_starts_with(path, GHF__CKPT_MAGIC, 8)) return 1;
    hid_t f = open_quiet(path);
    if (f < 0) return 0;
    int ok = 0;
    /* each command replaces only its own kind: a fit result has no root
     * attribute `content` (risk and gof files, which also carry
     * ghfit_version, do) */
    if (kind == GHF_PATH_RESULT) ok = has_attr(f, "ghfit_version", NULL) && !has_attr(f, "content", NULL);
    else if (kind == GHF_PATH_RISK) ok = has_attr(f, "ghfit_version", NULL) && has_attr(f, "content", "risk");
    else if (kind == GHF_PATH_GOF) ok = has_attr(f, "ghfit_version", NULL) && has_attr(f, "content", "gof");
    else if (kind == GHF_PATH_OPTIMIZE) ok = has_attr(f, "ghfit_version", NULL) && has_attr(f, "content", "optimize");
    else if (kind == GHF_PATH_CHECKPOINT) ok = has_attr(f, "format", "ghfit-checkpoint");
    else if (kind == GHF_PATH_MATRIX) ok = is_matrix(f, dataset) && !is_sampled(f);
    else if (kind == GHF_PATH_SAMPLE) ok = is_matrix(f, dataset) && is_sampled(f);
    else if (kind == GHF_PATH_SCORES) ok = has_attr(f, "ghfit_scores_version", NULL);
    H5Fclose(f);
    return ok;
}

const char *ghf_path_what(const char *path)
{
    static const ghf_path_kind kinds[] = {GHF_PATH_RESULT, GHF_PATH_RISK,   GHF_PATH_GOF,        GHF_PATH_OPTIMIZE,
                                          GHF_PATH_SCORES, GHF_PATH_MATRIX, GHF_PATH_SAMPLE,     GHF_PATH_CHECKPOINT};
    static const char *names[] = {"a ghfit fit result",   "a ghfit risk output",
                                  "a ghfit gof output",   "a ghfit optimize output",
                                  "a ghfit eval output",
                                  "a data set written by ghfit generate", "a data set written by ghfit sample",
                                  "a ghfit checkpoint"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (ghf_path_is_ghfit(path, kinds[i], NULL)) return names[i];
    return "";
}

static const char *kind_noun(ghf_path_kind k)
{
    switch (k) {
    case GHF_PATH_RESULT: return "a ghfit result file (root attribute ghfit_version, no root attribute content)";
    case GHF_PATH_RISK: return "a ghfit risk output (root attribute content = \"risk\")";
    case GHF_PATH_GOF: return "a ghfit gof output (root attribute content = \"gof\")";
    case GHF_PATH_OPTIMIZE: return "a ghfit optimize output (root attribute content = \"optimize\")";
    case GHF_PATH_CHECKPOINT: return "a ghfit checkpoint (no root attribute format = \"ghfit-checkpoint\")";
    case GHF_PATH_MATRIX: return "a data set written by ghfit generate";
    case GHF_PATH_SAMPLE: return "a data set written by ghfit sample (a dataset with the attribute fit_name)";
    case GHF_PATH_SCORES: return "a ghfit eval output (no root attribute ghfit_scores_version)";
    default: return "a ghfit file";
    }
}

/* ---------------------------------------------------------------------------
 * The check
 * ------------------------------------------------------------------------- */

static int check_output(const ghf_path_use *u, char *err, size_t errlen)
{
    struct stat st;
    if (stat(u->path, &st) != 0) return 0; /* created by the run */
    if (!S_ISREG(st.st_mode)) {
        ghf__seterr(err, errlen, "%s %s is a %s, not a regular file: ghfit writes only regular files", u->what,
                    u->path, ghf__file_type_name(st.st_mode));
        return 2;
    }
    if (!ghf_path_is_ghfit(u->path, u->kind, u->dataset)) {
        const char *is = ghf_path_what(u->path);
        ghf__seterr(err, errlen,
                    "%s %s exists and is not %s%s%s%s: ghfit replaces or removes only its own files, and each command "
                    "only its own kind (remove it, or choose another name)",
                    u->what, u->path, kind_noun(u->kind), *is ? " (it is " : "", is, *is ? ")" : "");
        return 2;
    }
    return 0;
}

int ghf_paths_check(const ghf_path_use *u, int n, char *err, size_t errlen)
{
    if (n <= 0) return 0;
    path_id *ids = (path_id *)calloc((size_t)n, sizeof *ids);
    if (!ids) {
        ghf__seterr(err, errlen, "out of memory");
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) get_id(u[i].path, &ids[i]);
    for (int i = 0; i < n && !rc; i++)
        for (int j = i + 1; j < n && !rc; j++)
            if (same_id(&ids[i], &ids[j])) {
                ghf__seterr(err, errlen, "%s %s and %s %s are the same file: %s", u[i].what, u[i].path,
                            u[j].what, u[j].path,
                            u[i].kind == GHF_PATH_INPUT && u[j].kind == GHF_PATH_INPUT
                                ? "give it once"
                                : "an output must not replace an input or another output");
                rc = 2;
            }
    for (int i = 0; i < n && !rc; i++)
        if (u[i].kind != GHF_PATH_INPUT) rc = check_output(&u[i], err, errlen);
    free(ids);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Output locks: "<path>.lock", an fcntl write lock held by rank 0
 * ------------------------------------------------------------------------- */

#define LOCK_MAGIC "ghfit lock"
#define MAX_LOCKS 8

typedef struct out_lock {
    char *lock_path;
    int fd;
} out_lock;

static out_lock g_locks[MAX_LOCKS];
/* atomic (lock-free, seq_cst): a slot is counted only once it is filled, and
 * uncounted before it is emptied, as ghf_out_abandon in a signal handler sees it */
static _Atomic int g_n_locks = 0;
static int g_atexit = 0;

static void unlock_all_atexit(void) { ghf_out_unlock_all(); }

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first, before its own
 * synchronisation: the locks are released there, so that no rank can end
 * (and mpirun, seeing an error status, kill rank 0 before its exit
 * handlers ran) while rank 0 still holds them.  atexit covers the rest. */
static int g_keyval_set = 0;

static int unlock_all_at_finalize(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)attr;
    (void)extra;
    ghf_out_unlock_all();
    return MPI_SUCCESS;
}

static void release_at_finalize(void)
{
    int init = 0, fin = 0, kv = MPI_KEYVAL_INVALID;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (g_keyval_set || !init || fin) return;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, unlock_all_at_finalize, &kv, NULL) == MPI_SUCCESS &&
        MPI_Comm_set_attr(MPI_COMM_SELF, kv, NULL) == MPI_SUCCESS)
        g_keyval_set = 1;
}

/* What the holder wrote into the lock file, as one short phrase. */
static void holder_text(int fd, pid_t lk_pid, char *buf, size_t len)
{
    char raw[512] = "";
    const ssize_t k = pread(fd, raw, sizeof raw - 1, 0);
    raw[k > 0 ? k : 0] = '\0';
    long pid = 0;
    char host[256] = "", since[64] = "";
    if (sscanf(raw, LOCK_MAGIC " pid %ld host %255s since %63s", &pid, host, since) == 3)
        snprintf(buf, len, "pid %ld on host %s, since %s", pid, host, since);
    else if (lk_pid > 0)
        snprintf(buf, len, "pid %ld", (long)lk_pid);
    else
        snprintf(buf, len, "a process on another host");
}

/* Opens (creating) the lock file; status 0 with *fd, or 2 with a message. */
static int open_lock_file(const char *out, const char *lp, int *fd, char *err, size_t errlen)
{
    *fd = open(lp, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (*fd < 0) {
        ghf__seterr(err, errlen, "%s: cannot create the lock file %s: %s", out, lp, strerror(errno));
        return 2;
    }
    struct stat st;
    char head[sizeof LOCK_MAGIC] = "";
    const ssize_t k = fstat(*fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(*fd, head, sizeof head - 1, 0) : -1;
    if (k < 0 || (k > 0 && strncmp(head, LOCK_MAGIC, (size_t)k) != 0)) { /* empty: a lock that died young */
        ghf__seterr(err, errlen, "%s: %s exists and is not a ghfit lock file: ghfit will not touch it (remove it, "
                    "or choose another name)", out, lp);
        close(*fd);
        *fd = -1;
        return 2;
    }
    return 0;
}

/* The temporary files of a writer that died holding the lock of `path`
 * (SIGKILL, a crash, a node lost: no clean-up ran), named after its pid as
 * ghfit names them: "<path>.tmp.<pid>", "<path>.tmp.<pid>.<k>" (k < 100,
 * io/h5common.c create_tmp) and "<path>.tmp.<pid>.probe" (the writable-directory
 * probe), and for a checkpoint "<path>.tmp" when it begins with ghfit's
 * checkpoint header (io/h5ckpt.c: written only by the lock's holder).  `old`
 * is what the dead holder wrote into the lock file; called with the lock
 * held, so that holder has ended (a live one would hold it) and no other
 * ghfit process writes these names.  Only regular files are removed, only on
 * the holder's own host (pids are per host); on another host they are named
 * in a warning and left. */
static void remove_stale_tmp(const char *path, const char *old)
{
    long pid = 0;
    char host[256] = "", since[64] = "", me[256] = "unknown";
    if (sscanf(old, LOCK_MAGIC " pid %ld host %255s since %63s", &pid, host, since) != 3 || pid <= 0 ||
        pid == (long)getpid())
        return;
    gethostname(me, sizeof me - 1);
    for (char *c = me; *c; c++)
        if (*c == ' ') *c = '_';
    const int here = strcmp(host, me) == 0;
    const size_t n = strlen(path) + 48;
    char *t = (char *)malloc(n);
    if (!t) return;
    for (int k = -2; k < 100; k++) {
        if (k == -2) snprintf(t, n, "%s.tmp", path);
        else if (k == -1) snprintf(t, n, "%s.tmp.%ld.probe", path, pid);
        else if (k == 0) snprintf(t, n, "%s.tmp.%ld", path, pid);
        else snprintf(t, n, "%s.tmp.%ld.%d", path, pid, k);
        struct stat st;
        if (lstat(t, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (k == -2 && !ghf__file_starts_with(t, GHF__CKPT_MAGIC, 8)) continue;
        if (!here)
            fprintf(stderr, "ghfit: warning: %s: %s may be the temporary file of pid %ld on host %s, which held "
                    "the lock %s.lock and ended without removing it: left in place (remove it once no ghfit "
                    "runs there)\n", path, t, pid, host, path);
        else if (unlink(t) == 0)
            fprintf(stderr, "ghfit: note: %s: removed %s, left by pid %ld (since %s), which ended while writing "
                    "this file\n", path, t, pid, since);
    }
    free(t);
}

int ghf_out_lock(const char *path, char *err, size_t errlen)
{
    if (g_n_locks >= MAX_LOCKS) {
        ghf__seterr(err, errlen, "%s: too many output locks", path);
        return 1;
    }
    const size_t n = strlen(path) + 8;
    char *lp = (char *)malloc(n);
    if (!lp) {
        ghf__seterr(err, errlen, "%s: out of memory", path);
        return 1;
    }
    snprintf(lp, n, "%s.lock", path);
    ghf__seterr(err, errlen, "%s: cannot take the lock %s (it keeps being replaced)", path, lp);
    for (int attempt = 0; attempt < 16; attempt++) {
        int fd;
        if (open_lock_file(path, lp, &fd, err, errlen)) break;
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            const int e = errno;
            if (e == EACCES || e == EAGAIN) {
                struct flock q = fl;
                pid_t who = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? q.l_pid : 0;
                char h[400];
                holder_text(fd, who, h, sizeof h);
                ghf__seterr(err, errlen, "%s: another ghfit process is writing this file (%s; lock file %s): wait "
                            "for it to end, or choose another name", path, h, lp);
            } else {
                /* no lock support here (e.g. an NFS mount without lockd): go on unguarded */
                fprintf(stderr, "ghfit: warning: %s: cannot lock %s (%s): a concurrent writer of this file "
                        "would not be detected\n", path, lp, strerror(e));
                close(fd);
                unlink(lp);
                free(lp);
                return 0;
            }
            close(fd);
            break;
        }
        /* the file we locked must still be the one at lp (a releasing holder unlinks it) */
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(lp, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            close(fd);
            continue;
        }
        char old[512] = "";
        const ssize_t ko = pread(fd, old, sizeof old - 1, 0); /* a holder that died: its temporary files */
        old[ko > 0 ? ko : 0] = '\0';
        remove_stale_tmp(path, old);
        char host[256] = "unknown", since[32], text[512];
        gethostname(host, sizeof host - 1);
        for (char *c = host; *c; c++)
            if (*c == ' ') *c = '_';
        const time_t now = time(NULL);
        struct tm tmv;
        gmtime_r(&now, &tmv);
        strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tmv);
        const int tl = snprintf(text, sizeof text, LOCK_MAGIC " pid %ld host %s since %s\n", (long)getpid(), host,
                                since);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)tl, 0) != tl) {
            /* a full disk: the lock itself holds; only the holder's description is missing */
        }
        g_locks[g_n_locks].lock_path = lp;
        g_locks[g_n_locks].fd = fd;
        g_n_locks++;
        if (!g_atexit) g_atexit = atexit(unlock_all_atexit) == 0;
        release_at_finalize();
        return 0;
    }
    free(lp);
    return 2;
}

int ghf_out_lock_query(const char *path, char *err, size_t errlen)
{
    char lp[4200];
    snprintf(lp, sizeof lp, "%s.lock", path);
    const int fd = open(lp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        ghf__seterr(err, errlen, "%s: cannot create the lock file %s: %s", path, lp, strerror(errno));
        return 2;
    }
    struct stat st;
    char head[sizeof LOCK_MAGIC] = "";
    const ssize_t k = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, head, sizeof head - 1, 0) : -1;
    int rc = 0;
    if (k < 0 || (k > 0 && strncmp(head, LOCK_MAGIC, (size_t)k) != 0)) {
        ghf__seterr(err, errlen, "%s: %s exists and is not a ghfit lock file: ghfit will not touch it (remove it, "
                    "or choose another name)", path, lp);
        rc = 2;
    } else {
        struct flock q;
        memset(&q, 0, sizeof q);
        q.l_type = F_WRLCK;
        q.l_whence = SEEK_SET;
        if (fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK) { /* no lock support: nothing to tell */
            char h[400];
            holder_text(fd, q.l_pid, h, sizeof h);
            ghf__seterr(err, errlen, "%s: another ghfit process is writing this file (%s; lock file %s): wait "
                        "for it to end, or choose another name", path, h, lp);
            rc = 2;
        }
    }
    close(fd);
    return rc;
}

void ghf_out_unlock_all(void)
{
    while (g_n_locks > 0) {
        out_lock *l = &g_locks[--g_n_locks];
        unlink(l->lock_path); /* while holding it: a waiting process sees the inode change */
        close(l->fd);
        free(l->lock_path);
        l->lock_path = NULL;
    }
}

void ghf_out_abandon(void)
{
    ghf__tmp_unlink_all();
    const int n = g_n_locks;
    for (int i = 0; i < n; i++)
        if (g_locks[i].lock_path) unlink(g_locks[i].lock_path);
}
