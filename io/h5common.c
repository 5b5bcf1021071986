/* h5common.c - helpers shared by the HDF5 readers and writers: error
 * messages, status agreement across ranks, string attributes,
 * writable-directory checks, fsync. */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, getpid, gmtime_r, mkdtemp */
#endif

/* standard headers */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* this module */
#include "h5internal.h"

#define GHF__MSGLEN 1024

void ghf__h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void ghf__seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    /* one line: strip trailing newlines, replace inner ones */
    size_t n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == '\r')) err[--n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (err[i] == '\n' || err[i] == '\r') err[i] = ' ';
}

int ghf__agree(MPI_Comm comm, int status, char *err, size_t errlen)
{
    int rank = 0, size = 1, st = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(&status, &st, 1, MPI_INT, MPI_MAX, comm);
    if (st == 0) return 0;
    int mine = (status == st) ? rank : size, src = 0;
    MPI_Allreduce(&mine, &src, 1, MPI_INT, MPI_MIN, comm);
    char buf[GHF__MSGLEN];
    memset(buf, 0, sizeof buf);
    if (rank == src && err && errlen) {
        strncpy(buf, err, sizeof buf - 1);
    }
    MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, src, comm);
    if (buf[0] == '\0') snprintf(buf, sizeof buf, "unknown error on rank %d", src);
    if (err && errlen) {
        strncpy(err, buf, errlen - 1);
        err[errlen - 1] = '\0';
    }
    return st;
}

const char *ghf__dsname(const char *dataset)
{
    return (dataset && *dataset) ? dataset : GHF__DEFAULT_DATASET;
}

/* ---------------------------------------------------------------------------
 * Paths
 * ------------------------------------------------------------------------- */

/* malloc'd directory part of path ("." when there is none). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = (char *)malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

int ghf__check_writable(const char *final_path, char *err, size_t errlen)
{
    return ghf__check_writable_mode(final_path, 1, err, errlen);
}

int ghf__check_writable_mode(const char *final_path, int do_probe, char *err, size_t errlen)
{
    if (!final_path || !*final_path) {
        ghf__seterr(err, errlen, "no output file given");
        return 2;
    }
    size_t len = strlen(final_path);
    if (final_path[len - 1] == '/') {
        ghf__seterr(err, errlen, "%s: output path names a directory, not a file", final_path);
        return 2;
    }
    struct stat st;
    if (stat(final_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        ghf__seterr(err, errlen, "%s: output path is an existing directory", final_path);
        return 2;
    }
    char *dir = dir_of(final_path);
    if (!dir) {
        ghf__seterr(err, errlen, "%s: out of memory", final_path);
        return 1;
    }
    int rc = 0;
    if (stat(dir, &st) != 0) {
        ghf__seterr(err, errlen, "%s: cannot write output: directory %s: %s", final_path, dir, strerror(errno));
        rc = 2;
    } else if (!S_ISDIR(st.st_mode)) {
        ghf__seterr(err, errlen, "%s: cannot write output: %s is not a directory", final_path, dir);
        rc = 2;
    } else if (!do_probe) {
        /* no file created: access(2), which also reports a read-only mount (EROFS) */
        if (access(dir, W_OK | X_OK) != 0) {
            ghf__seterr(err, errlen, "%s: cannot create files in directory %s: %s", final_path, dir,
                        strerror(errno));
            rc = 2;
        }
    } else {
        /* access() is not enough (root, read-only mounts, /proc): try it. */
        size_t n = len + 64;
        char *probe = (char *)malloc(n);
        if (!probe) {
            free(dir);
            ghf__seterr(err, errlen, "%s: out of memory", final_path);
            return 1;
        }
        snprintf(probe, n, "%s.tmp.%ld.probe", final_path, (long)getpid());
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) {
            ghf__seterr(err, errlen, "%s: cannot create files in directory %s: %s", final_path, dir,
                        strerror(errno));
            rc = 2;
        } else {
            close(fd);
            unlink(probe);
        }
        free(probe);
    }
    free(dir);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Files built in memory (see h5internal.h)
 * ------------------------------------------------------------------------- */

struct ghf__memfile {
    void  *buf;       /* the core driver's buffer */
    size_t size;
    void  *kept;      /* the buffer, taken over when the driver closes the file */
    size_t kept_size;
};

static void *mem_malloc(size_t size, H5FD_file_image_op_t op, void *ud)
{
    (void)op;
    ghf__memfile *m = (ghf__memfile *)ud;
    void *p = malloc(size);
    if (p) {
        m->buf = p;
        m->size = size;
    }
    return p;
}

