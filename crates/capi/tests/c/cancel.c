/* MPI_Cancel of sends and receives still in flight, checked with MPI_Test_cancelled:
 * a rendezvous send nobody receives is cancelled (the receiver never sees it: a later
 * message with the same tag is the one it gets, and no message is left to probe); an
 * unmatched receive is cancelled; a send the receiver has already matched completes
 * normally. Every rank pairs with its neighbour (rank ^ 1); a lone last rank only
 * cancels a receive. */
#include "check.h"
#include <string.h>

#define BIG (8 << 20) /* past the eager limit on every medium (4 MiB on shared memory) */

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int peer = rank ^ 1, flag = -1;
    MPI_Request r;
    MPI_Status st;
    /* An unmatched receive. */
    int x;
    OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &r));
    OK(MPI_Cancel(&r));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1);
    if (peer < size) {
        char *big = malloc(BIG), *in = malloc(BIG);
        for (int round = 0; round < 3; round++) {
            if (rank % 2 == 0) {
                /* A rendezvous send the peer never receives: cancelled. */
                memset(big, 'a' + round, BIG);
                OK(MPI_Isend(big, BIG, MPI_CHAR, peer, 5, MPI_COMM_WORLD, &r));
                OK(MPI_Cancel(&r));
                OK(MPI_Wait(&r, &st));
                OK(MPI_Test_cancelled(&st, &flag));
                CHECK(flag == 1);
                /* Then the message the peer does receive, with the same tag. */
                memset(big, 'A' + round, BIG);
                OK(MPI_Isend(big, BIG, MPI_CHAR, peer, 5, MPI_COMM_WORLD, &r));
            }
            OK(MPI_Barrier(MPI_COMM_WORLD));
            if (rank % 2 == 0) OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            if (rank % 2 == 1) {
                OK(MPI_Recv(in, BIG, MPI_CHAR, peer, 5, MPI_COMM_WORLD, &st));
                CHECK(in[0] == 'A' + round && in[BIG - 1] == 'A' + round);
                OK(MPI_Iprobe(peer, 5, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
                CHECK(flag == 0); /* the cancelled one is gone */
            }
            OK(MPI_Barrier(MPI_COMM_WORLD));
        }
        /* A send the receiver matched first completes normally. */
        if (rank % 2 == 1) {
            OK(MPI_Irecv(in, BIG, MPI_CHAR, peer, 6, MPI_COMM_WORLD, &r));
            OK(MPI_Barrier(MPI_COMM_WORLD));
            OK(MPI_Wait(&r, &st));
            CHECK(in[7] == 'z');
        } else {
            OK(MPI_Barrier(MPI_COMM_WORLD));
            memset(big, 'z', BIG);
            OK(MPI_Isend(big, BIG, MPI_CHAR, peer, 6, MPI_COMM_WORLD, &r));
            /* The receive is posted: whatever the cancel does, the peer must get the
             * data unless the cancel succeeded — and then it would hang, so: */
            OK(MPI_Wait(&r, &st));
            OK(MPI_Test_cancelled(&st, &flag));
            CHECK(flag == 0);
        }
        free(big);
        free(in);
    } else {
        for (int round = 0; round < 3; round++) {
            OK(MPI_Barrier(MPI_COMM_WORLD));
            OK(MPI_Barrier(MPI_COMM_WORLD));
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    OK(MPI_Finalize());
    if (rank == 0) printf("cancel ok\n");
    return 0;
}
