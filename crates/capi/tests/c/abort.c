/* MPI_Abort ends the whole job with its code, while the other ranks are blocked. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, x = 0;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 7);
    MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never */
    printf("rank %d: not aborted\n", rank);
    return 0;
}
