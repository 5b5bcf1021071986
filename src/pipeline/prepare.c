/* prepare.c - what a run decides and checks before it fits, shared by the
 * pipeline (pipeline.c) and `ghfit check`: every window's shape, a
 * checkpoint's identity. */
#include "pipeline.h"

#include <stdio.h>

#include "h5io.h"
#include "se.h"

int ghf_pipeline_windows_check(const ghf_job *j, const ghf_fit_spec *specs, int n_specs, int d, int size, char *err,
                               size_t errlen)
{
    int st = 0;
    for (int i = 0; !st && i < n_specs; i++)
        if (i == 0 || specs[i].row_len != specs[i - 1].row_len) {
            char what[1200];
            snprintf(what, sizeof what, "%s: the window of fit %d (rows %lld + %lld of %s:%s)", j->source, i,
                     (long long)specs[i].row_start, (long long)specs[i].row_len, j->data_file, j->dataset);
            const int64_t rows = ghf_job_factor_only(j) && specs[i].row_len < d + 1 ? d + 1 : specs[i].row_len;
            st = ghf_fit_shape_check(what, rows, d, size, err, errlen);
        }
    return st;
}

int ghf_pipeline_sigma_check(const ghf_fit_spec *specs, int n_specs, int d, int se, char *err, size_t errlen)
{
    for (int i = 0; i < n_specs; i++) {
        if (specs[i].sigma_r >= d) { /* --sigma factor:R needs R < d */
            snprintf(err, errlen, "--sigma factor:%d: a factor form needs fewer factors than the %d columns of the data",
                     specs[i].sigma_r, d);
            return 2;
        } else if (specs[i].components > 1 && (int64_t)specs[i].components * (d + 1) > specs[i].row_len) {
            /* every component needs d + 1 rows of its own */
            snprintf(err, errlen,
                     "--components %d: a mixture of %d components of dimension %d needs at least K (d + 1) = %lld rows; "
                     "fit %s has %lld",
                     specs[i].components, specs[i].components, d, (long long)specs[i].components * (d + 1),
                     specs[i].name, (long long)specs[i].row_len);
            return 2;
        }
        if (se && specs[i].sigma_r >= 0 && d > GHF_SE_FACTOR_DMAX) { /* before any fit (src/infer/se.h) */
            snprintf(err, errlen, "--se with --sigma %s: standard errors of a factor-form fit are computed for d <= %d "
                     "columns only (these data have %d)", specs[i].sigma_r ? "factor" : "diag", GHF_SE_FACTOR_DMAX, d);
            return 2;
        }
    }
    return 0;
}

ghf_ckpt_id ghf_pipeline_ckpt_id(const ghf_job *j, ghf_pipe_mode mode, int64_t n_rows, int d, int n_specs,
                                 const char *cfg)
{
    const ghf_ckpt_id id = {mode == GHF_PIPE_FIT ? "fit" : "run", j->data_file, j->dataset, n_rows, d,
                            ghf_job_hash(j), n_specs, mode == GHF_PIPE_FIT ? NULL : cfg, 0, 0, 0, NULL, 0};
    return id;
}
