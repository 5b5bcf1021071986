/* test_io.c - io/ under MPI (run with 1, 2 and 3 ranks): the parallel matrix
 * writer and the collective shard reader (round trips for float32/float64,
 * contiguous/chunked/integer datasets, N < ranks, windows, multi-piece
 * reads), and the corpus of bad inputs, each of which must give status 2 on
 * every rank with the same one-line message naming the file and dataset. */

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, getpid, gmtime_r, mkdtemp */
#endif

/* standard headers */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* MPI, HDF5 */
#include <mpi.h>
#include <hdf5.h>

/* this module */
#include "h5io.h"
#include "h5internal.h"

static int g_rank = 0, g_size = 1, g_fail = 0, g_checks = 0;
static char g_dir[256];

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        g_checks++;                                                          \
        if (!(cond)) {                                                       \
            g_fail++;                                                        \
            fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", g_rank,    \
                    __FILE__, __LINE__, #cond);                              \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

/* The value stored at (row i, column j) of every generated matrix: exactly
 * representable in float32 for the sizes used here, and invertible in i. */
static double val(int64_t i, int j) { return 0.5 * (double)i + 0.125 * j - 3.0; }

static void path_in_dir(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", g_dir, name);
}

/* Every rank must see the same status and message. */
static void check_agreed(int st, const char *msg, const char *what)
{
    unsigned long h = 5381u + (unsigned long)st;
    for (const char *c = msg; *c; c++) h = h * 33u + (unsigned char)*c;
    unsigned long lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi, "%s: ranks disagree on status/message (here: %d '%s')", what, st, msg);
}

