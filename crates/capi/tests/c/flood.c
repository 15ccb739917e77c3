/* A flood: rank 0 sends many eager messages to rank 1 before rank 1 posts any receive,
 * then rank 1 receives them all in order and checks every byte. Under the careful
 * protocol (PHALANX_RELIABLE_NET=1) the frames wait in their receive buffers, are copied
 * out only as the protocol advises and the unexpected-message limit allows, and the
 * sender is held back by its window meanwhile. Argument: messages (default 4000). */
#define _POSIX_C_SOURCE 199309L
#include "check.h"
#include <string.h>
#include <time.h>

#define LEN 1000

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2);
    int n = argc > 1 ? atoi(argv[1]) : 4000;
    static unsigned char buf[LEN];
    if (rank == 0) {
        for (int i = 0; i < n; i++) {
            memset(buf, (unsigned char)i, LEN);
            buf[0] = (unsigned char)(i >> 8);
            OK(MPI_Send(buf, LEN, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
        }
    } else if (rank == 1) {
        struct timespec nap = {0, 300 * 1000 * 1000};
        nanosleep(&nap, NULL); /* the flood arrives before any receive is posted */
        for (int i = 0; i < n; i++) {
            MPI_Status st;
            OK(MPI_Recv(buf, LEN, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &st));
            int count = -1;
            OK(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK(count == LEN);
            CHECK(buf[0] == (unsigned char)(i >> 8));
            for (int k = 1; k < LEN; k++)
                CHECK(buf[k] == (unsigned char)i);
        }
    }
    /* Held messages keep MPI's order: a receive takes the first message it matches, a
     * later one another receive wants overtakes it, a probe sees a held one. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int v[4] = {1, 2, 3, 4};
        OK(MPI_Send(&v[0], 1, MPI_INT, 1, 7, MPI_COMM_WORLD));
        OK(MPI_Send(&v[1], 1, MPI_INT, 1, 8, MPI_COMM_WORLD));
        OK(MPI_Send(&v[2], 1, MPI_INT, 1, 9, MPI_COMM_WORLD));
        OK(MPI_Send(&v[3], 1, MPI_INT, 1, 9, MPI_COMM_WORLD));
    } else if (rank == 1) {
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        int x = 0, count = 0;
        MPI_Status st;
        OK(MPI_Recv(&x, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, &st));
        CHECK(x == 2 && st.MPI_TAG == 8);
        OK(MPI_Probe(0, 9, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 1 && st.MPI_TAG == 9);
        OK(MPI_Recv(&x, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(x == 1 && st.MPI_TAG == 7);
        OK(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(x == 3 && st.MPI_TAG == 9);
        OK(MPI_Recv(&x, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, &st));
        CHECK(x == 4);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    if (rank == 0)
        printf("flood ok\n");
    return 0;
}
