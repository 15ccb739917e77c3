/*
 * boundary.c: the cost of crossing the MPI C interface, per call, with as little work
 * behind it as the standard allows. Built with `phalanx cc` and with Open MPI's mpicc
 * alike (bench/boundary.sh runs both and prints the ratios).
 *
 *   mpirun -n 1 ./boundary [calls]      (default 2000000 per measurement)
 *
 * comm_rank    MPI_Comm_rank(MPI_COMM_WORLD): entry, handle lookup, exit
 * proc_null    MPI_Isend to MPI_PROC_NULL + MPI_Wait with a status: a request handle
 *              made and completed, a status written
 * iprobe       MPI_Iprobe with nothing to find: one round of progress
 * self         MPI_Isend to self + MPI_Recv (1 byte) + MPI_Wait: the local path
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double per_call_ns(double start, long calls) {
    return (MPI_Wtime() - start) * 1e9 / (double)calls;
}

int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 2000000, i;
    int rank, flag;
    char c = 'x', d = 0;
    MPI_Request req;
    MPI_Status st;
    double t;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("# C boundary: ns per call (%ld calls each)\n", calls);

    for (i = 0; i < calls / 10; i++)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    t = MPI_Wtime();
    for (i = 0; i < calls; i++)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("comm_rank %12.1f\n", per_call_ns(t, calls));

    t = MPI_Wtime();
    for (i = 0; i < calls; i++) {
        MPI_Isend(&c, 1, MPI_CHAR, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, &st);
    }
    if (rank == 0)
        printf("proc_null %12.1f\n", per_call_ns(t, calls));

    t = MPI_Wtime();
    for (i = 0; i < calls; i++)
        MPI_Iprobe(MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &flag, &st);
    if (rank == 0)
        printf("iprobe %15.1f\n", per_call_ns(t, calls));

    t = MPI_Wtime();
    for (i = 0; i < calls / 4; i++) {
        MPI_Isend(&c, 1, MPI_CHAR, rank, 2, MPI_COMM_WORLD, &req);
        MPI_Recv(&d, 1, MPI_CHAR, rank, 2, MPI_COMM_WORLD, &st);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (rank == 0)
        printf("self %17.1f\n", per_call_ns(t, calls / 4));
    if (d != c)
        fprintf(stderr, "boundary: self message lost\n");
    MPI_Finalize();
    return d == c ? 0 : 1;
}