static void *mem_memcpy(void *dst, const void *src, size_t n, H5FD_file_image_op_t op, void *ud)
{
    (void)op;
    (void)ud;
    return memcpy(dst, src, n);
}

static void *mem_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *ud)
{
    (void)op;
    ghf__memfile *m = (ghf__memfile *)ud;
    void *p = realloc(ptr, size);
    if (p) {
        m->buf = p;
        m->size = size;
    }
    return p;
}

static herr_t mem_free(void *ptr, H5FD_file_image_op_t op, void *ud)
{
    ghf__memfile *m = (ghf__memfile *)ud;
    if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr && ptr == m->buf && !m->kept) {
        m->kept = ptr;
        m->kept_size = m->size;
    } else {
        free(ptr);
    }
    if (ptr == m->buf) m->buf = NULL;
    return 0;
}

static void *mem_udata_copy(void *ud) { return ud; }
static herr_t mem_udata_free(void *ud)
{
    (void)ud;
    return 0;
}

hid_t ghf__h5_mem_create(const char *name, H5F_libver_t libver_lo, ghf__memfile **mf)
{
    *mf = (ghf__memfile *)calloc(1, sizeof **mf);
    if (!*mf) return -1;
    /* The core driver reads an existing file of the name it is given (HDF5
     * 1.10.8, also with H5F_ACC_TRUNC and no backing store): the image would
     * start as the old file.  A name no file has keeps it empty. */
    static unsigned long seq = 0;
    char mem_name[4200];
    snprintf(mem_name, sizeof mem_name, "%s.ghfit-in-memory.%ld.%lu", name, (long)getpid(), ++seq);
    H5FD_file_image_callbacks_t cb = {mem_malloc,     mem_memcpy,     mem_realloc, mem_free,
                                      mem_udata_copy, mem_udata_free, *mf};
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
    if (fapl >= 0 && H5Pset_fapl_core(fapl, (size_t)1 << 20, 0) >= 0 &&
        H5Pset_libver_bounds(fapl, libver_lo, H5F_LIBVER_LATEST) >= 0 && H5Pset_file_image_callbacks(fapl, &cb) >= 0)
        f = H5Fcreate(mem_name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f < 0) {
        free(*mf);
        *mf = NULL;
    }
    return f;
}

/* The end-of-file address recorded in the superblock of an image (its
 * length without the driver's spare room); n when it cannot be read. */
static size_t image_eof(const unsigned char *b, size_t n)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (n < 64 || memcmp(b, sig, 8) != 0) return n;
    const int v = b[8];
    const int so = v <= 1 ? b[13] : b[9];
    const size_t off = v <= 1 ? 24 + (v == 1 ? 4 : 0) + 2 * (size_t)so : 12 + 2 * (size_t)so;
    if ((so != 4 && so != 8) || off + (size_t)so > n) return n;
    uint64_t eof = 0;
    for (int i = so - 1; i >= 0; i--) eof = (eof << 8) | b[off + (size_t)i];
    return eof > 0 && eof <= n ? (size_t)eof : n;
}

void ghf__h5_mem_discard(hid_t f, ghf__memfile *mf)
{
    if (f >= 0) H5Fclose(f);
    if (mf) free(mf->kept);
    free(mf);
}

