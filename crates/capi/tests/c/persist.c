/* Persistent requests (MPI_Send_init, Ssend_init, Rsend_init, Bsend_init, Recv_init,
 * Start, Startall; Wait/Test/Request_free on them, inactive requests), buffered mode
 * (Buffer_attach/detach, Bsend, Ibsend) and ready mode (Rsend, Irsend), with their error
 * paths. Runs on 2+ ranks; ranks 0 and 1 talk. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "check.h"
#include <string.h>

static int rank, size;

static MPI_Comm pc; /* ranks 0 and 1 */

static void check_empty(const MPI_Status *st) {
    int n = -1;
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Get_count(st, MPI_INT, &n));
    CHECK(n == 0);
}

static void persistent(void) {
    int buf[8], peer = 1 - rank;
    MPI_Request r[2];
    MPI_Status st;
    /* An inactive persistent request completes at once with an empty status. */
    OK(MPI_Recv_init(buf, 8, MPI_INT, peer, 5, pc, &r[0]));
    st.MPI_SOURCE = 77; st.MPI_TAG = 77;
    OK(MPI_Wait(&r[0], &st));
    CHECK(r[0] != MPI_REQUEST_NULL);
    check_empty(&st);
    int flag = 0, idx = 5;
    OK(MPI_Test(&r[0], &flag, &st));
    CHECK(flag && r[0] != MPI_REQUEST_NULL);
    OK(MPI_Waitany(1, r, &idx, &st)); /* inactive ones are ignored like null ones */
    CHECK(idx == MPI_UNDEFINED);
    OK(MPI_Testany(1, r, &idx, &flag, &st));
    CHECK(flag && idx == MPI_UNDEFINED);
    OK(MPI_Request_get_status(r[0], &flag, &st));
    CHECK(flag);
    /* Ten rounds of a persistent exchange, each mode once per round. */
    int out[8];
    for (int round = 0; round < 12; round++) {
        for (int i = 0; i < 8; i++) out[i] = rank * 100 + round * 10 + i;
        if (round % 3 == 0) OK(MPI_Send_init(out, 8, MPI_INT, peer, 5, pc, &r[1]));
        else if (round % 3 == 1) OK(MPI_Ssend_init(out, 8, MPI_INT, peer, 5, pc, &r[1]));
        else OK(MPI_Rsend_init(out, 8, MPI_INT, peer, 5, pc, &r[1]));
        OK(MPI_Barrier(pc)); /* the receive below... */
        OK(MPI_Start(&r[0]));            /* ...is posted before the ready send starts */
        OK(MPI_Barrier(pc));
        OK(MPI_Startall(1, &r[1]));
        MPI_Status sts[2];
        if (round % 2) {
            OK(MPI_Waitall(2, r, sts));
        } else {
            int done = 0;
            while (!done) OK(MPI_Testall(2, r, &done, sts));
        }
        CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL);
        CHECK(sts[0].MPI_SOURCE == peer && sts[0].MPI_TAG == 5);
        for (int i = 0; i < 8; i++) CHECK(buf[i] == peer * 100 + round * 10 + i);
        OK(MPI_Request_free(&r[1]));
        CHECK(r[1] == MPI_REQUEST_NULL);
    }
    /* Restart of an active request is an error; freeing an active one is allowed. */
    OK(MPI_Comm_set_errhandler(pc, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Start(&r[0]));
    CHECK(MPI_Start(&r[0]) == MPI_ERR_REQUEST);
    MPI_Request plain;
    OK(MPI_Isend(out, 1, MPI_INT, peer, 6, pc, &plain));
    CHECK(MPI_Start(&plain) == MPI_ERR_REQUEST); /* not persistent */
    OK(MPI_Send(out, 8, MPI_INT, peer, 5, pc));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    OK(MPI_Recv(buf, 1, MPI_INT, peer, 6, pc, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&plain, MPI_STATUS_IGNORE));
    OK(MPI_Request_free(&r[0]));
    CHECK(r[0] == MPI_REQUEST_NULL);
    CHECK(MPI_Send_init(out, 1, MPI_INT, 2, 0, pc, &r[0]) == MPI_ERR_RANK);
    CHECK(MPI_Recv_init(out, 1, MPI_INT, 0, -5, pc, &r[0]) == MPI_ERR_TAG);
    CHECK(MPI_Send_init(out, 1, MPI_INT, 0, 0, pc, NULL) == MPI_ERR_ARG);
    CHECK(MPI_Start(NULL) == MPI_ERR_ARG);
    /* MPI_PROC_NULL persistent requests. */
    OK(MPI_Send_init(out, 1, MPI_INT, MPI_PROC_NULL, 0, pc, &r[0]));
    OK(MPI_Recv_init(buf, 1, MPI_INT, MPI_PROC_NULL, 0, pc, &r[1]));
    OK(MPI_Startall(2, r));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    OK(MPI_Request_free(&r[0]));
    OK(MPI_Request_free(&r[1]));
    OK(MPI_Comm_set_errhandler(pc, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* Large enough for the rendezvous path: a buffered message stays in flight (and
 * accounted) until the receiver takes it. */
#define BIG 100000
static int msg[BIG], in[BIG];

static void buffered(void) {
    int peer = 1 - rank;
    OK(MPI_Comm_set_errhandler(pc, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Bsend(msg, 1, MPI_INT, peer, 1, pc) == MPI_ERR_BUFFER); /* none */
    int bsize = 3 * (BIG * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
    char *space = malloc(bsize);
    OK(MPI_Buffer_attach(space, bsize));
    CHECK(MPI_Buffer_attach(space, bsize) == MPI_ERR_BUFFER); /* already attached */
    for (int i = 0; i < BIG; i++) msg[i] = rank * 1000000 + i;
    MPI_Request r, p;
    /* Three messages fit; a fourth does not while they are in flight (the peer has not
     * posted its receives: it waits in the barrier). */
    OK(MPI_Bsend(msg, BIG, MPI_INT, peer, 1, pc));
    OK(MPI_Ibsend(msg, BIG, MPI_INT, peer, 2, pc, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE)); /* complete once copied */
    OK(MPI_Bsend_init(msg, BIG, MPI_INT, peer, 3, pc, &p));
    OK(MPI_Start(&p));
    OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
    CHECK(MPI_Bsend(msg, BIG, MPI_INT, peer, 4, pc) == MPI_ERR_BUFFER);
    for (int i = 0; i < BIG; i++) msg[i] = -1; /* the copies were taken */
    OK(MPI_Barrier(pc));
    for (int t = 1; t <= 3; t++) {
        OK(MPI_Recv(in, BIG, MPI_INT, peer, t, pc, MPI_STATUS_IGNORE));
        for (int i = 0; i < BIG; i++) CHECK(in[i] == peer * 1000000 + i);
    }
    void *back; int bs;
    OK(MPI_Buffer_detach(&back, &bs)); /* waits for the buffered sends */
    CHECK(back == space && bs == bsize);
    OK(MPI_Request_free(&p));
    free(space);
    /* MPI_BUFFER_AUTOMATIC: no limit. */
    OK(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0));
    for (int t = 0; t < 10; t++) OK(MPI_Bsend(msg, BIG, MPI_INT, peer, 10 + t, pc));
    for (int t = 0; t < 10; t++)
        OK(MPI_Recv(in, BIG, MPI_INT, peer, 10 + t, pc, MPI_STATUS_IGNORE));
    OK(MPI_Buffer_detach(&back, &bs));
    CHECK(back == MPI_BUFFER_AUTOMATIC);
    /* Ready mode (the receive is posted first). */
    OK(MPI_Irecv(in, 1, MPI_INT, peer, 20, pc, &r));
    OK(MPI_Barrier(pc));
    msg[0] = rank;
    OK(MPI_Rsend(msg, 1, MPI_INT, peer, 20, pc));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in[0] == peer);
    OK(MPI_Irecv(in, 1, MPI_INT, peer, 21, pc, &r));
    OK(MPI_Barrier(pc));
    OK(MPI_Irsend(msg, 1, MPI_INT, peer, 21, pc, &p));
    OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in[0] == peer);
    CHECK(MPI_Rsend(msg, 1, MPI_INT, peer, -1, pc) == MPI_ERR_TAG);
    OK(MPI_Comm_set_errhandler(pc, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    /* The buffered sends of BIG ints must still be in flight when the buffer is full:
     * above phalanx's eager limit (on shared memory its default, 4 MiB, would send them
     * at once and free their space). Read at MPI_Init; a limit given by the caller wins. */
    setenv("PHALANX_EAGER_LIMIT", "65536", 0);
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2);
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank < 2, rank, &pc));
    if (rank < 2) {
        persistent();
        buffered();
    }
    OK(MPI_Comm_free(&pc));
    OK(MPI_Finalize());
    if (rank == 0) printf("persist ok\n");
    return 0;
}
