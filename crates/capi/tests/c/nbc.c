/* Nonblocking collectives really run asynchronously: for each collective, an "early"
 * rank starts it and then blocks in MPI_Recv for a synchronous send that the "late" rank
 * makes before starting the same collective. The early rank's part depends on the late
 * rank's data, so an implementation that ran the blocking collective inside the start
 * call would deadlock (the job's --timeout turns that into a failure). Also: derived
 * datatypes, MPI_IN_PLACE, user operations and MINLOC (the gather-and-fold path),
 * Iexscan, several collectives in flight at once, MPI_Test polling, and error paths. */
#include "check.h"
#include <string.h>

static int rank, size;

enum { BCAST, GATHER, SCATTER, ALLGATHER, ALLTOALL, REDUCE, ALLREDUCE, SCAN, EXSCAN,
       REDUCE_USER, ALLREDUCE_MINLOC, GATHERV, SCATTERV, ALLGATHERV, ALLTOALLV,
       REDSCAT_BLOCK, REDSCAT, NKINDS };
static const char *names[] = {"bcast", "gather", "scatter", "allgather", "alltoall",
                              "reduce", "allreduce", "scan", "exscan", "reduce_user",
                              "allreduce_minloc", "gatherv", "scatterv", "allgatherv",
                              "alltoallv", "reduce_scatter_block", "reduce_scatter"};

static void addmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i] + 2 * b[i]; /* not commutative */
}

#define N 4
static int sbuf[64 * N], rbuf[64 * N];
static struct { int v, i; } spair, rpair;
static MPI_Op user_op;
/* v-layouts: rank p's block has p + 1 elements at displacement 8 * p. */
static int vcounts[64], vdispls[64], ones[64], seq[64];

static void start(int kind, MPI_Request *r) {
    MPI_Comm w = MPI_COMM_WORLD;
    for (int i = 0; i < 64 * N; i++) { sbuf[i] = rank * 1000 + i; rbuf[i] = -1; }
    switch (kind) {
    case BCAST: OK(MPI_Ibcast(rank == 1 ? sbuf : rbuf, N, MPI_INT, 1, w, r)); break;
    case GATHER: OK(MPI_Igather(sbuf, N, MPI_INT, rbuf, N, MPI_INT, 0, w, r)); break;
    case SCATTER: OK(MPI_Iscatter(sbuf, N, MPI_INT, rbuf, N, MPI_INT, 1, w, r)); break;
    case ALLGATHER: OK(MPI_Iallgather(sbuf, N, MPI_INT, rbuf, N, MPI_INT, w, r)); break;
    case ALLTOALL: OK(MPI_Ialltoall(sbuf, N, MPI_INT, rbuf, N, MPI_INT, w, r)); break;
    case REDUCE: OK(MPI_Ireduce(sbuf, rbuf, N, MPI_INT, MPI_SUM, 0, w, r)); break;
    case ALLREDUCE: OK(MPI_Iallreduce(sbuf, rbuf, N, MPI_INT, MPI_MAX, w, r)); break;
    case SCAN: OK(MPI_Iscan(sbuf, rbuf, N, MPI_INT, MPI_SUM, w, r)); break;
    case EXSCAN: OK(MPI_Iexscan(sbuf, rbuf, N, MPI_INT, MPI_SUM, w, r)); break;
    case REDUCE_USER: OK(MPI_Ireduce(sbuf, rbuf, N, MPI_INT, user_op, 0, w, r)); break;
    case ALLREDUCE_MINLOC:
        spair.v = 100 - rank; spair.i = rank;
        OK(MPI_Iallreduce(&spair, &rpair, 1, MPI_2INT, MPI_MINLOC, w, r));
        break;
    case GATHERV:
        OK(MPI_Igatherv(sbuf, rank + 1, MPI_INT, rbuf, vcounts, vdispls, MPI_INT, 0, w, r));
        break;
    case SCATTERV:
        OK(MPI_Iscatterv(sbuf, vcounts, vdispls, MPI_INT, rbuf, rank + 1, MPI_INT, 1, w, r));
        break;
    case ALLGATHERV:
        OK(MPI_Iallgatherv(sbuf, rank + 1, MPI_INT, rbuf, vcounts, vdispls, MPI_INT, w, r));
        break;
    case ALLTOALLV: /* rank p sends p + 1 elements to everyone */
        for (int i = 0; i < size; i++) { ones[i] = rank + 1; seq[i] = 8 * i; }
        OK(MPI_Ialltoallv(sbuf, ones, seq, MPI_INT, rbuf, vcounts, vdispls, MPI_INT, w, r));
        break;
    case REDSCAT_BLOCK:
        OK(MPI_Ireduce_scatter_block(sbuf, rbuf, 2, MPI_INT, MPI_SUM, w, r));
        break;
    case REDSCAT:
        OK(MPI_Ireduce_scatter(sbuf, rbuf, vcounts, MPI_INT, user_op, w, r));
        break;
    }
}

