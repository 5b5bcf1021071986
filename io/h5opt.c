/* h5opt.c - the file `ghfit optimize` writes: /weights, /expected_return,
 * /risk, /sd, /var, /es, /status, /converged, /kkt and root attributes
 * naming the measure, the constraints and the fit (docs/output-schema.md
 * "Optimisation files"), through the writer of small array files (h5gof.c:
 * built in memory, saved as a temporary file and renamed into place). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5internal.h"

int ghf_h5_write_opt(const char *path, const ghf_opt_file *r, char *err, size_t errlen)
{
    const int64_t K = r->n_points, d = r->d;
    ghf_h5_attr at[32];
    int n = 0;
#define ATS(k, v) at[n++] = (ghf_h5_attr){k, GHF_H5_ATTR_STR, v, 0, 0}
#define ATF(k, v) at[n++] = (ghf_h5_attr){k, GHF_H5_ATTR_F64, NULL, v, 0}
#define ATI(k, v) at[n++] = (ghf_h5_attr){k, GHF_H5_ATTR_I64, NULL, 0, v}
    ATS("model_file", r->model_file);
    ATS("fit", r->fit_name);
    ATS("family", r->family);
    ATS("fit_status", r->fit_status);
    ATI("fit_n_obs", r->fit_n_obs);
    ATF("fit_loglik", r->fit_loglik);
    if (r->data_file) {
        ATS("data_file", r->data_file);
        ATS("dataset", r->dataset ? r->dataset : "");
        ATI("row_start", r->row_start);
        ATI("row_count", r->row_count);
    }
    ATI("dim", d);
    ATI("n_points", K);
    ATS("measure", r->measure);
    ATF("alpha", r->alpha);
    ATS("type", r->type);
    ATS("sense", r->losses ? "losses" : "returns");
    ATS("loss", r->losses ? "L = w'X (the data are losses; the return is -w'X)"
                          : "L = -w'X (the data are returns; the return is w'X)");
    ATF("budget", r->budget);
    ATS("constraints", r->constraints);
    if (r->has_target) ATF("target_return", r->target);
    if (r->has_rf) ATF("risk_free", r->rf);
    ATS("optimizer", "NLopt SLSQP (analytic gradients) with a Newton polish on the free coordinates; "
                     "VaR started from the ES and sd optima and the equal-weight point, the best converged kept");
    if (r->note) ATS("note", r->note);
#undef ATS
#undef ATF
#undef ATI
    const ghf_h5_array arr[] = {
        {"weights", 2, {K, d, 0}, r->weights, "portfolio weights [K][d] (one row per point)"},
        {"expected_return", 1, {K, 0, 0}, r->ret, "expected return of each portfolio under the fit [K]"},
        {"risk", 1, {K, 0, 0}, r->risk, "the measure optimised (attribute measure, at alpha) of the loss [K]"},
        {"sd", 1, {K, 0, 0}, r->sd, "standard deviation of the loss [K] (NaN where the variance does not exist)"},
        {"var", 1, {K, 0, 0}, r->var, "VaR_alpha of the loss: its alpha-quantile [K]"},
        {"es", 1, {K, 0, 0}, r->es, "ES_alpha of the loss: E[L | L >= VaR_alpha] [K]"},
        {"status", 1, {K, 0, 0}, r->status,
         "NLopt's result code of the run kept [K] (1 success, 3 ftol, 4 xtol, 5 maxeval, < 0 failure; "
         "0: not optimised, the highest-return vertex that ends a frontier)"},
        {"converged", 1, {K, 0, 0}, r->converged,
         "1 where NLopt succeeded, the point is feasible and the first-order residual is <= 1e-6 [K]"},
        {"kkt", 1, {K, 0, 0}, r->kkt,
         "first-order (KKT) residual: max violation / max |gradient| with least-squares multipliers [K]"},
        {"lower", 1, {d, 0, 0}, r->lower, "each asset's lower bound [d] (-inf: none)"},
        {"upper", 1, {d, 0, 0}, r->upper, "each asset's upper bound [d] (+inf: none)"}};
    return ghf_h5_write_arrays(path, r->meta, "optimize", n, at, 11, arr, err, errlen);
}

int ghf_h5_read_fit_data(const char *path, const char *fit, char *data_file, size_t dlen, char *dataset,
                         size_t slen, int64_t *row_start, int64_t *row_count)
{
    data_file[0] = dataset[0] = '\0';
    *row_start = *row_count = -1;
    hid_t f = -1;
    H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); } H5E_END_TRY;
    if (f < 0) return -1;
    char g[400];
    snprintf(g, sizeof g, "/fits/%s", fit);
    hid_t gr = H5Gopen2(f, g, H5P_DEFAULT);
    int rc = -1;
    if (gr >= 0) {
        char *df = ghf__attr_read_str(gr, "data_file"), *ds = ghf__attr_read_str(gr, "dataset");
        if (df) {
            snprintf(data_file, dlen, "%s", df);
            snprintf(dataset, slen, "%s", ds ? ds : "");
            ghf__attr_read_i64(gr, "row_start", row_start);
            ghf__attr_read_i64(gr, "row_count", row_count);
            rc = 0;
        }
        free(df), free(ds);
        H5Gclose(gr);
    }
    H5Fclose(f);
    return rc;
}
