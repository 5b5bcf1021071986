/* h5get.c - test helper: print an attribute of an HDF5 object, or the values
 * of a numeric dataset.
 *   h5get FILE OBJECT ATTRIBUTE   (numbers with %.17g, strings as they are)
 *   h5get FILE DATASET            (every value, one per line)
 * Exit 1 when the file, object or attribute does not exist. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>

static int print_attr(hid_t obj, const char *name)
{
    hid_t at = H5Aopen(obj, name, H5P_DEFAULT);
    if (at < 0) return 1;
    hid_t ty = H5Aget_type(at);
    int rc = 0;
    if (H5Tget_class(ty) == H5T_STRING) {
        if (H5Tis_variable_str(ty)) {
            char *s = NULL;
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(ty));
            if (H5Aread(at, mt, &s) >= 0 && s) printf("%s\n", s);
            else rc = 1;
            H5free_memory(s);
            H5Tclose(mt);
        } else {
            size_t n = H5Tget_size(ty);
            char *s = calloc(n + 1, 1);
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, n + 1);
            H5Tset_cset(mt, H5Tget_cset(ty));
            if (H5Aread(at, mt, s) >= 0) printf("%s\n", s);
            else rc = 1;
            H5Tclose(mt);
            free(s);
        }
    } else {
        double v;
        rc = H5Aread(at, H5T_NATIVE_DOUBLE, &v) < 0;
        if (!rc) printf("%.17g\n", v);
    }
    H5Tclose(ty);
    H5Aclose(at);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: h5get FILE OBJECT [ATTRIBUTE]\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return 1;
    int rc = 1;
    if (argc == 4) {
        hid_t o = H5Oopen(f, argv[2], H5P_DEFAULT);
        if (o >= 0) {
            rc = print_attr(o, argv[3]);
            H5Oclose(o);
        }
    } else {
        hid_t ds = H5Dopen2(f, argv[2], H5P_DEFAULT);
        if (ds >= 0) {
            hid_t sp = H5Dget_space(ds);
            hssize_t n = H5Sget_simple_extent_npoints(sp);
            double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
            if (H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0) {
                for (hssize_t i = 0; i < n; i++) printf("%.17g\n", v[i]);
                rc = 0;
            }
            free(v);
            H5Sclose(sp);
            H5Dclose(ds);
        }
    }
    H5Fclose(f);
    return rc;
}