static void verify(int kind) {
    switch (kind) {
    case BCAST:
        if (rank != 1) for (int i = 0; i < N; i++) CHECK(rbuf[i] == 1000 + i);
        break;
    case GATHER:
        if (rank == 0)
            for (int p = 0; p < size; p++)
                for (int i = 0; i < N; i++) CHECK(rbuf[p * N + i] == p * 1000 + i);
        break;
    case SCATTER:
        for (int i = 0; i < N; i++) CHECK(rbuf[i] == 1000 + rank * N + i);
        break;
    case ALLGATHER:
        for (int p = 0; p < size; p++)
            for (int i = 0; i < N; i++) CHECK(rbuf[p * N + i] == p * 1000 + i);
        break;
    case ALLTOALL:
        for (int p = 0; p < size; p++)
            for (int i = 0; i < N; i++) CHECK(rbuf[p * N + i] == p * 1000 + rank * N + i);
        break;
    case REDUCE:
        if (rank == 0)
            for (int i = 0; i < N; i++) CHECK(rbuf[i] == 1000 * size * (size - 1) / 2 + size * i);
        break;
    case ALLREDUCE:
        for (int i = 0; i < N; i++) CHECK(rbuf[i] == (size - 1) * 1000 + i);
        break;
    case SCAN:
        for (int i = 0; i < N; i++) CHECK(rbuf[i] == 1000 * rank * (rank + 1) / 2 + (rank + 1) * i);
        break;
    case EXSCAN:
        if (rank > 0)
            for (int i = 0; i < N; i++) CHECK(rbuf[i] == 1000 * rank * (rank - 1) / 2 + rank * i);
        else
            for (int i = 0; i < N; i++) CHECK(rbuf[i] == -1);
        break;
    case REDUCE_USER:
        if (rank == 0)
            for (int i = 0; i < N; i++) {
                int acc = i; /* rank 0's element; (((a0 op a1) op a2) ...) */
                for (int p = 1; p < size; p++) acc = acc + 2 * (p * 1000 + i);
                CHECK(rbuf[i] == acc);
            }
        break;
    case ALLREDUCE_MINLOC:
        CHECK(rpair.v == 100 - (size - 1) && rpair.i == size - 1);
        break;
    case GATHERV:
        if (rank == 0)
            for (int p = 0; p < size; p++)
                for (int i = 0; i < 8; i++)
                    CHECK(rbuf[8 * p + i] == (i <= p ? p * 1000 + i : -1));
        break;
    case SCATTERV:
        for (int i = 0; i < 8; i++) CHECK(rbuf[i] == (i <= rank ? 1000 + 8 * rank + i : -1));
        break;
    case ALLGATHERV:
        for (int p = 0; p < size; p++)
            for (int i = 0; i < 8; i++) CHECK(rbuf[8 * p + i] == (i <= p ? p * 1000 + i : -1));
        break;
    case ALLTOALLV:
        for (int p = 0; p < size; p++)
            for (int i = 0; i < 8; i++)
                CHECK(rbuf[8 * p + i] == (i <= p ? p * 1000 + 8 * rank + i : -1));
        break;
    case REDSCAT_BLOCK:
        for (int i = 0; i < 2; i++)
            CHECK(rbuf[i] == 1000 * size * (size - 1) / 2 + size * (2 * rank + i));
        CHECK(rbuf[2] == -1);
        break;
    case REDSCAT: { /* block of rank r: elements at offset r(r+1)/2, r + 1 of them */
        int off = rank * (rank + 1) / 2;
        for (int i = 0; i <= rank; i++) {
            int acc = off + i;
            for (int p = 1; p < size; p++) acc = acc + 2 * (p * 1000 + off + i);
            CHECK(rbuf[i] == acc);
        }
        CHECK(rbuf[rank + 1] == -1);
        break;
    }
    }
}

