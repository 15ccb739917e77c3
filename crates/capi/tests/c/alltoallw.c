/* MPI_Alltoallw / MPI_Ialltoallw (per-peer counts, byte displacements and datatypes,
 * derived receive types, MPI_IN_PLACE, error paths) and user error handlers
 * (MPI_Comm_create_errhandler: called for raised and program-called errors, inherited
 * by MPI_Comm_dup, invalid arguments). Runs on any number of ranks. */
#include "check.h"
#include <string.h>

static int rank, size;

/* Value rank `from` sends to rank `to` at position j. */
static int val(int from, int to, int j) { return 1000 * from + 10 * to + j; }

/* Every rank sends to rank r (r % 3 + 1) ints from a packed buffer; the receive side takes
 * odd peers' blocks through a stride-2 vector type. */
static void blocking_and_nonblocking(int nonblocking) {
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    MPI_Datatype *st = malloc(size * sizeof(MPI_Datatype));
    MPI_Datatype *rt = malloc(size * sizeof(MPI_Datatype));
    MPI_Datatype strided;
    int sbuf[64], rbuf[256], off = 0;
    OK(MPI_Type_vector(rank % 3 + 1, 1, 2, MPI_INT, &strided));
    OK(MPI_Type_commit(&strided));
    for (int r = 0; r < size; r++) {
        int n = r % 3 + 1;
        sc[r] = n; sd[r] = off * (int)sizeof(int); st[r] = MPI_INT;
        for (int j = 0; j < n; j++) sbuf[off + j] = val(rank, r, j);
        off += n;
        rd[r] = r * 8 * (int)sizeof(int);
        if (r % 2) { rc[r] = 1; rt[r] = strided; }
        else { rc[r] = rank % 3 + 1; rt[r] = MPI_INT; }
    }
    for (int i = 0; i < 256; i++) rbuf[i] = -1;
    if (nonblocking) {
        MPI_Request req;
        int x = rank, y = -1;
        OK(MPI_Ialltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, MPI_COMM_WORLD, &req));
        /* Other traffic while the exchange is in flight. */
        OK(MPI_Sendrecv(&x, 1, MPI_INT, (rank + 1) % size, 9, &y, 1, MPI_INT,
                        (rank + size - 1) % size, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(y == (rank + size - 1) % size);
        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        CHECK(req == MPI_REQUEST_NULL);
    } else {
        OK(MPI_Alltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, MPI_COMM_WORLD));
    }
    for (int r = 0; r < size; r++) {
        int *b = rbuf + r * 8, step = r % 2 ? 2 : 1;
        for (int j = 0; j < rank % 3 + 1; j++) {
            CHECK(b[j * step] == val(r, rank, j));
            if (step == 2) CHECK(b[j * step + 1] == -1);
        }
    }
    OK(MPI_Type_free(&strided));
    free(sc); free(sd); free(rc); free(rd); free(st); free(rt);
}

static void in_place(void) {
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    MPI_Datatype *rt = malloc(size * sizeof(MPI_Datatype));
    int buf[256];
    for (int r = 0; r < size; r++) {
        rc[r] = 2; rd[r] = r * 2 * (int)sizeof(int); rt[r] = MPI_INT;
        buf[2 * r] = val(rank, r, 0); buf[2 * r + 1] = val(rank, r, 1);
    }
    OK(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, buf, rc, rd, rt, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        CHECK(buf[2 * r] == val(r, rank, 0) && buf[2 * r + 1] == val(r, rank, 1));
    free(rc); free(rd); free(rt);
}

static void errors(void) {
    int c[256], d[256], buf[256];
    MPI_Datatype t[256];
    MPI_Request req;
    for (int r = 0; r < size; r++) { c[r] = 1; d[r] = r * 4; t[r] = MPI_INT; }
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    c[0] = -1; /* a negative count */
    CHECK(MPI_Alltoallw(buf, c, d, t, buf + 128, c, d, t, MPI_COMM_WORLD) == MPI_ERR_COUNT);
    c[0] = 1;
    CHECK(MPI_Alltoallw(buf, c, d, NULL, buf + 128, c, d, t, MPI_COMM_WORLD) == MPI_ERR_ARG);
    CHECK(MPI_Ialltoallw(buf, c, d, t, buf + 128, c, d, t, MPI_COMM_WORLD, NULL) == MPI_ERR_ARG);
    /* Overlapping send and receive blocks. */
    CHECK(MPI_Ialltoallw(buf, c, d, t, buf, c, d, t, MPI_COMM_WORLD, &req) == MPI_ERR_BUFFER);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static int calls, last_code;
static MPI_Comm last_comm;
static void handler(MPI_Comm *comm, int *code, ...) {
    calls++;
    last_comm = *comm;
    last_code = *code;
}

static void user_handler(void) {
    MPI_Errhandler eh, got;
    MPI_Comm dup, dup2;
    int x = 0;
    OK(MPI_Comm_create_errhandler(handler, &eh));
    CHECK(eh != MPI_ERRHANDLER_NULL && eh != MPI_ERRORS_RETURN && eh != MPI_ERRORS_ARE_FATAL);
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_set_errhandler(dup, eh));
    OK(MPI_Comm_get_errhandler(dup, &got));
    CHECK(got == eh);
    /* A real error: the handler runs, then the call returns the class. */
    CHECK(MPI_Send(&x, 1, MPI_INT, size + 5, 0, dup) == MPI_ERR_RANK);
    CHECK(calls == 1 && last_comm == dup && last_code == MPI_ERR_RANK);
    /* Program-called: MPI_Comm_call_errhandler returns MPI_SUCCESS. */
    OK(MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER));
    CHECK(calls == 2 && last_code == MPI_ERR_OTHER);
    /* Freeing the handle keeps it on the communicators using it; dups inherit it. */
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL);
    OK(MPI_Comm_dup(dup, &dup2));
    OK(MPI_Comm_call_errhandler(dup2, MPI_ERR_TAG));
    CHECK(calls == 3 && last_comm == dup2 && last_code == MPI_ERR_TAG);
    /* Error paths (reported through dup's user handler). */
    CHECK(MPI_Comm_set_errhandler(dup, (MPI_Errhandler)(intptr_t)0x7777) == MPI_ERR_ARG);
    CHECK(calls == 4 && last_code == MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Comm_create_errhandler(NULL, &eh) == MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Comm_free(&dup2));
    OK(MPI_Comm_free(&dup));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size <= 16);
    blocking_and_nonblocking(0);
    blocking_and_nonblocking(1);
    in_place();
    errors();
    user_handler();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    if (rank == 0) printf("alltoallw ok\n");
    return 0;
}