/* Serial helper (rank 0): writes a dataset of any type/shape, optional chunks. */
static void make_ds(const char *path, const char *name, hid_t ftype, hid_t mtype, int nd,
                    const hsize_t *dims, const hsize_t *chunk, const void *data, int truncate)
{
    hid_t f = truncate ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                       : H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t s = H5Screate_simple(nd, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunk) H5Pset_chunk(dcpl, nd, chunk);
    hid_t ds = H5Dcreate2(f, name, ftype, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hssize_t np = H5Sget_simple_extent_npoints(s);
    if (np > 0) H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(s);
    H5Fclose(f);
}

/* Generates an n x d matrix with ghf_h5_write_matrix (each rank its block). */
static int gen(const char *path, const char *ds, int64_t n, int d, int bits)
{
    int64_t r0, nr;
    ghf_block_range(n, g_rank, g_size, &r0, &nr);
    double *x = (double *)malloc((size_t)(nr > 0 ? nr : 1) * (size_t)d * sizeof(double));
    for (int64_t i = 0; i < nr; i++)
        for (int j = 0; j < d; j++) x[i * d + j] = val(r0 + i, j);
    const char *keys[2] = {"model", "seed"}, *vals[2] = {"test matrix", "42"};
    char err[512] = "";
    int st = ghf_h5_write_matrix(MPI_COMM_WORLD, path, ds, n, d, r0, nr, x, bits, 2, keys, vals,
                                 err, sizeof err);
    free(x);
    CHECK(st == 0, "write_matrix %s: %s", path, err);
    check_agreed(st, err, "write_matrix");
    return st;
}

/* Reads and checks a shard against val() for window [w0, w0+wn). */
static void read_and_check(const char *what, const char *path, const char *ds, int64_t w0, int64_t wlen,
                           int64_t n_expect, int d, int bits)
{
    ghf_read_opts o = {path, ds, w0, wlen, 1, 0, 0, 0, NULL};
    ghf_shard s;
    char err[512] = "";
    int st = ghf_h5_read_shard(MPI_COMM_WORLD, &o, &s, err, sizeof err);
    check_agreed(st, err, what);
    CHECK(st == 0, "%s: status %d: %s", what, st, err);
    if (st) return;
    int64_t r0, nr;
    ghf_block_range(n_expect, g_rank, g_size, &r0, &nr);
    CHECK(s.n_global == n_expect, "%s: n_global %" PRId64 " != %" PRId64, what, s.n_global, n_expect);
    CHECK(s.d == d, "%s: d %d != %d", what, s.d, d);
    CHECK(s.row0 == r0 && s.nrows == nr, "%s: rows [%" PRId64 ",+%" PRId64 ") != [%" PRId64 ",+%" PRId64 ")",
          what, s.row0, s.nrows, r0, nr);
    CHECK(s.file_dtype_bits == bits, "%s: file_dtype_bits %d != %d", what, s.file_dtype_bits, bits);
    CHECK(s.n_dropped == 0, "%s: n_dropped %" PRId64, what, s.n_dropped);
    CHECK((s.nrows == 0) == (s.x == NULL), "%s: x must be NULL exactly when nrows == 0", what);
    int64_t bad = 0;
    for (int64_t i = 0; i < s.nrows; i++)
        for (int j = 0; j < d; j++)
            if (s.x[i * d + j] != val(w0 + r0 + i, j)) bad++;
    CHECK(bad == 0, "%s: %" PRId64 " values differ", what, bad);
    int64_t tot = 0;
    MPI_Allreduce(&s.nrows, &tot, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    CHECK(tot == n_expect, "%s: rows over ranks %" PRId64 " != %" PRId64, what, tot, n_expect);
    ghf_shard_free(&s);
}

/* Expects status 2 with a message naming the path and the dataset. */
static void expect_bad(const char *what, const ghf_read_opts *o, const char *must_contain)
{
    ghf_shard s;
    memset(&s, 0x5a, sizeof s);
    char err[512] = "";
    int st = ghf_h5_read_shard(MPI_COMM_WORLD, o, &s, err, sizeof err);
    check_agreed(st, err, what);
    const char *ds = o->dataset && *o->dataset ? o->dataset : "/X";
    CHECK(st == 2, "%s: status %d (expected 2): %s", what, st, err);
    CHECK(strstr(err, o->path) != NULL, "%s: message does not name the file: %s", what, err);
    CHECK(strstr(err, ds) != NULL, "%s: message does not name the dataset: %s", what, err);
    CHECK(!must_contain || strstr(err, must_contain) != NULL, "%s: message lacks '%s': %s", what,
          must_contain, err);
    CHECK(strchr(err, '\n') == NULL && strncmp(err, "ghfit:", 6) != 0, "%s: message format: %s", what, err);
    CHECK(s.x == NULL && s.nrows == 0, "%s: output not cleared on error", what);
    if (g_rank == 0) printf("  ok: %-28s -> %s\n", what, err);
}

/* --------------------------------------------------------------------------- */

static void test_block_range(void)
{
    const int64_t ns[] = {0, 1, 2, 5, 7, 100, 1000003};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
        for (int p = 1; p <= 7; p++) {
            int64_t next = 0, mn = INT64_MAX, mx = 0;
            for (int r = 0; r < p; r++) {
                int64_t r0, nr;
                ghf_block_range(ns[k], r, p, &r0, &nr);
                CHECK(r0 == next && nr >= 0, "block_range(%" PRId64 ",%d,%d)", ns[k], r, p);
                CHECK(r0 == (ns[k] * r) / p, "block_range start formula n=%" PRId64 " r=%d p=%d", ns[k], r, p);
                next = r0 + nr;
                mn = nr < mn ? nr : mn;
                mx = nr > mx ? nr : mx;
            }
            CHECK(next == ns[k] && mx - mn <= 1, "block_range cover n=%" PRId64 " p=%d", ns[k], p);
        }
    /* groups of g rows: shards start at multiples of g, cover [0, n) in order */
    const int64_t gs[] = {1, 2, 256};
    for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int p = 1; p <= 7; p++) {
                int64_t next = 0;
                for (int r = 0; r < p; r++) {
                    int64_t r0, nr;
                    ghf_block_range_granular(ns[k], gs[gi], r, p, &r0, &nr);
                    CHECK(r0 == next && nr >= 0 && (r0 % gs[gi] == 0 || r0 == ns[k]),
                          "granular(%" PRId64 ",%" PRId64 ",%d,%d)", ns[k], gs[gi], r, p);
                    next = r0 + nr;
                }
                CHECK(next == ns[k], "granular cover n=%" PRId64 " g=%" PRId64 " p=%d", ns[k], gs[gi], p);
            }
    /* large n: no overflow */
    int64_t r0, nr, big = (int64_t)1 << 62;
    ghf_block_range(big, 2, 3, &r0, &nr);
    CHECK(r0 > 0 && nr > 0 && r0 + nr == big, "block_range large n");
}

static void test_round_trips(void)
{
    char p32[512], p64[512];
    path_in_dir(p32, sizeof p32, "m32.h5");
    path_in_dir(p64, sizeof p64, "m64.h5");
    const int64_t n = 23;
    const int d = 3;
    if (gen(p32, NULL, n, d, 32) || gen(p64, "/data/matrix", n, d, 64)) return;

    /* no temp file left behind, final file in place */
    if (g_rank == 0) {
        struct stat st;
        CHECK(stat(p32, &st) == 0, "generated file missing");
        char cmd[700];
        snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp > /dev/null", g_dir);
        CHECK(system(cmd) != 0, "temporary files left in %s", g_dir);
        /* attributes and type on disk */
        hid_t f = H5Fopen(p32, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t ds = H5Dopen2(f, "/X", H5P_DEFAULT);
        hid_t t = H5Dget_type(ds);
        CHECK(H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 4, "float32 on disk");
        hid_t dcpl = H5Dget_create_plist(ds);
        CHECK(H5Pget_layout(dcpl) == H5D_CONTIGUOUS, "contiguous layout");
        CHECK(H5Aexists(ds, "model") > 0 && H5Aexists(ds, "seed") > 0, "generator attributes");
        H5Pclose(dcpl);
        H5Tclose(t);
        H5Dclose(ds);
        H5Fclose(f);
        int64_t pn = 0;
        int pd = 0;
        char err[256];
        CHECK(ghf_h5_probe(p64, "/data/matrix", &pn, &pd, err, sizeof err) == 0 && pn == n && pd == d,
              "probe: %s", err);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    read_and_check("float32 contiguous", p32, NULL, 0, -1, n, d, 32);
    CHECK(!(ghf__h5_last_no_coll_cause() & H5D_MPIO_DATATYPE_CONVERSION),
          "float32 read needed a datatype conversion (cause 0x%x)", (unsigned)ghf__h5_last_no_coll_cause());
    CHECK(ghf__h5_last_io_mode() != H5D_MPIO_NO_COLLECTIVE, "float32 read was not collective (cause 0x%x)",
          (unsigned)ghf__h5_last_no_coll_cause());
    read_and_check("float64 contiguous", p64, "/data/matrix", 0, -1, n, d, 64);
    CHECK(ghf__h5_last_io_mode() != H5D_MPIO_NO_COLLECTIVE, "float64 read was not collective");
    read_and_check("window [5, 12)", p64, "/data/matrix", 5, 7, 7, d, 64);
    read_and_check("window [20, end)", p32, "/X", 20, -1, 3, d, 32);
    read_and_check("window of 1 row (N < ranks)", p32, "/X", 22, 1, 1, d, 32);

    /* multi-piece: at most 2 rows per collective call, ranks with unequal counts */
    ghf__h5_set_max_piece_bytes(2 * d * 4);
    read_and_check("float32 in pieces", p32, NULL, 1, -1, n - 1, d, 32);
    int64_t r0, nr;
    ghf_block_range(n - 1, 0, g_size, &r0, &nr);
    CHECK(ghf__h5_last_n_pieces() == (int)((nr + 1) / 2), "pieces %d", ghf__h5_last_n_pieces());
    ghf__h5_set_max_piece_bytes(3 * d * 8);
    read_and_check("float64 in pieces", p64, "/data/matrix", 0, -1, n, d, 64);

    /* the generator in pieces too */
    char pp[512];
    path_in_dir(pp, sizeof pp, "pieces.h5");
    ghf__h5_set_max_piece_bytes(3 * 2 * 4); /* 3 float32 rows of d = 2 */
    if (gen(pp, "/X", 17, 2, 32) == 0) {
        int64_t maxrows = (17 + g_size - 1) / g_size;
        CHECK(ghf__h5_last_n_pieces() == (int)((maxrows + 2) / 3), "generator pieces %d",
              ghf__h5_last_n_pieces());
        read_and_check("generated in pieces", pp, "/X", 0, -1, 17, 2, 32);
    }
    ghf__h5_set_max_piece_bytes(0);

    /* N < ranks: 2 rows over however many ranks */
    char ps[512];
    path_in_dir(ps, sizeof ps, "small.h5");
    if (gen(ps, NULL, 2, 4, 64) == 0) read_and_check("N=2 rows", ps, NULL, 0, -1, 2, 4, 64);
    char p1[512];
    path_in_dir(p1, sizeof p1, "one.h5");
    if (gen(p1, NULL, 1, 1, 32) == 0) read_and_check("N=1 row, d=1", p1, NULL, 0, -1, 1, 1, 32);
}

static void test_chunked_and_int(void)
{
    char pc[512];
    path_in_dir(pc, sizeof pc, "chunked.h5");
    const int64_t n = 29;
    const int d = 5;
    if (g_rank == 0) {
        float *xf = (float *)malloc(n * d * sizeof(float));
        double *xd = (double *)malloc(n * d * sizeof(double));
        int32_t *xi = (int32_t *)malloc(n * d * sizeof(int32_t));
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < d; j++) {
                xf[i * d + j] = (float)val(i, j);
                xd[i * d + j] = val(i, j);
                xi[i * d + j] = (int32_t)(8 * val(i, j)); /* exact integers */
            }
        hsize_t dims[2] = {n, d}, ch[2] = {4, d}, ch2[2] = {7, 2};
        make_ds(pc, "/f32", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dims, ch, xf, 1);
        make_ds(pc, "/f64", H5T_IEEE_F64BE, H5T_NATIVE_DOUBLE, 2, dims, ch2, xd, 0); /* big-endian too */
        make_ds(pc, "/i32", H5T_STD_I32LE, H5T_NATIVE_INT32, 2, dims, NULL, xi, 0);
        free(xf);
        free(xd);
        free(xi);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    read_and_check("float32 chunked", pc, "/f32", 0, -1, n, d, 32);
    CHECK(ghf__h5_last_io_mode() != H5D_MPIO_NO_COLLECTIVE, "chunked float32 read was not collective (cause 0x%x)",
          (unsigned)ghf__h5_last_no_coll_cause());
    read_and_check("float64 chunked big-endian", pc, "/f64", 3, 20, 20, d, 64);
    ghf__h5_set_max_piece_bytes(5 * d * 4);
    read_and_check("float32 chunked in pieces", pc, "/f32", 2, -1, n - 2, d, 32);
    ghf__h5_set_max_piece_bytes(0);

    /* integers are accepted and converted */
    ghf_read_opts o = {pc, "/i32", 0, -1, 1, 0, 0, 0, NULL};
    ghf_shard s;
    char err[512] = "";
    int st = ghf_h5_read_shard(MPI_COMM_WORLD, &o, &s, err, sizeof err);
    CHECK(st == 0, "int32: %s", err);
    if (st == 0) {
        int64_t bad = 0;
        for (int64_t i = 0; i < s.nrows; i++)
            for (int j = 0; j < d; j++)
                if (s.x[i * d + j] != 8 * val(s.row0 + i, j)) bad++;
        CHECK(bad == 0 && s.n_global == n && s.file_dtype_bits == 32, "int32 values (%" PRId64 " bad)", bad);
        ghf_shard_free(&s);
    }
}

static void test_bad_inputs(void)
{
    char good[512], txt[512], trunc[512], shapes[512], missing[512], dirp[512];
    path_in_dir(good, sizeof good, "good.h5");
    path_in_dir(txt, sizeof txt, "x.h5");
    path_in_dir(trunc, sizeof trunc, "trunc.h5");
    path_in_dir(shapes, sizeof shapes, "shapes.h5");
    path_in_dir(missing, sizeof missing, "missing.h5");
    path_in_dir(dirp, sizeof dirp, "adir.h5");
    if (gen(good, NULL, 400, 4, 64)) return;
    if (g_rank == 0) {
        FILE *fp = fopen(txt, "w");
        fputs("x,y\n1,2\n3,4\n", fp);
        fclose(fp);
        /* first 1 KiB of a valid file: the superblock survives, the data does not */
        FILE *in = fopen(good, "rb"), *out = fopen(trunc, "wb");
        char buf[1024];
        size_t k = fread(buf, 1, sizeof buf, in);
        fwrite(buf, 1, k, out);
        fclose(in);
        fclose(out);
        mkdir(dirp, 0755);

        double v1[6] = {1, 2, 3, 4, 5, 6};
        hsize_t d1[1] = {6}, d3[3] = {1, 2, 3}, d0[2] = {0, 3};
        make_ds(shapes, "/v1", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, d1, NULL, v1, 1);
        make_ds(shapes, "/v3", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 3, d3, NULL, v1, 0);
        make_ds(shapes, "/empty", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, d0, NULL, v1, 0);
        hid_t st = H5Tcopy(H5T_C_S1);
        H5Tset_size(st, 8);
        char strs[2][3][8] = {{"a", "b", "c"}, {"d", "e", "f"}};
        hsize_t d2[2] = {2, 3};
        make_ds(shapes, "/names", st, st, 2, d2, NULL, strs, 0);
        H5Tclose(st);
        hid_t f = H5Fopen(shapes, H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t g = H5Gcreate2(f, "/grp", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(g);
        H5Fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    ghf_read_opts o = {missing, NULL, 0, -1, 1, 0, 0, 0, NULL};
    expect_bad("missing file", &o, "No such file");
    o.path = dirp;
    expect_bad("directory", &o, "directory");
    o.path = txt;
    expect_bad("text file named x.h5", &o, "not an HDF5 file");
    o.path = trunc;
    expect_bad("truncated HDF5 file", &o, "truncated or corrupt");
    expect_bad("truncated HDF5 file, sizes named", &o, "it is truncated, 1024 bytes where its superblock records");
    o.path = good;
    o.dataset = "/nope";
    expect_bad("missing dataset", &o, "no such dataset");
    o.dataset = "/a/b/c";
    expect_bad("missing nested dataset", &o, "no such dataset");
    o.path = shapes;
    o.dataset = "/grp";
    expect_bad("group, not dataset", &o, "group");
    o.dataset = "/v1";
    expect_bad("1-D dataset", &o, "1-D");
    o.dataset = "/v3";
    expect_bad("3-D dataset", &o, "3-D");
    o.dataset = "/names";
    expect_bad("string dataset", &o, "string");
    o.dataset = "/empty";
    expect_bad("empty dataset", &o, "empty");
    o.path = good;
    o.dataset = "/X";
    o.win_start = 400;
    expect_bad("window start = N", &o, "out of range");
    o.win_start = 390;
    o.win_len = 11;
    expect_bad("window past the end", &o, "out of range");
    o.win_start = -1;
    o.win_len = -1;
    expect_bad("negative window start", &o, "out of range");
    o.win_start = 0;
    o.win_len = 0;
    expect_bad("window of 0 rows", &o, "0 rows");
    o.win_len = -1;
    o.win_step = 2;
    expect_bad("row step 2", &o, "step");
}

static void test_nonfinite(void)
{
    char pn[512];
    path_in_dir(pn, sizeof pn, "nonfinite.h5");
    const int64_t n = 40;
    const int d = 3;
    const int64_t bad_rows[] = {5, 12, 17, 31};
    const int nbad = 4;
    /* generate with non-finite entries in a few rows, float32 on disk */
    int64_t r0, nr;
    ghf_block_range(n, g_rank, g_size, &r0, &nr);
    double *x = (double *)malloc((size_t)(nr > 0 ? nr : 1) * d * sizeof(double));
    for (int64_t i = 0; i < nr; i++)
        for (int j = 0; j < d; j++) x[i * d + j] = val(r0 + i, j);
    for (int k = 0; k < nbad; k++) {
        int64_t i = bad_rows[k] - r0;
        if (i >= 0 && i < nr) x[i * d + (k % d)] = (k % 2) ? INFINITY : NAN;
    }
    char err[512] = "";
    int st = ghf_h5_write_matrix(MPI_COMM_WORLD, pn, NULL, n, d, r0, nr, x, 32, 0, NULL, NULL, err, sizeof err);
    free(x);
    CHECK(st == 0, "write nonfinite: %s", err);
    if (st) return;

    /* whole file, then a window that starts after the first bad row */
    for (int w = 0; w < 2; w++) {
        int64_t w0 = w ? 6 : 0;
        int cnt = 0;
        int64_t first = -1;
        for (int k = 0; k < nbad; k++)
            if (bad_rows[k] >= w0) {
                cnt++;
                if (first < 0) first = bad_rows[k];
            }
        char want[160];
        snprintf(want, sizeof want, "%d rows contain non-finite values (first at row %" PRId64 "); use --drop-nonfinite to skip them",
                 cnt, first);
        ghf_read_opts o = {pn, NULL, w0, -1, 1, 0, 0, 0, NULL};
        expect_bad(w ? "non-finite, window from 6" : "non-finite values", &o, want);

        /* drop them */
        o.drop_nonfinite = 1;
        ghf_shard s;
        st = ghf_h5_read_shard(MPI_COMM_WORLD, &o, &s, err, sizeof err);
        check_agreed(st, err, "drop_nonfinite");
        CHECK(st == 0, "drop_nonfinite: %s", err);
        if (st) continue;
        CHECK(s.n_dropped == cnt && s.n_global == n - w0 - cnt && s.row0 == -1,
              "drop: n_dropped %" PRId64 " n_global %" PRId64 " row0 %" PRId64, s.n_dropped, s.n_global, s.row0);
        /* this rank keeps exactly its block's finite rows, in order */
        int64_t b0, bn;
        ghf_block_range(n - w0, g_rank, g_size, &b0, &bn);
        int64_t k = 0, mism = 0;
        for (int64_t i = w0 + b0; i < w0 + b0 + bn; i++) {
            int is_bad = 0;
            for (int q = 0; q < nbad; q++) is_bad |= (bad_rows[q] == i);
            if (is_bad) continue;
            if (k >= s.nrows) {
                mism++;
                break;
            }
            for (int j = 0; j < d; j++) mism += s.x[k * d + j] != val(i, j);
            k++;
        }
        CHECK(mism == 0 && k == s.nrows, "drop: kept rows differ (%" PRId64 " mismatches, %" PRId64 " vs %" PRId64 ")",
              mism, k, s.nrows);
        int64_t tot = 0;
        MPI_Allreduce(&s.nrows, &tot, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        CHECK(tot == s.n_global, "drop: rows over ranks %" PRId64 " != n_global %" PRId64, tot, s.n_global);
        ghf_shard_free(&s);
    }

    /* every row non-finite */
    char pa[512];
    path_in_dir(pa, sizeof pa, "allnan.h5");
    if (g_rank == 0) {
        double v[4] = {NAN, 1, 2, INFINITY};
        hsize_t dims[2] = {2, 2};
        make_ds(pa, "/X", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, dims, NULL, v, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ghf_read_opts o = {pa, NULL, 0, -1, 1, 1, 0, 0, NULL};
    expect_bad("all rows non-finite (drop)", &o, "all 2 rows");
}

static void test_gen_errors(void)
{
    double x[6] = {0};
    char err[512] = "";
    int64_t r0, nr;
    ghf_block_range(2, g_rank, g_size, &r0, &nr);
    int st = ghf_h5_write_matrix(MPI_COMM_WORLD, "/proc/forbidden/m.h5", NULL, 2, 3, r0, nr, x, 64, 0, NULL,
                                 NULL, err, sizeof err);
    check_agreed(st, err, "gen unwritable");
    CHECK(st == 2 && strstr(err, "/proc/forbidden/m.h5"), "gen into /proc: %d %s", st, err);
    char pf[512], under[600];
    path_in_dir(pf, sizeof pf, "plainfile");
    if (g_rank == 0) {
        FILE *fp = fopen(pf, "w");
        fclose(fp);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(under, sizeof under, "%s/m.h5", pf);
    st = ghf_h5_write_matrix(MPI_COMM_WORLD, under, NULL, 2, 3, r0, nr, x, 64, 0, NULL, NULL, err, sizeof err);
    check_agreed(st, err, "gen under a file");
    CHECK(st == 2 && strstr(err, "not a directory"), "gen under a file: %d %s", st, err);
    /* rows that do not cover [0, n) */
    char pg[512];
    path_in_dir(pg, sizeof pg, "cover.h5");
    st = ghf_h5_write_matrix(MPI_COMM_WORLD, pg, NULL, 3, 3, r0, nr, x, 64, 0, NULL, NULL, err, sizeof err);
    check_agreed(st, err, "gen cover");
    CHECK(st == 2 && access(pg, F_OK) != 0, "gen with rows not covering n: %d %s", st, err);
    st = ghf_h5_write_matrix(MPI_COMM_WORLD, pg, NULL, 2, 3, r0, nr, x, 16, 0, NULL, NULL, err, sizeof err);
    CHECK(st == 2 && access(pg, F_OK) != 0, "gen with 16 bits: %d %s", st, err);
}

/* ghf_h5_read_shard_f32: a float32 dataset stays float32 (x32, x NULL) with
 * exactly the values whose widening the double read gives, also through
 * windows, dropped rows and chunked storage; other types come back in x as
 * before; ghf_shard_widen then gives the double read's bytes, and so does
 * ghf_shard_widen_keep, which keeps x32 (for the GPU) unchanged. */
static void f32_case(const char *what, const char *name, const char *ds, int64_t w0, int drop, int is_f32)
{
    char path[512], err[512] = "", err2[512] = "";
    path_in_dir(path, sizeof path, name);
    ghf_read_opts o = {path, ds, w0, -1, 1, drop, 0, 0, NULL};
    ghf_shard a, b;
    const int st = ghf_h5_read_shard(MPI_COMM_WORLD, &o, &a, err, sizeof err);
    const int st2 = ghf_h5_read_shard_f32(MPI_COMM_WORLD, &o, &b, err2, sizeof err2);
    CHECK(st == st2 && strcmp(err, err2) == 0, "%s: f32 read status %d '%s' vs %d '%s'", what, st2, err2, st, err);
    if (st || st2) {
        if (!st) ghf_shard_free(&a);
        if (!st2) ghf_shard_free(&b);
        return;
    }
    CHECK(a.nrows == b.nrows && a.n_global == b.n_global && a.row0 == b.row0 && a.n_dropped == b.n_dropped &&
              a.file_dtype_bits == b.file_dtype_bits,
          "%s: shard shapes differ", what);
    const int64_t m = a.nrows * a.d;
    if (is_f32) {
        CHECK(b.x == NULL && (b.nrows == 0) == (b.x32 == NULL), "%s: float32 kept in x32 only", what);
        int64_t bad = 0;
        for (int64_t i = 0; i < m && b.x32; i++) bad += (double)b.x32[i] != a.x[i];
        CHECK(bad == 0, "%s: %" PRId64 " float32 values differ from the widened read", what, bad);
    } else {
        CHECK(b.x32 == NULL && (b.nrows == 0) == (b.x == NULL), "%s: not float32: read into x", what);
    }
    /* widen keeping the float32 copy (the CUDA backend's upload): the same
     * doubles as the float64 read, and the float32 values unchanged */
    ghf_shard c;
    char err3[512] = "";
    const int st3 = ghf_h5_read_shard_f32(MPI_COMM_WORLD, &o, &c, err3, sizeof err3);
    CHECK(st3 == 0, "%s: second f32 read: %s", what, err3);
    if (st3 == 0) {
        float *keep = c.x32;
        CHECK(ghf_shard_widen_keep(&c) == 0 && c.x32 == keep, "%s: widen_keep kept x32", what);
        CHECK(m == 0 || memcmp(a.x, c.x, (size_t)m * sizeof(double)) == 0, "%s: widen_keep: bytes differ", what);
        int64_t bad = 0;
        for (int64_t i = 0; i < m && c.x32; i++) bad += (double)c.x32[i] != c.x[i];
        CHECK(bad == 0, "%s: widen_keep: %" PRId64 " float32 values changed", what, bad);
        CHECK(!is_f32 || c.nrows == 0 || c.x32 != NULL, "%s: widen_keep dropped x32", what);
        ghf_shard_free(&c);
        CHECK(c.x == NULL && c.x32 == NULL, "%s: free after widen_keep", what);
    }
    CHECK(ghf_shard_widen(&b) == 0 && b.x32 == NULL, "%s: widen", what);
    CHECK(m == 0 || memcmp(a.x, b.x, (size_t)m * sizeof(double)) == 0, "%s: widened bytes differ", what);
    ghf_shard_free(&a);
    ghf_shard_free(&b);
}

static void test_f32_keep(void)
{
    f32_case("f32: contiguous", "m32.h5", NULL, 0, 0, 1);
    f32_case("f32: window", "m32.h5", NULL, 7, 0, 1);
    f32_case("f32: chunked", "chunked.h5", "/f32", 2, 0, 1);
    f32_case("f32: int32 is widened", "chunked.h5", "/i32", 0, 0, 0);
    f32_case("f32: float64 is read as it is", "m64.h5", "/data/matrix", 0, 0, 0);
    f32_case("f32: non-finite rows are an error", "nonfinite.h5", NULL, 0, 0, 1);
    f32_case("f32: non-finite rows dropped", "nonfinite.h5", NULL, 0, 1, 1);
    f32_case("f32: non-finite rows dropped, window", "nonfinite.h5", NULL, 6, 1, 1);
}

/* --------------------------------------------------------------------------- */
/* Named causes of a failed read (issue 25): before "file truncated or
 * corrupt?", a file changed during the read, a filter that failed to decode,
 * a filter this HDF5 has without its decoder (a class registered in-process
 * for the LZF id: H5Zfilter_avail still says yes), whether inspected before
 * or after the decoder went, and szip where this HDF5 lacks it (the built-in
 * szip cannot be unregistered: hidden from ghfit's checks by a test hook). */

static char g_hook_path[512];
static void truncate_hook(const char *path)
{
    /* rank 0 cuts the file to half while every rank has it open */
    if (g_rank == 0 && !strcmp(path, g_hook_path)) {
        struct stat st;
        if (stat(path, &st) == 0 && truncate(path, st.st_size / 2) != 0) perror("truncate");
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static size_t pass_filter(unsigned flags, size_t ncd, const unsigned cd[], size_t nbytes, size_t *buf_size,
                          void **buf)
{
    (void)flags; (void)ncd; (void)cd; (void)buf_size; (void)buf;
    return nbytes;
}

static size_t fail_filter(unsigned flags, size_t ncd, const unsigned cd[], size_t nbytes, size_t *buf_size,
                          void **buf)
{
    (void)flags; (void)ncd; (void)cd; (void)nbytes; (void)buf_size; (void)buf;
    return 0;
}

#define TEST_FILTER_ID 32000 /* LZF's id */
/* the test filter id with an encoder and a decoder that copy, or with neither */
static int register_test_filter(int working)
{
    static const H5Z_class2_t pass = {H5Z_CLASS_T_VERS, TEST_FILTER_ID, 1, 1, "lzf", NULL, NULL, pass_filter};
    static const H5Z_class2_t none = {H5Z_CLASS_T_VERS, TEST_FILTER_ID, 0, 0, "lzf", NULL, NULL, fail_filter};
    int ok = H5Zregister(working ? &pass : &none) >= 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    CHECK(all, "H5Zregister of the test filter failed");
    return all;
}

/* n x 4 rows of val(), chunked (100 rows): 0 deflate, 1 the test filter, 2 szip */
static void make_filtered(const char *path, int64_t n, int kind)
{
    double *x = (double *)malloc((size_t)n * 4 * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < 4; j++) x[i * 4 + j] = val(i, j);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {(hsize_t)n, 4}, chunk[2] = {100, 4};
    hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    if (kind == 1)
        H5Pset_filter(dcpl, TEST_FILTER_ID, H5Z_FLAG_MANDATORY, 0, NULL);
    else if (kind == 2)
        H5Pset_szip(dcpl, H5_SZIP_NN_OPTION_MASK, 8);
    else
        H5Pset_deflate(dcpl, 6);
    hid_t ds = H5Dcreate2(f, "/X", H5T_IEEE_F64LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    herr_t w = ds >= 0 ? H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) : -1;
    CHECK(w >= 0, "writing %s failed", path);
    if (ds >= 0) H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    free(x);
}

static void test_named_causes(void)
{
    char gz[512], bad[512], lz1[512], lz2[512], sz[512], sz2[512];
    path_in_dir(gz, sizeof gz, "gz_changed.h5");
    path_in_dir(bad, sizeof bad, "gz_corrupt.h5");
    path_in_dir(lz1, sizeof lz1, "nodec_read.h5");
    path_in_dir(lz2, sizeof lz2, "nodec_new.h5");
    path_in_dir(sz, sizeof sz, "szip.h5");
    path_in_dir(sz2, sizeof sz2, "szip_new.h5");
    unsigned cfg = 0;
    int can_szip = H5Zfilter_avail(H5Z_FILTER_SZIP) > 0 && H5Zget_filter_info(H5Z_FILTER_SZIP, &cfg) >= 0 &&
                   (cfg & H5Z_FILTER_CONFIG_ENCODE_ENABLED) != 0;
    MPI_Bcast(&can_szip, 1, MPI_INT, 0, MPI_COMM_WORLD);
    const int have_filter = register_test_filter(1);
    if (g_rank == 0) {
        make_filtered(gz, 2000, 0);
        make_filtered(bad, 2000, 0);
        /* overwrite the middle of the chunk of rows [1000, 1100) in place */
        hid_t f = H5Fopen(bad, H5F_ACC_RDONLY, H5P_DEFAULT), ds = H5Dopen2(f, "/X", H5P_DEFAULT);
        hsize_t off[2] = {1000, 0}, size = 0;
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        H5Dget_chunk_info_by_coord(ds, off, &mask, &addr, &size);
        H5Dclose(ds);
        H5Fclose(f);
        FILE *fp = fopen(bad, "r+b");
        char junk[64];
        memset(junk, 0x5a, sizeof junk);
        CHECK(fp && addr != HADDR_UNDEF && size > 96, "cannot locate the chunk to damage");
        if (fp && addr != HADDR_UNDEF && size > 96 && fseek(fp, (long)(addr + size / 2 - 32), SEEK_SET) == 0)
            fwrite(junk, 1, sizeof junk, fp);
        if (fp) fclose(fp);
        if (have_filter) {
            make_filtered(lz1, 400, 1);
            make_filtered(lz2, 400, 1);
        }
        if (can_szip) {
            make_filtered(sz, 400, 2);
            make_filtered(sz2, 400, 2);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ghf_read_opts o = {gz, NULL, 0, -1, 1, 0, 0, 0, NULL};
    /* the file cut to half between opening and reading */
    snprintf(g_hook_path, sizeof g_hook_path, "%s", gz);
    ghf__h5_set_before_read_hook(truncate_hook);
    expect_bad("file changed during the read", &o, "the file changed while ghfit was reading it");
    ghf__h5_set_before_read_hook(NULL);
    /* a damaged compressed chunk: the filter that failed is named */
    o.path = bad;
    expect_bad("corrupt deflate chunk", &o, "failed in the deflate (gzip) filter");
    if (have_filter) {
        read_and_check("test filter with its decoder", lz1, NULL, 0, -1, 400, 4, 64);
        if (register_test_filter(0)) {
            /* inspected while the decoder was there (rank 0 keeps that
             * inspection): the read fails, and the cause is named */
            o.path = lz1;
            expect_bad("decoder gone after inspection", &o,
                       "LZF filter (id 32000), which this HDF5 library has without its decoder");
            /* a file inspected now */
            o.path = lz2;
            expect_bad("filter without decoder", &o,
                       "LZF filter (id 32000), which this HDF5 library has without its decoder");
        }
    }
    if (!can_szip) {
        if (g_rank == 0) printf("  skipped: szip (this HDF5 cannot write it)\n");
        return;
    }
    read_and_check("szip dataset", sz, NULL, 0, -1, 400, 4, 64);
    ghf__h5_set_hidden_filter(H5Z_FILTER_SZIP);
    o.path = sz2; /* inspected now (the inspection of sz is kept, and the real decoder reads it) */
    expect_bad("szip hidden from the checks", &o, "szip filter (id 4), which is not available to this HDF5 build");
    expect_bad("szip hidden from the checks", &o, "h5repack -f NONE");
    ghf__h5_set_hidden_filter(-1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_rank == 0) {
        const char *base = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/ghf_test_io_XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(g_dir)) {
            perror("mkdtemp");
            g_dir[0] = '\0';
        }
    }
    MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!g_dir[0]) MPI_Abort(MPI_COMM_WORLD, 1);

    test_block_range();
    test_round_trips();
    test_chunked_and_int();
    test_bad_inputs();
    test_nonfinite();
    test_f32_keep();
    test_gen_errors();
    test_named_causes();

    int fails = 0, checks = 0;
    MPI_Allreduce(&g_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (fails == 0) {
            char cmd[400];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
            if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
        } else {
            fprintf(stderr, "files kept in %s\n", g_dir);
        }
        printf("test_io: %d ranks, %d checks, %d failures\n", g_size, checks, fails);
    }
    MPI_Finalize();
    return fails ? 1 : 0;
}