/* The early rank depends on the late rank's contribution in every kind above. */
static void async_case(int kind) {
    int early = (kind == SCAN || kind == EXSCAN) ? 1 : 0; /* scans: rank 1 needs rank 0 */
    int late = 1 - early;
    int token = 7;
    MPI_Request r;
    if (rank == early) {
        start(kind, &r);
        OK(MPI_Recv(&token, 1, MPI_INT, late, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(token == 42);
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank == late) {
        token = 42;
        OK(MPI_Ssend(&token, 1, MPI_INT, early, 99, MPI_COMM_WORLD));
        start(kind, &r);
        int flag = 0;
        while (!flag) OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        CHECK(r == MPI_REQUEST_NULL);
    } else {
        start(kind, &r);
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    verify(kind);
}

/* Derived datatypes and MPI_IN_PLACE, several requests in flight together. */
static void derived_and_in_place(void) {
    MPI_Datatype vec; /* N ints with stride 2 */
    OK(MPI_Type_vector(N, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int b[2 * N], g[64 * 2 * N], a[64 * N], s[N], red[N], ip[64 * N];
    for (int i = 0; i < 2 * N; i++) b[i] = rank == 0 ? 10 + i : -1;
    for (int i = 0; i < 64 * 2 * N; i++) g[i] = -1;
    for (int i = 0; i < N; i++) s[i] = rank + i;
    for (int i = 0; i < size * N; i++) a[i] = -5;
    for (int i = 0; i < N; i++) a[rank * N + i] = rank * 10 + i; /* allgather in place */
    for (int i = 0; i < N; i++) red[i] = rank + 1;               /* allreduce in place */
    for (int i = 0; i < size * N; i++) ip[i] = rank == 0 ? i : -1; /* scatter in place */
    MPI_Request rq[5];
    OK(MPI_Ibcast(b, 1, vec, 0, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Igather(s, N, MPI_INT, g, 1, vec, 0, MPI_COMM_WORLD, &rq[1]));
    OK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, N, MPI_INT, MPI_COMM_WORLD, &rq[2]));
    OK(MPI_Iallreduce(MPI_IN_PLACE, red, N, MPI_INT, MPI_PROD, MPI_COMM_WORLD, &rq[3]));
    if (rank == 0)
        OK(MPI_Iscatter(ip, N, MPI_INT, MPI_IN_PLACE, N, MPI_INT, 0, MPI_COMM_WORLD, &rq[4]));
    else
        OK(MPI_Iscatter(NULL, 0, MPI_INT, ip, N, MPI_INT, 0, MPI_COMM_WORLD, &rq[4]));
    OK(MPI_Waitall(5, rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 2 * N; i++) CHECK(b[i] == (rank == 0 || i % 2 == 0 ? 10 + i : -1));
    if (rank == 0)
        for (int k = 0; k < size * (2 * N - 1); k++) /* extent: 2N - 1 ints */
            CHECK(g[k] == (k % (2 * N - 1) % 2 == 0 ? k / (2 * N - 1) + k % (2 * N - 1) / 2 : -1));
    for (int p = 0; p < size; p++)
        for (int i = 0; i < N; i++) CHECK(a[p * N + i] == p * 10 + i);
    int f = 1;
    for (int p = 1; p <= size; p++) f *= p;
    for (int i = 0; i < N; i++) CHECK(red[i] == f);
    for (int i = 0; i < N; i++) CHECK(ip[i] == rank * N + i);
    /* Ireduce with a predefined op on a derived type (the fold path), in place at root. */
    int v[2 * N];
    for (int i = 0; i < 2 * N; i++) v[i] = i % 2 == 0 ? rank + i : 1000;
    MPI_Request r;
    OK(MPI_Ireduce(rank == 0 ? MPI_IN_PLACE : v, v, 1, vec, MPI_SUM, 0, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (rank == 0)
        for (int i = 0; i < 2 * N; i++)
            CHECK(v[i] == (i % 2 == 0 ? size * (size - 1) / 2 + size * i : 1000));
    OK(MPI_Type_free(&vec));
}

static void errors(void) {
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    int x[4] = {0};
    float f = 1;
    MPI_Request r;
    CHECK(MPI_Ibcast(x, 1, MPI_INT, size, c, &r) == MPI_ERR_ROOT);
    CHECK(MPI_Igather(x, 1, MPI_INT, x, 1, MPI_INT, -1, c, &r) == MPI_ERR_ROOT);
    CHECK(MPI_Iscan(x, x + 1, 1, MPI_INT, MPI_SUM, c, NULL) == MPI_ERR_ARG);
    CHECK(MPI_Iallreduce(&f, &f + 1, 1, MPI_FLOAT, MPI_BXOR, c, &r) == MPI_ERR_OP);
    CHECK(MPI_Iexscan(x, x + 1, -1, MPI_INT, MPI_SUM, c, &r) == MPI_ERR_COUNT);
    CHECK(MPI_Iallgather(x, 2, MPI_INT, x + 2, 1, MPI_INT, c, &r) == MPI_ERR_TRUNCATE);
    int neg[64];
    for (int i = 0; i < size; i++) neg[i] = i == size - 1 ? -1 : 1;
    CHECK(MPI_Iallgatherv(x, 1, MPI_INT, x + 1, neg, vdispls, MPI_INT, c, &r) == MPI_ERR_COUNT);
    CHECK(MPI_Ireduce_scatter_block(&f, &f + 1, 1, MPI_FLOAT, MPI_BXOR, c, &r) == MPI_ERR_OP);
    /* Aliased send and receive buffers (MPI_IN_PLACE is the only legal way). */
    CHECK(MPI_Iallgatherv(&sbuf[8 * rank], 1, MPI_INT, sbuf, vcounts, vdispls, MPI_INT, c, &r) ==
          MPI_ERR_BUFFER);
    CHECK(MPI_Iallreduce(sbuf, sbuf, 2, MPI_INT, MPI_SUM, c, &r) == MPI_ERR_BUFFER);
    CHECK(MPI_Ireduce_scatter(sbuf, sbuf, vcounts, MPI_INT, MPI_SUM, c, &r) == MPI_ERR_BUFFER);
    CHECK(MPI_Ialltoallv(x, vcounts, vdispls, MPI_INT, x, vcounts, vdispls, MPI_INT, c, NULL) == MPI_ERR_ARG);
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Ialltoall(x, 1, MPI_INT, x, 1, MPI_INT, (MPI_Comm)0x4242, &r) == MPI_ERR_COMM);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2 && size <= 16);
    OK(MPI_Op_create(addmul, 0, &user_op));
    for (int p = 0; p < size; p++) { vcounts[p] = p + 1; vdispls[p] = 8 * p; }
    for (int k = 0; k < NKINDS; k++) {
        async_case(k);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) fprintf(stderr, "async %s ok\n", names[k]);
    }
    derived_and_in_place();
    errors();
    OK(MPI_Op_free(&user_op));
    OK(MPI_Finalize());
    if (rank == 0) printf("nbc ok\n");
    return 0;
}
