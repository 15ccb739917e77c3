// A C++ program against phalanx's mpi.h, built with bin/mpicxx and run as a singleton.
#include <mpi.h>
#include <cstdio>

int main(int argc, char **argv) {
    int rank = -1, size = -1;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 3;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int x = 21, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    std::printf("hello from C++: rank %d of %d, sum %d\n", rank, size, y);
    return MPI_Finalize() == MPI_SUCCESS ? 0 : 4;
}
