/* Blocking receives (armed in the engine without a request when nothing older could
 * match): they keep MPI's order against receives posted earlier, take any message kind
 * (whole eager, multi-fragment eager, rendezvous), honour wildcards and report the right
 * status; a message longer than the buffer is MPI_ERR_TRUNCATE and stays queued; a probe
 * (wildcards or not) reports its envelope and length.
 * Rank 0 and the last rank send to rank 1; every other rank only finalizes. */
#include "check.h"
#include <string.h>

#define BIG (1 << 20)

static void fill(unsigned char *p, int n, int seed) {
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(seed + i * 7);
}

static int same(const unsigned char *p, int n, int seed) {
    for (int i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i * 7))
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    int rank, size, ack = 0;
    MPI_Status st;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 3);
    int last = size - 1;
    unsigned char *a = malloc(BIG), *b = malloc(BIG);
    CHECK(a && b);
    int sizes[] = {0, 1, 40, 200, 5000, 70000, BIG};
    int nsizes = (int)(sizeof sizes / sizeof sizes[0]);

    /* 1. Every size, received blocking with exact selectors, from rank 0. */
    for (int k = 0; k < nsizes; k++) {
        if (rank == 0) {
            fill(a, sizes[k], k);
            OK(MPI_Send(a, sizes[k], MPI_BYTE, 1, k, MPI_COMM_WORLD));
        } else if (rank == 1) {
            memset(b, 0, BIG);
            OK(MPI_Recv(b, BIG, MPI_BYTE, 0, k, MPI_COMM_WORLD, &st));
            int n = -1;
            OK(MPI_Get_count(&st, MPI_BYTE, &n));
            CHECK(n == sizes[k] && st.MPI_SOURCE == 0 && st.MPI_TAG == k);
            CHECK(same(b, n, k));
        }
    }

    /* 2. A receive posted earlier takes the first matching message; the blocking receive
     * (same selectors) gets the second, whatever their kinds. */
    for (int k = 0; k < nsizes; k++) {
        if (rank == 0) {
            OK(MPI_Recv(&ack, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            fill(a, sizes[k], 100 + k);
            OK(MPI_Send(a, sizes[k], MPI_BYTE, 1, 5, MPI_COMM_WORLD));
            fill(a, sizes[nsizes - 1 - k], 200 + k);
            OK(MPI_Send(a, sizes[nsizes - 1 - k], MPI_BYTE, 1, 5, MPI_COMM_WORLD));
        } else if (rank == 1) {
            MPI_Request r;
            unsigned char *first = malloc(BIG);
            CHECK(first);
            OK(MPI_Irecv(first, BIG, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &r));
            OK(MPI_Send(&ack, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
            OK(MPI_Recv(b, BIG, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            int n = -1;
            OK(MPI_Get_count(&st, MPI_BYTE, &n));
            CHECK(n == sizes[nsizes - 1 - k] && same(b, n, 200 + k));
            OK(MPI_Wait(&r, &st));
            OK(MPI_Get_count(&st, MPI_BYTE, &n));
            CHECK(n == sizes[k] && same(first, n, 100 + k));
            free(first);
        }
    }

    /* 3. Any source: messages of two senders, each pair's order kept. */
    if (rank == 0 || rank == last) {
        for (int i = 0; i < 50; i++) {
            int v = rank * 1000 + i;
            OK(MPI_Send(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD));
        }
    } else if (rank == 1) {
        int next[2] = {0, 0};
        for (int i = 0; i < 100; i++) {
            int v = -1;
            OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st));
            int who = st.MPI_SOURCE == 0 ? 0 : 1;
            CHECK(st.MPI_SOURCE == 0 || st.MPI_SOURCE == last);
            CHECK(v == st.MPI_SOURCE * 1000 + next[who]);
            next[who]++;
        }
        CHECK(next[0] == 50 && next[1] == 50);
    }

    /* 4. Too long for the buffer: MPI_ERR_TRUNCATE under MPI_ERRORS_RETURN, and the
     * message stays to be received whole. */
    if (rank == 0) {
        fill(a, 64, 9);
        OK(MPI_Send(a, 64, MPI_BYTE, 1, 8, MPI_COMM_WORLD));
    } else if (rank == 1) {
        /* Probed first, with wildcards and without: the envelope and the length. */
        int flag = 0, n = -1;
        while (!flag)
            OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        OK(MPI_Get_count(&st, MPI_BYTE, &n));
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 8 && n == 64);
        OK(MPI_Iprobe(0, 8, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag && st.MPI_SOURCE == 0 && st.MPI_TAG == 8);
        OK(MPI_Iprobe(0, 9, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag);
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        int rc = MPI_Recv(b, 16, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &st);
        int cls = -1;
        OK(MPI_Error_class(rc, &cls));
        CHECK(cls == MPI_ERR_TRUNCATE);
        OK(MPI_Recv(b, 64, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &st));
        CHECK(same(b, 64, 9));
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    /* 5. Ping-pong of every size on a duplicated communicator (its own context). */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    for (int k = 0; k < nsizes && rank < 2; k++) {
        int peer = 1 - rank;
        for (int i = 0; i < 3; i++) {
            if (rank == 0) {
                fill(a, sizes[k], i);
                OK(MPI_Send(a, sizes[k], MPI_BYTE, peer, i, dup));
                OK(MPI_Recv(b, BIG, MPI_BYTE, peer, i, dup, &st));
            } else {
                OK(MPI_Recv(b, BIG, MPI_BYTE, peer, i, dup, &st));
                OK(MPI_Send(b, sizes[k], MPI_BYTE, peer, i, dup));
            }
            int n = -1;
            OK(MPI_Get_count(&st, MPI_BYTE, &n));
            CHECK(n == sizes[k] && same(b, n, i));
        }
    }
    /* 6. Small messages out of receive order, from one sender (the receive looks at
     * that sender's ring first and takes its next frame only if it matches): tag 2 is
     * received before tag 1, a message on the duplicate before one on the world, and a
     * wildcard tag takes the oldest. */
    if (rank == 0) {
        int v[4] = {11, 12, 13, 14};
        OK(MPI_Recv(&ack, 1, MPI_INT, 1, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Send(&v[0], 1, MPI_INT, 1, 1, MPI_COMM_WORLD));
        OK(MPI_Send(&v[1], 1, MPI_INT, 1, 2, MPI_COMM_WORLD));
        OK(MPI_Send(&v[2], 1, MPI_INT, 1, 3, MPI_COMM_WORLD));
        OK(MPI_Send(&v[3], 1, MPI_INT, 1, 3, dup));
    } else if (rank == 1) {
        int v = -1;
        OK(MPI_Send(&ack, 1, MPI_INT, 0, 98, MPI_COMM_WORLD));
        OK(MPI_Recv(&v, 1, MPI_INT, 0, 3, dup, &st));
        CHECK(v == 14 && st.MPI_TAG == 3);
        OK(MPI_Recv(&v, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &st));
        CHECK(v == 12 && st.MPI_TAG == 2);
        OK(MPI_Recv(&v, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(v == 11 && st.MPI_TAG == 1);
        OK(MPI_Recv(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &st));
        CHECK(v == 13 && st.MPI_TAG == 3 && st.MPI_SOURCE == 0);
    }
    OK(MPI_Comm_free(&dup));

    free(a);
    free(b);
    OK(MPI_Finalize());
    if (rank == 1)
        printf("blockrecv ok\n");
    return 0;
}
