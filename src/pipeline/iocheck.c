/* iocheck.c - see iocheck.h */
#include "iocheck.h"

#include <stdio.h>
#include <string.h>

#include "resume.h"
#include "agree.h"
#include "h5io.h"
#include "util.h"

ghf_io_plan ghf_io_plan_of(const ghf_job *j, int fit, int n_ranks)
{
    const ghf_io_plan p = {.data = j->data_file, .dataset = j->dataset, .win_start = fit ? j->rows_start : 0,
                           .win_len = fit ? j->rows_len : -1, .fit_shape = fit,
                           .factor_only = ghf_job_factor_only(j), .n_ranks = n_ranks,
                           .job_file = fit ? NULL : j->source, .out = j->out, .out_kind = GHF_PATH_RESULT,
                           .checkpoint = j->checkpoint};
    return p;
}

/* Rank 0: the data set, its shape and the window. */
static int check_inputs(const ghf_io_plan *p, int64_t *n_rows, int *d, char *file, size_t file_len, char *err,
                        size_t errlen)
{
    if (!p->data) return 0;
    int st = ghf_h5_probe_file(p->data, p->dataset, n_rows, d, file, file_len, err, errlen);
    if (st || !p->fit_shape) return st;
    char what[1200];
    snprintf(what, sizeof what, "%s:%s", p->data, p->dataset && *p->dataset ? p->dataset : "/X");
    int64_t rows = 0;
    st = ghf_h5_window(what, *n_rows, p->win_start, p->win_len, &rows, err, errlen);
    /* the factor form fits N < d (docs/math.md 9): the d + 1 rows of a full Sigma are not needed */
    if (!st) st = ghf_fit_shape_check(what, p->factor_only && rows < *d + 1 ? *d + 1 : rows, *d, p->n_ranks, err, errlen);
    return st;
}

/* Rank 0: the outputs, their identities and signatures, the locks. */
static int check_outputs(const ghf_io_plan *p, const char *data_file, char *err, size_t errlen)
{
    int (*out_check)(const char *, char *, size_t) = p->dry ? ghf_h5_out_check_access : ghf_h5_out_check;
    int (*lock)(const char *, char *, size_t) = p->dry ? ghf_out_lock_query : ghf_out_lock;
    int st = out_check(p->out, err, errlen);
    if (!st && p->checkpoint) st = out_check(p->checkpoint, err, errlen);
    if (st) return st;
    char prev[4200];
    ghf_path_use u[7];
    int n = 0;
    if (p->data) u[n++] = (ghf_path_use){p->data, "--data", GHF_PATH_INPUT, NULL};
    if (p->data && data_file[0] && !ghf_same_file(p->data, data_file))
        u[n++] = (ghf_path_use){data_file, "the file behind --data's external link", GHF_PATH_INPUT, NULL};
    if (p->job_file) u[n++] = (ghf_path_use){p->job_file, "the job file", GHF_PATH_INPUT, NULL};
    if (p->model) u[n++] = (ghf_path_use){p->model, "--model", GHF_PATH_INPUT, NULL};
    u[n++] = (ghf_path_use){p->out, "--out", (ghf_path_kind)p->out_kind, p->out_dataset};
    if (p->checkpoint) {
        ghf_ckpt_prev_path(p->checkpoint, prev, sizeof prev);
        u[n++] = (ghf_path_use){p->checkpoint, "--checkpoint", GHF_PATH_CHECKPOINT, NULL};
        u[n++] = (ghf_path_use){prev, "the checkpoint's _prev file", GHF_PATH_CHECKPOINT, NULL};
    }
    st = ghf_paths_check(u, n, err, errlen);
    if (!st) st = lock(p->out, err, errlen);
    if (!st && p->checkpoint) st = lock(p->checkpoint, err, errlen);
    return st;
}

int ghf_io_check_local(const ghf_io_plan *p, int64_t *n_rows, int *d, char *file, size_t file_len, char *err,
                       size_t errlen)
{
    int64_t n = 0;
    int dd = 0;
    file[0] = '\0';
    int st = check_inputs(p, &n, &dd, file, file_len, err, errlen);
    if (!st) st = check_outputs(p, file, err, errlen);
    if (n_rows) *n_rows = n;
    if (d) *d = dd;
    return st;
}

int ghf_io_check(MPI_Comm comm, const ghf_io_plan *p, int64_t *n_rows, int *d, char *err, size_t errlen)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int64_t n = 0;
    int dd = 0, st = 0;
    if (rank == 0) {
        char file[4096];
        st = ghf_io_check_local(p, &n, &dd, file, sizeof file, err, errlen);
    }
    /* rank 0 checked; any rank may fail (the test hook): agreed, with the message */
    if (!st && ghf_test_fail("output", err, errlen)) st = GHF_EXIT_RUNTIME;
    st = ghf_agree(comm, st, err, errlen);
    if (st) return st;
    int64_t meta[2] = {n, dd};
    MPI_Bcast(meta, 2, MPI_INT64_T, 0, comm);
    if (n_rows) *n_rows = meta[0];
    if (d) *d = (int)meta[1];
    return 0;
}
