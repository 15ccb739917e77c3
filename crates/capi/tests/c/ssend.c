#define _DEFAULT_SOURCE
/* Synchronous mode: MPI_Issend/MPI_Ssend complete only after the receive matched.
 * Rank 1 posts its receive only after rank 0 sends a "go" message, which rank 0 sends
 * only after checking (many MPI_Test calls, each driving progress) that its Issend has
 * not completed: an eager (standard-mode) send would have completed at once. */
#include "check.h"
#include <string.h>
#include <unistd.h>

static void round_trip(int rank, int n) {
    static int big[1 << 18];
    int go = 1;
    if (rank == 0) {
        for (int i = 0; i < n; i++) big[i] = i * 7 + n;
        MPI_Request r;
        int flag = 0;
        OK(MPI_Issend(big, n, MPI_INT, 1, 5, MPI_COMM_WORLD, &r));
        for (int i = 0; i < 200; i++) {
            OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag); /* the receive is not posted yet */
            usleep(500);
        }
        OK(MPI_Send(&go, 1, MPI_INT, 1, 7, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        /* Blocking Ssend: returns after the match; the receiver then reports. */
        OK(MPI_Ssend(big, n, MPI_INT, 1, 6, MPI_COMM_WORLD));
    } else if (rank == 1) {
        MPI_Status st;
        int count;
        OK(MPI_Recv(&go, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        memset(big, 0, sizeof big);
        OK(MPI_Recv(big, n, MPI_INT, 0, 5, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == n);
        for (int i = 0; i < n; i++) CHECK(big[i] == i * 7 + n);
        OK(MPI_Recv(big, n, MPI_INT, 0, 6, MPI_COMM_WORLD, &st));
        for (int i = 0; i < n; i++) CHECK(big[i] == i * 7 + n);
    }
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int sizes[] = {0, 1, 100, 1 << 18};
    for (int i = 0; i < 4; i++) round_trip(rank, sizes[i]);

    /* Issend to self: incomplete until the matching receive is posted. */
    int v = 42, w = 0, flag = 0;
    MPI_Request s, r;
    OK(MPI_Issend(&v, 1, MPI_INT, rank, 9, MPI_COMM_WORLD, &s));
    OK(MPI_Test(&s, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag);
    OK(MPI_Irecv(&w, 1, MPI_INT, rank, 9, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK(w == 42);

    /* A derived datatype and MPI_PROC_NULL. */
    MPI_Datatype vec;
    int src[6] = {1, 2, 3, 4, 5, 6}, dst[3] = {0, 0, 0};
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    OK(MPI_Irecv(dst, 3, MPI_INT, from, 11, MPI_COMM_WORLD, &r));
    OK(MPI_Ssend(src, 1, vec, peer, 11, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(dst[0] == 1 && dst[1] == 3 && dst[2] == 5);
    OK(MPI_Type_free(&vec));
    OK(MPI_Ssend(src, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));

    /* Error path: an invalid rank is returned under MPI_ERRORS_RETURN. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Ssend(src, 1, MPI_INT, size, 0, MPI_COMM_WORLD) == MPI_ERR_RANK);
    CHECK(MPI_Issend(src, 1, MPI_INT, 0, -5, MPI_COMM_WORLD, &s) == MPI_ERR_TAG);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("ssend ok\n");
    OK(MPI_Finalize());
    return 0;
}
