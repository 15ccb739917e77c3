/* Under the default MPI_ERRORS_ARE_FATAL an error ends the job, naming the call. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size, x = 0;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (rank == size - 1) {
        MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD); /* invalid rank */
        printf("still alive after a fatal error\n");
        return 0;
    }
    MPI_Recv(&x, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never */
    return 0;
}
