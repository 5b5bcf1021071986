/* h5risk.c - the file `ghfit risk` writes: /alpha, /var, /es and root
 * attributes naming the model and the portfolios (docs/output-schema.md),
 * through the writer of small array files (h5gof.c: built in memory and
 * renamed into place when complete). */
#include "h5internal.h"

int ghf_h5_write_risk(const char *path, const ghf_risk_file *r, char *err, size_t errlen)
{
    const ghf_h5_attr at[] = {
        {"model_file", GHF_H5_ATTR_STR, r->model_file, 0, 0},
        {"fit", GHF_H5_ATTR_STR, r->fit_name, 0, 0},
        {"family", GHF_H5_ATTR_STR, r->family, 0, 0},
        {"portfolios_file", GHF_H5_ATTR_STR, r->portfolios_file, 0, 0},
        {"portfolios_dataset", GHF_H5_ATTR_STR, r->portfolios_dataset, 0, 0},
        {"n_portfolios", GHF_H5_ATTR_I64, NULL, 0, r->n_portfolios},
        {"dim", GHF_H5_ATTR_I64, NULL, 0, r->d},
        {"loss", GHF_H5_ATTR_STR, "L = -w'X (VaR_alpha: the alpha-quantile of L; ES_alpha = E[L | L >= VaR_alpha])",
         0, 0},
        {"note", GHF_H5_ATTR_STR, r->note, 0, 0},
        {"n_components", GHF_H5_ATTR_I64, NULL, 0, r->n_components}};
    ghf_h5_attr a2[10];
    int n_at = 0;
    for (int i = 0; i < 10; i++)
        if ((i != 8 || r->note) && (i != 9 || r->n_components >= 2)) a2[n_at++] = at[i];
    const ghf_h5_array arr[] = {
        {"alpha", 1, {r->n_alpha, 0, 0}, r->alpha, "confidence levels alpha [K]"},
        {"var", 2, {r->n_portfolios, r->n_alpha, 0}, r->var,
         "Value-at-Risk [P][K]: the alpha-quantile of the loss L = -w'X of each portfolio w"},
        {"es", 2, {r->n_portfolios, r->n_alpha, 0}, r->es,
         "Expected Shortfall [P][K]: E[L | L >= VaR_alpha] (+inf where the tail has no mean)"}};
    return ghf_h5_write_arrays(path, r->meta, "risk", n_at, a2, 3, arr, err, errlen);
}
