/* Matched probes and cancel: MPI_Mprobe takes the message out of matching (a later
 * MPI_Probe/MPI_Recv/MPI_Improbe sees only the next one), MPI_Mrecv receives it; a large
 * (rendezvous) message through MPI_Improbe + MPI_Imrecv; a derived datatype; the
 * MPI_PROC_NULL forms (MPI_MESSAGE_NO_PROC); MPI_Cancel of a receive nobody sends to
 * (on the world communicator and on a duplicate), reported by MPI_Test_cancelled;
 * matched probes on MPI_ANY_SOURCE while every other rank sends at once.
 * Every rank sends to the next and receives from the previous one (itself alone). */
#include "check.h"
#include <string.h>

#define BIG (1 << 18)

static int big_out[BIG], big_in[BIG];

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));

    /* 1. The probed message is taken out of matching. */
    int a[3] = {rank, rank + 1, rank + 2}, b[6];
    for (int i = 0; i < 6; i++) b[i] = 100 * rank + i;
    MPI_Request s[2];
    OK(MPI_Isend(a, 3, MPI_INT, next, 1, dup, &s[0]));
    OK(MPI_Isend(b, 6, MPI_INT, next, 2, dup, &s[1]));
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st;
    int count, flag;
    OK(MPI_Mprobe(prev, MPI_ANY_TAG, dup, &msg, &st));
    CHECK(msg != MPI_MESSAGE_NULL && msg != MPI_MESSAGE_NO_PROC);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 1);
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 3);
    OK(MPI_Probe(prev, MPI_ANY_TAG, dup, &st));
    CHECK(st.MPI_TAG == 2);
    int got[6] = {0};
    OK(MPI_Recv(got, 6, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &st));
    CHECK(st.MPI_TAG == 2 && st.MPI_SOURCE == prev);
    for (int i = 0; i < 6; i++) CHECK(got[i] == 100 * prev + i);
    MPI_Message none = MPI_MESSAGE_NULL;
    OK(MPI_Improbe(prev, MPI_ANY_TAG, dup, &flag, &none, MPI_STATUS_IGNORE));
    CHECK(!flag && none == MPI_MESSAGE_NULL);
    memset(got, 0, sizeof got);
    OK(MPI_Mrecv(got, 3, MPI_INT, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NULL);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 1);
    for (int i = 0; i < 3; i++) CHECK(got[i] == prev + i);
    OK(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 2. A large message: probed before its data moved, received with MPI_Imrecv. */
    for (int i = 0; i < BIG; i++) big_out[i] = i ^ rank;
    OK(MPI_Isend(big_out, BIG, MPI_INT, next, 3, MPI_COMM_WORLD, &s[0]));
    flag = 0;
    while (!flag) OK(MPI_Improbe(prev, 3, MPI_COMM_WORLD, &flag, &msg, &st));
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == BIG);
    MPI_Request r;
    OK(MPI_Imrecv(big_in, BIG, MPI_INT, &msg, &r));
    CHECK(msg == MPI_MESSAGE_NULL);
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 3);
    for (int i = 0; i < BIG; i++) CHECK(big_in[i] == (i ^ prev));
    OK(MPI_Wait(&s[0], MPI_STATUS_IGNORE));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 3. A derived datatype: three ints landing at every other place. */
    MPI_Datatype every_other;
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    OK(MPI_Isend(a, 3, MPI_INT, next, 4, MPI_COMM_WORLD, &s[0]));
    OK(MPI_Mprobe(prev, 4, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE));
    int spread[5] = {-1, -1, -1, -1, -1};
    OK(MPI_Mrecv(spread, 1, every_other, &msg, &st));
    CHECK(spread[0] == prev && spread[2] == prev + 1 && spread[4] == prev + 2);
    CHECK(spread[1] == -1 && spread[3] == -1);
    OK(MPI_Wait(&s[0], MPI_STATUS_IGNORE));
    OK(MPI_Type_free(&every_other));

    /* 4. MPI_PROC_NULL: MPI_MESSAGE_NO_PROC, received at once. */
    OK(MPI_Mprobe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL);
    OK(MPI_Mrecv(got, 1, MPI_INT, &msg, &st));
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(msg == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL && count == 0);
    OK(MPI_Improbe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &msg, &st));
    CHECK(flag && msg == MPI_MESSAGE_NO_PROC);
    OK(MPI_Imrecv(got, 1, MPI_INT, &msg, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(msg == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL);
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* 5. Cancel a receive nobody sends to, on the world and on a duplicate; the
     * message sent afterwards goes to the receive posted after it. */
    MPI_Comm comms[2] = {MPI_COMM_WORLD, dup};
    for (int c = 0; c < 2; c++) {
        int x = -1, y = -1, v = 7 * rank + c;
        OK(MPI_Irecv(&x, 1, MPI_INT, prev, 77, comms[c], &r));
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL);
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag);
        /* Every rank has cancelled before anyone sends with that tag. */
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Irecv(&y, 1, MPI_INT, prev, 77, comms[c], &r));
        OK(MPI_Send(&v, 1, MPI_INT, next, 77, comms[c]));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(!flag && x == -1 && y == 7 * prev + c);
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* 6. MPI_ANY_SOURCE under concurrent senders: every other rank sends rank 0 a run
     * of messages of varying sizes (small and rendezvous) at once; rank 0 takes each
     * with a matched probe on any source and any tag, sizes its buffer from the probe's
     * status and receives exactly that message: every one arrives once, intact, and in
     * its sender's order. */
    enum { RUN = 24 };
    if (rank == 0) {
        int seen[64] = {0};
        for (int k = 0; k < RUN * (size - 1); k++) {
            OK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st));
            int src = st.MPI_SOURCE, tag = st.MPI_TAG;
            CHECK(src > 0 && src < size && src < 64 && tag == seen[src]); /* in order */
            OK(MPI_Get_count(&st, MPI_INT, &count));
            int *in = malloc(sizeof(int) * (size_t)(count + 1));
            if (k % 2) {
                OK(MPI_Mrecv(in, count, MPI_INT, &msg, &st));
            } else {
                OK(MPI_Imrecv(in, count, MPI_INT, &msg, &r));
                OK(MPI_Wait(&r, &st));
            }
            CHECK(st.MPI_SOURCE == src && st.MPI_TAG == tag);
            for (int i = 0; i < count; i++) CHECK(in[i] == 1000 * src + tag + i);
            free(in);
            seen[src]++;
        }
        for (int p = 1; p < size; p++) CHECK(seen[p] == RUN);
        OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag);
    } else {
        MPI_Request rs[RUN];
        int *bufs[RUN];
        for (int t = 0; t < RUN; t++) {
            int n = (t % 3 == 2) ? (1 << 19) + t : 1 + 37 * t; /* every third rendezvous */
            bufs[t] = malloc(sizeof(int) * (size_t)n);
            for (int i = 0; i < n; i++) bufs[t][i] = 1000 * rank + t + i;
            OK(MPI_Isend(bufs[t], n, MPI_INT, 0, t, MPI_COMM_WORLD, &rs[t]));
        }
        OK(MPI_Waitall(RUN, rs, MPI_STATUSES_IGNORE));
        for (int t = 0; t < RUN; t++) free(bufs[t]);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));

    OK(MPI_Comm_free(&dup));
    OK(MPI_Finalize());
    printf("mprobe ok\n");
    return 0;
}
