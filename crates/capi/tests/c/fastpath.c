/* The small-message path (requests held by the engine, handles that carry its ids):
 * freed requests do not pile up, a non-consuming test keeps the status for the next
 * completion, stale handles are errors, statuses name the right source, a freed
 * rendezvous send still completes before MPI_Finalize returns. Ranks 0 and 1 take part,
 * others only finalize. Argument: chunks of 1000 freed receives (default 20; above
 * 1100 the engine's table would overflow if freed requests were kept). */
#include "check.h"
#include <string.h>

#define CHUNK 1000

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2);
    long chunks = argc > 1 ? atol(argv[1]) : 20;
    static int slots[CHUNK];
    int ack = 0;
    MPI_Status st;

    /* 1. Receives freed while pending complete on their own and release their entries. */
    for (long c = 0; c < chunks && rank < 2; c++) {
        if (rank == 1) {
            for (int j = 0; j < CHUNK; j++) {
                MPI_Request r;
                OK(MPI_Irecv(&slots[j], 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r));
                OK(MPI_Request_free(&r));
                CHECK(r == MPI_REQUEST_NULL);
            }
            OK(MPI_Recv(&ack, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            /* The ack follows the data from the same sender: every slot is filled. */
            for (int j = 0; j < CHUNK; j++)
                CHECK(slots[j] == (int)(c * CHUNK + j));
        } else {
            for (int j = 0; j < CHUNK; j++) {
                int v = (int)(c * CHUNK + j);
                OK(MPI_Send(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD));
            }
            OK(MPI_Send(&ack, 1, MPI_INT, 1, 2, MPI_COMM_WORLD));
        }
    }

    /* 2. A status found by a non-consuming test is kept for the completing call. */
    if (rank == 0) {
        int a = 7, b = 8;
        OK(MPI_Send(&a, 1, MPI_INT, 1, 10, MPI_COMM_WORLD));
        OK(MPI_Recv(&ack, 1, MPI_INT, 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Send(&b, 1, MPI_INT, 1, 11, MPI_COMM_WORLD));
    } else if (rank == 1) {
        int got[2] = {0, 0}, flag = 0;
        MPI_Request r[2], copy;
        MPI_Status sts[2];
        OK(MPI_Irecv(&got[0], 1, MPI_INT, 0, 10, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Irecv(&got[1], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[1]));
        while (!flag)
            OK(MPI_Request_get_status(r[0], &flag, &st));
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 10 && got[0] == 7);
        OK(MPI_Testall(2, r, &flag, sts));
        CHECK(flag == 0 && r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL);
        copy = r[0];
        OK(MPI_Send(&ack, 1, MPI_INT, 0, 12, MPI_COMM_WORLD));
        OK(MPI_Waitall(2, r, sts));
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
        CHECK(sts[0].MPI_SOURCE == 0 && sts[0].MPI_TAG == 10);
        CHECK(sts[1].MPI_SOURCE == 0 && sts[1].MPI_TAG == 11 && got[1] == 8);
        int n = -1;
        OK(MPI_Get_count(&sts[1], MPI_INT, &n));
        CHECK(n == 1);
        /* 3. A completed request's handle is stale. */
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        CHECK(MPI_Wait(&copy, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    /* 3b. MPI_Waitall over a mix: a receive, a rendezvous send, MPI_PROC_NULL
     * transfers and MPI_REQUEST_NULL; every status right, every handle nulled. */
    if (rank < 2) {
        enum { RV = 1 << 20 };
        char *out = malloc(RV), *in = malloc(RV);
        CHECK(out && in);
        memset(out, 'a' + rank, RV);
        MPI_Request r[5];
        MPI_Status sts[5];
        int other = 1 - rank, small = 0, tiny = 7 + rank;
        OK(MPI_Irecv(in, RV, MPI_CHAR, other, 50, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Isend(out, RV, MPI_CHAR, other, 50, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Irecv(&small, 1, MPI_INT, MPI_PROC_NULL, 51, MPI_COMM_WORLD, &r[2]));
        r[3] = MPI_REQUEST_NULL;
        OK(MPI_Isend(&tiny, 1, MPI_INT, other, 52, MPI_COMM_WORLD, &r[4]));
        OK(MPI_Waitall(5, r, sts));
        for (int k = 0; k < 5; k++)
            CHECK(r[k] == MPI_REQUEST_NULL);
        CHECK(sts[0].MPI_SOURCE == other && sts[0].MPI_TAG == 50);
        CHECK(in[0] == 'a' + other && in[RV - 1] == 'a' + other);
        CHECK(sts[2].MPI_SOURCE == MPI_PROC_NULL);
        OK(MPI_Recv(&small, 1, MPI_INT, other, 52, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(small == 7 + other);
        free(out);
        free(in);
    }

    /* 4. On a communicator whose ranks are not world ranks, statuses use its ranks. */
    MPI_Comm rev;
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev));
    int rr;
    OK(MPI_Comm_rank(rev, &rr));
    CHECK(rr == size - 1 - rank);
    if (rank == 1) {
        int v = 42;
        MPI_Request r;
        OK(MPI_Isend(&v, 1, MPI_INT, size - 1, 30, rev, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank == 0) {
        int v = 0;
        MPI_Request r;
        OK(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 30, rev, &r));
        OK(MPI_Wait(&r, &st));
        CHECK(v == 42 && st.MPI_SOURCE == size - 2 && st.MPI_TAG == 30);
        OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 31, rev, &st));
        CHECK(v == 43 && st.MPI_SOURCE == size - 2);
    }
    if (rank == 1) {
        int v = 43;
        OK(MPI_Send(&v, 1, MPI_INT, size - 1, 31, rev));
    }
    OK(MPI_Comm_free(&rev));

    /* 5. A freed rendezvous send completes before MPI_Finalize returns. */
    enum { BIG = 4 << 20 };
    char *big = malloc(BIG);
    CHECK(big != NULL);
    if (rank == 0) {
        MPI_Request r;
        memset(big, 'x', BIG);
        OK(MPI_Isend(big, BIG, MPI_CHAR, 1, 40, MPI_COMM_WORLD, &r));
        OK(MPI_Request_free(&r));
    } else if (rank == 1) {
        memset(big, 0, BIG);
        OK(MPI_Recv(big, BIG, MPI_CHAR, 0, 40, MPI_COMM_WORLD, &st));
        CHECK(big[0] == 'x' && big[BIG - 1] == 'x');
    }
    OK(MPI_Finalize());
    if (rank == 0)
        printf("fastpath ok\n");
    free(big);
    return 0;
}
