/* Mismatched collectives from C on shared memory (the lean path to the board): rank 0
 * broadcasts from rank 1 while rank 1 reduces to itself. Both wait for a publication
 * that never comes and must get the mismatch instead of hanging: under MPI_ERRORS_RETURN
 * as an error class (then the job goes on and ends cleanly), by default as a fatal error
 * naming the call. Run with 2 ranks; argv[1] is "return" or "fatal". */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, x = 7, y = 0;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2 && argc == 2);
    int ret = strcmp(argv[1], "return") == 0;
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    if (ret)
        OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    /* A matched call first: the board serves this communicator. */
    OK(MPI_Bcast(&x, 1, MPI_INT, 0, c));
    CHECK(x == 7);
    int rc = rank == 0 ? MPI_Bcast(&x, 1, MPI_INT, 1, c)
                       : MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, 1, c);
    if (!ret) {
        printf("still alive after a fatal mismatch\n");
        return 0;
    }
    int cls = -1;
    OK(MPI_Error_class(rc, &cls));
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER);
    /* The world's board is untouched by the other communicator's failed call. */
    int v = rank + 1, sum = 0;
    OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == 3);
    if (rank == 0)
        printf("coll_mismatch ok\n");
    OK(MPI_Finalize());
    return 0;
}
