/* Request-based one-sided operations under MPI_Win_lock_all: MPI_Rput (small and above
 * the 8 KiB a control message carries; the origin buffer is reused once MPI_Wait
 * returns), MPI_Rget (data there when MPI_Wait returns, before any flush), MPI_Raccumulate
 * and MPI_Rget_accumulate waited with MPI_Wait, MPI_Waitall and MPI_Test, the _c forms,
 * and MPI_PROC_NULL targets. Runs on any number of ranks. */
#include "check.h"
#include <string.h>

#define N 5000 /* ints per block */

int main(int argc, char **argv) {
    int rank, p;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    int next = (rank + 1) % p, prev = (rank + p - 1) % p;
    /* Blocks: 0 written by Rput, 1 read by Rget, then a counter and p result slots. */
    int *w;
    MPI_Win win;
    OK(MPI_Win_allocate((MPI_Aint)((2 * N + 1 + p) * sizeof(int)), sizeof(int),
                        MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win));
    for (int i = 0; i < N; i++) {
        w[i] = -1;
        w[N + i] = rank * 100000 + i;
    }
    for (int i = 2 * N; i < 2 * N + 1 + p; i++) w[i] = 0;
    OK(MPI_Win_sync(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    int *src = malloc(N * sizeof(int)), *dst = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) {
        src[i] = rank * 1000 + i;
        dst[i] = -5;
    }
    MPI_Request rq[4];
    OK(MPI_Win_lock_all(0, win));
    /* A large put: once its request completes, the buffer is the program's again. */
    OK(MPI_Rput(src, N, MPI_INT, next, 0, N, MPI_INT, win, &rq[0]));
    CHECK(rq[0] != MPI_REQUEST_NULL);
    OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    CHECK(rq[0] == MPI_REQUEST_NULL);
    for (int i = 0; i < N; i++) src[i] = -9;
    /* A large get: the data is there when its wait returns. */
    OK(MPI_Rget(dst, N, MPI_INT, next, N, N, MPI_INT, win, &rq[1]));
    OK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++) CHECK(dst[i] == next * 100000 + i);
    /* Accumulates into rank 0's counter; a fetch of the next rank's counter slot. */
    int one = 1, fetched = -1, small = 3 + rank, peek = -1;
    OK(MPI_Raccumulate(&one, 1, MPI_INT, 0, 2 * N, 1, MPI_INT, MPI_SUM, win, &rq[0]));
    OK(MPI_Rget_accumulate(&small, 1, MPI_INT, &fetched, 1, MPI_INT, next, 2 * N + 1 + rank,
                           1, MPI_INT, MPI_REPLACE, win, &rq[1]));
    OK(MPI_Rput_c(&small, (MPI_Count)1, MPI_INT, MPI_PROC_NULL, 0, (MPI_Count)1, MPI_INT, win,
                  &rq[2]));
    OK(MPI_Rget_c(&peek, (MPI_Count)1, MPI_INT, prev, (MPI_Aint)N, (MPI_Count)1, MPI_INT, win,
                  &rq[3]));
    OK(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(rq[i] == MPI_REQUEST_NULL);
    CHECK(fetched == 0);
    CHECK(peek == prev * 100000);
    /* MPI_Test until done, on the large-count forms. */
    int flag = 0, two[2] = {0, 0};
    OK(MPI_Raccumulate_c(&one, (MPI_Count)1, MPI_INT, 0, 2 * N, (MPI_Count)1, MPI_INT, MPI_SUM,
                         win, &rq[0]));
    OK(MPI_Rget_accumulate_c(NULL, (MPI_Count)0, MPI_INT, two, (MPI_Count)2, MPI_INT, next,
                             (MPI_Aint)N, (MPI_Count)2, MPI_INT, MPI_NO_OP, win, &rq[1]));
    while (!flag) OK(MPI_Testall(2, rq, &flag, MPI_STATUSES_IGNORE));
    CHECK(two[0] == next * 100000 && two[1] == next * 100000 + 1);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_sync(win));
    for (int i = 0; i < N; i++) CHECK(w[i] == prev * 1000 + i);
    if (rank == 0) CHECK(w[2 * N] == 2 * p);
    CHECK(w[2 * N + 1 + prev] == 3 + prev);
    /* A request-based operation outside a lock is an epoch error, its request null. */
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    rq[0] = (MPI_Request)0x1234;
    CHECK(MPI_Rput(&one, 1, MPI_INT, next, 0, 1, MPI_INT, win, &rq[0]) == MPI_ERR_RMA_SYNC);
    CHECK(rq[0] == MPI_REQUEST_NULL);
    OK(MPI_Win_free(&win));
    free(src);
    free(dst);
    printf("rma_req ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
