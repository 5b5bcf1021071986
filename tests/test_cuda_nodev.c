/* test_cuda_nodev.c - the CUDA build on a machine without a usable GPU (the
 * CI case): ghf_cuda_device_count() is 0 (no driver: cudaErrorInsufficientDriver),
 * creating the CUDA backend fails cleanly on every rank with a message (no
 * hang, no crash), and "auto" falls back to the CPU backend.  On a machine
 * with a GPU the first checks do not apply and the test is skipped (77). */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "backend.h"
#include "cuda_opts.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, fails = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (ghf_cuda_device_count() > 0) {
        if (rank == 0) printf("SKIP: this machine has a CUDA device\n");
        MPI_Finalize();
        return 77;
    }
    const double x[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    char err[512] = "";
    ghf_backend *be = ghf_backend_cuda_create(MPI_COMM_WORLD, x, 3, 2, err, sizeof err);
    if (be != NULL || err[0] == '\0') {
        fprintf(stderr, "FAIL: CUDA backend created without a device, or no message\n");
        fails++;
        if (be) be->destroy(be);
    } else if (rank == 0) {
        printf("cuda create without a device: \"%s\"\n", err);
    }
    /* the same with the MPI reduction, and with device-resident data requested */
    ghf_cuda_opts o;
    ghf_cuda_opts_default(&o);
    o.reduce = GHF_CUDA_REDUCE_MPI;
    err[0] = '\0';
    be = ghf_backend_cuda_create_opts(MPI_COMM_WORLD, x, 3, 2, &o, err, sizeof err);
    if (be != NULL || err[0] == '\0') {
        fprintf(stderr, "FAIL: CUDA backend (MPI reduction) created without a device\n");
        fails++;
        if (be) be->destroy(be);
    }
    if (ghf_cuda_generate_device(MPI_COMM_WORLD, 10, 2, 1, err, sizeof err) != NULL) {
        fprintf(stderr, "FAIL: device data generated without a device\n");
        fails++;
    }
    int status = 0;
    be = ghf_backend_create(MPI_COMM_WORLD, "auto", x, 3, 2, &status, err, sizeof err);
    if (!be || strcmp(be->name, "cpu") != 0) {
        fprintf(stderr, "FAIL: auto did not choose the CPU backend (%s)\n", be ? be->name : err);
        fails++;
    }
    if (be) be->destroy(be);
    be = ghf_backend_create(MPI_COMM_WORLD, "cuda", x, 3, 2, &status, err, sizeof err);
    if (be || status != 2) {
        fprintf(stderr, "FAIL: --backend cuda without a device: status %d\n", status);
        fails++;
        if (be) be->destroy(be);
    }
    int any = 0;
    MPI_Allreduce(&fails, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s\n", any ? "FAILED" : "PASSED");
    MPI_Finalize();
    return any ? 1 : 0;
}