/* write(2) all of buf; 0 or -1 (errno). */
static int write_all(int fd, const unsigned char *buf, size_t n)
{
    while (n > 0) {
        const ssize_t k = write(fd, buf, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return -1;
        }
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The temporary files this process is writing (named before they are
 * created, forgotten when renamed or removed), for ghf__tmp_unlink_all on a
 * fatal signal: plain arrays and lock-free atomic flags only.  A flag is set
 * (release) only after its name is complete, and the handler reads it
 * (acquire) before the name, so that neither the compiler nor another
 * thread's view (a process signal may run the handler on any thread) can
 * show it a name half copied. */
#define TMP_SLOTS 4
#define TMP_NAME_MAX 4200
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler needs lock-free atomic ints");
static char g_tmp_name[TMP_SLOTS][TMP_NAME_MAX];
static atomic_int g_tmp_on[TMP_SLOTS];

static void tmp_note(const char *tmp)
{
    if (strlen(tmp) >= TMP_NAME_MAX) return;
    for (int i = 0; i < TMP_SLOTS; i++)
        if (!atomic_load_explicit(&g_tmp_on[i], memory_order_relaxed)) {
            memcpy(g_tmp_name[i], tmp, strlen(tmp) + 1);
            atomic_store_explicit(&g_tmp_on[i], 1, memory_order_release);
            return;
        }
}

static void tmp_forget(const char *tmp)
{
    for (int i = 0; i < TMP_SLOTS; i++)
        if (atomic_load_explicit(&g_tmp_on[i], memory_order_relaxed) && strcmp(g_tmp_name[i], tmp) == 0)
            atomic_store_explicit(&g_tmp_on[i], 0, memory_order_release);
}

void ghf__tmp_release(char *tmp)
{
    if (tmp) tmp_forget(tmp);
    free(tmp);
}

void ghf__tmp_unlink_all(void)
{
    for (int i = 0; i < TMP_SLOTS; i++)
        if (atomic_load_explicit(&g_tmp_on[i], memory_order_acquire)) unlink(g_tmp_name[i]);
}

/* Creates "<base>.tmp.<pid>[.<k>]" exclusively: fd, or -1 (errno). */
static int create_tmp(const char *base, char **tmp)
{
    const size_t n = strlen(base) + 48;
    *tmp = (char *)malloc(n);
    if (!*tmp) return -1;
    for (int k = 0; k < 100; k++) {
        if (k == 0) snprintf(*tmp, n, "%s.tmp.%ld", base, (long)getpid());
        else snprintf(*tmp, n, "%s.tmp.%ld.%d", base, (long)getpid(), k);
        tmp_note(*tmp); /* before it exists: a signal right after the open still finds it */
        const int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) return fd;
        tmp_forget(*tmp);
        if (errno != EEXIST) {
            const int e = errno;
            free(*tmp);
            *tmp = NULL;
            errno = e;
            return -1;
        }
    }
    free(*tmp);
    *tmp = NULL;
    errno = EEXIST;
    return -1;
}

/* Test hook GHFIT_TEST_SAVE_SLEEP=S: sleeps S seconds once a temporary file
 * built in memory is written whole, before the caller renames it into place
 * (results of fit and run, risk, gof; the first part of eval and sample):
 * tests/faults_writers.sh signals and kills writers there. */
static void test_save_sleep(const char *tmp)
{
    const char *s = getenv("GHFIT_TEST_SAVE_SLEEP");
    const double sec = s ? atof(s) : 0;
    if (sec <= 0) return;
    fprintf(stderr, "ghfit: test: %s written; sleeping %.1f s before the rename\n", tmp, sec);
    fflush(stderr);
    struct timespec ts = {(time_t)sec, (long)((sec - (double)(time_t)sec) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int ghf__h5_mem_save(hid_t f, ghf__memfile *mf, const char *base, char **tmp, char *why, size_t whylen)
{
    *tmp = NULL;
    const int closed = H5Fclose(f) >= 0;
    const unsigned char *img = (const unsigned char *)mf->kept;
    if (!closed || !img) {
        ghf__h5_mem_discard(-1, mf);
        ghf__seterr(why, whylen, "the file could not be completed in memory (out of memory?)");
        return -1;
    }
    const size_t size = image_eof(img, mf->kept_size);
    int e = 0;
    const int fd = create_tmp(base, tmp);
    if (fd < 0) e = errno;
    else if (write_all(fd, img, size) != 0 || fsync(fd) != 0) e = errno;
    if (fd >= 0 && close(fd) != 0 && !e) e = errno;
    ghf__h5_mem_discard(-1, mf);
    if (!e) {
        test_save_sleep(*tmp);
        return 0;
    }
    ghf__seterr(why, whylen, "%s", strerror(e));
    if (*tmp) unlink(*tmp);
    ghf__tmp_release(*tmp);
    *tmp = NULL;
    return -1;
}

int ghf__fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int ghf__fsync_parent(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return -1;
    int rc = ghf__fsync_path(dir);
    free(dir);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Plain files
 * ------------------------------------------------------------------------- */

int ghf__read_regular(const char *path, int64_t want, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO cannot block */
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (want >= 0 && sb.st_size < want)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    const size_t n = want >= 0 ? (size_t)want : (size_t)sb.st_size;
    unsigned char *b = malloc(n + 1);
    size_t off = 0;
    int e = b ? 0 : ENOMEM;
    while (!e && off < n) {
        const ssize_t k = read(fd, b + off, n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) e = k < 0 ? errno : EIO;
        else off += (size_t)k;
    }
    close(fd);
    if (e) {
        free(b);
        errno = e;
        return -1;
    }
    *buf = b;
    if (len) *len = n;
    return 0;
}

hid_t ghf__h5_open_ro(const char *path)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
    H5Pset_file_locking(fapl, 1, 1);
    const hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    /* on failure, the error stack survives the close (ghf__explain_open_failure reads it) */
    const hid_t es = f < 0 ? H5Eget_current_stack() : -1;
    H5Pclose(fapl);
    if (es >= 0) H5Eset_current_stack(es);
    return f;
}

/* ---------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------- */

static int attr_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, const void *buf)
{
    hid_t s = H5Screate(H5S_SCALAR);
    if (s < 0) return -1;
    hid_t a = H5Acreate2(loc, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
    int rc = -1;
    if (a >= 0) {
        rc = (H5Awrite(a, mtype, buf) < 0) ? -1 : 0;
        if (H5Aclose(a) < 0) rc = -1;
    }
    H5Sclose(s);
    return rc;
}

int ghf__attr_str(hid_t loc, const char *name, const char *val)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    const char *v = val ? val : "";
    int rc = attr_write(loc, name, t, t, &v);
    H5Tclose(t);
    return rc;
}

int ghf__attr_i64(hid_t loc, const char *name, int64_t v)
{
    return attr_write(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int ghf__attr_int(hid_t loc, const char *name, int v)
{
    return attr_write(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT, &v);
}

int ghf__attr_f64(hid_t loc, const char *name, double v)
{
    return attr_write(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

int ghf__attr_read_i64(hid_t loc, const char *name, int64_t *v)
{
    if (H5Aexists(loc, name) <= 0) return -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    const int rc = H5Aread(a, H5T_NATIVE_INT64, v) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

int ghf__attr_read_f64(hid_t loc, const char *name, double *v)
{
    if (H5Aexists(loc, name) <= 0) return -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return -1;
    const int rc = H5Aread(a, H5T_NATIVE_DOUBLE, v) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

char *ghf__attr_read_str(hid_t loc, const char *name)
{
    if (H5Aexists(loc, name) <= 0) return NULL;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1;
    char *out = NULL;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_cset(mt, H5Tget_cset(t)); /* HDF5 converts no character set into another */
        if (H5Tis_variable_str(t) > 0) {
            char *s = NULL;
            H5Tset_size(mt, H5T_VARIABLE);
            if (H5Aread(a, mt, &s) >= 0 && s) out = strdup(s);
            H5free_memory(s);
        } else {
            const size_t n = H5Tget_size(t);
            char *s = calloc(n + 1, 1);
            H5Tset_size(mt, n + 1);
            if (s && H5Aread(a, mt, s) >= 0) out = s;
            else free(s);
        }
        H5Tclose(mt);
    }
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return out;
}

/* ---------------------------------------------------------------------------
 * Piece size and I/O-mode bookkeeping (test hooks)
 * ------------------------------------------------------------------------- */

#define GHF__DEFAULT_PIECE_BYTES ((size_t)1 << 30)

static size_t   g_piece_bytes = GHF__DEFAULT_PIECE_BYTES;
static int      g_last_mode = -1;
static uint32_t g_last_cause = 0;
static int      g_last_pieces = 0;

void ghf__h5_set_max_piece_bytes(size_t bytes)
{
    g_piece_bytes = bytes ? bytes : GHF__DEFAULT_PIECE_BYTES;
}

size_t ghf__h5_max_piece_bytes(void) { return g_piece_bytes; }

void ghf__h5_record_io_mode(hid_t dxpl)
{
    H5D_mpio_actual_io_mode_t mode;
    uint32_t local = 0, global = 0;
    if (H5Pget_mpio_actual_io_mode(dxpl, &mode) >= 0) g_last_mode = (int)mode;
    if (H5Pget_mpio_no_collective_cause(dxpl, &local, &global) >= 0) g_last_cause = local | global;
}

int      ghf__h5_last_io_mode(void) { return g_last_mode; }
uint32_t ghf__h5_last_no_coll_cause(void) { return g_last_cause; }
int      ghf__h5_last_n_pieces(void) { return g_last_pieces; }
void     ghf__h5_set_last_n_pieces(int n) { g_last_pieces = n; }

char *ghf__h5_begin(MPI_Comm comm, char *err, size_t *errlen, char *lbuf, size_t lbuflen, int *rank,
                    int *size)
{
    if (!err || *errlen == 0) {
        err = lbuf;
        *errlen = lbuflen;
    }
    err[0] = '\0';
    ghf__h5_quiet();
    ghf__h5_set_last_n_pieces(0);
    MPI_Comm_rank(comm, rank);
    MPI_Comm_size(comm, size);
    return err;
}

int ghf__file_starts_with(const char *path, const char *magic, size_t n)
{
    if (n > 16) return 0;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat sb;
    char buf[16];
    const int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && read(fd, buf, n) == (ssize_t)n &&
                   memcmp(buf, magic, n) == 0;
    close(fd);
    return ok;
}
