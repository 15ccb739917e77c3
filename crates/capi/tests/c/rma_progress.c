/* The progress thread (PHALANX_PROGRESS_THREAD=1, set here, at MPI_THREAD_MULTIPLE): rank 1 makes
 * no MPI call while rank 0 locks its window, puts a value and unlocks (which needs rank
 * 1's answer); rank 1 sees the value land in its memory meanwhile. Without a progress
 * thread rank 1 would wait out its 20 s bound and fail. Run on 2 ranks. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <time.h>

int main(int argc, char **argv) {
    int provided = -1, rank, size;
    CHECK(setenv("PHALANX_PROGRESS_THREAD", "1", 1) == 0);
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2);
    static long mem[4];
    MPI_Win win;
    OK(MPI_Win_create(mem, sizeof mem, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    for (int round = 1; round <= 3; round++) {
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) {
            long v = 1000 + round;
            OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win));
            OK(MPI_Put(&v, 1, MPI_LONG, 1, round, 1, MPI_LONG, win));
            OK(MPI_Win_unlock(1, win));
        } else {
            /* No MPI call until the value is there (at most 20 s). */
            struct timespec ms = {0, 1000000L};
            int waited = 0;
            while (__atomic_load_n(&mem[round], __ATOMIC_ACQUIRE) != 1000 + round) {
                CHECK(waited++ < 20000);
                nanosleep(&ms, NULL);
            }
        }
    }
    OK(MPI_Win_free(&win));
    printf("rma_progress ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
