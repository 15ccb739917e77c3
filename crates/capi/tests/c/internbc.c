/* Nonblocking and persistent collectives on an intercommunicator (each group gets the
 * other group's data; rooted ones with MPI_ROOT / MPI_PROC_NULL / the remote root), the
 * reductions with a user operation and MAXLOC, blocking MPI_Reduce_scatter and a user-op
 * MPI_Allreduce across, and one asynchrony check: a root that starts MPI_Ibcast and then
 * waits in MPI_Recv for an MPI_Ssend the remote leader makes before starting its part.
 * 2+ ranks (world split in halves). */
#include "check.h"
#include <string.h>

static void umax(void *in, void *io, int *len, MPI_Datatype *t) {
    (void)t;
    for (int i = 0; i < *len; i++)
        if (((int *)in)[i] > ((int *)io)[i]) ((int *)io)[i] = ((int *)in)[i];
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2 && size <= 64);
    int nl = size / 2, left = rank < nl;
    MPI_Comm half, ic;
    OK(MPI_Comm_split(MPI_COMM_WORLD, left, rank, &half));
    OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, left ? nl : 0, 3, &ic));
    int me, n, m;
    OK(MPI_Comm_rank(ic, &me));
    OK(MPI_Comm_size(ic, &n));
    OK(MPI_Comm_remote_size(ic, &m));
    int rbase = left ? nl : 0; /* world rank of remote rank 0 */
    int rsum = 0, rmax = rbase + m - 1;
    for (int j = 0; j < m; j++) rsum += rbase + j;
    MPI_Op op;
    OK(MPI_Op_create(umax, 1, &op));

    for (int it = 0; it < 4; it++) {
        MPI_Request q[12];
        int nq = 0;
        OK(MPI_Ibarrier(ic, &q[nq++]));
        /* Broadcast from the left leader. */
        int b = left && me == 0 ? 77 + it : -1;
        int broot = left ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        OK(MPI_Ibcast(&b, 1, MPI_INT, broot, ic, &q[nq++]));
        /* All-reduce: sum (the core's operation), user max, MAXLOC. */
        int w = rank + it, s = -1, x = -1;
        OK(MPI_Iallreduce(&w, &s, 1, MPI_INT, MPI_SUM, ic, &q[nq++]));
        OK(MPI_Iallreduce(&w, &x, 1, MPI_INT, op, ic, &q[nq++]));
        struct { int v, r; } lo = {rank % 3, rank}, lr = {-1, -1};
        OK(MPI_Iallreduce(&lo, &lr, 1, MPI_2INT, MPI_MAXLOC, ic, &q[nq++]));
        /* Gather to the right leader, scatter from it. */
        int g[64], sc[64], got = -1, groot = left ? 0 : (me == 0 ? MPI_ROOT : MPI_PROC_NULL);
        for (int j = 0; j < m; j++) { g[j] = -1; sc[j] = 500 + j + it; }
        OK(MPI_Igather(&w, 1, MPI_INT, g, 1, MPI_INT, groot, ic, &q[nq++]));
        OK(MPI_Iscatter(sc, 1, MPI_INT, &got, 1, MPI_INT, groot, ic, &q[nq++]));
        /* All-gather and all-to-all across. */
        int ag[64], a2s[64], a2r[64];
        for (int j = 0; j < m; j++) { a2s[j] = 1000 * rank + j; ag[j] = a2r[j] = -1; }
        OK(MPI_Iallgather(&w, 1, MPI_INT, ag, 1, MPI_INT, ic, &q[nq++]));
        OK(MPI_Ialltoall(a2s, 1, MPI_INT, a2r, 1, MPI_INT, ic, &q[nq++]));
        /* Reduce-scatter block: each group's vector has n * m elements, blocks of m
         * (left) and n (right) so the totals agree... each member's block is m long. */
        int rsv[4096], rsb[64];
        for (int i = 0; i < n * m; i++) rsv[i] = rank + i;
        OK(MPI_Ireduce_scatter_block(rsv, rsb, m, MPI_INT, MPI_SUM, ic, &q[nq++]));
        OK(MPI_Waitall(nq, q, MPI_STATUSES_IGNORE));
        if (!left) CHECK(b == 77 + it);
        CHECK(s == rsum + m * it);
        CHECK(x == rmax + it);
        CHECK(lr.v == 2 || (m < 3 && lr.v == (rbase + m - 1) % 3));
        if (!left && me == 0)
            for (int j = 0; j < m; j++) CHECK(g[j] == rbase + j + it);
        if (left) CHECK(got == 500 + me + it);
        for (int j = 0; j < m; j++) {
            CHECK(ag[j] == rbase + j + it);
            CHECK(a2r[j] == 1000 * (rbase + j) + me);
        }
        /* My block: elements me*m .. me*m+m-1 of the remote vectors (remote n is m,
         * remote m is n: the same n*m total). */
        for (int i = 0; i < m; i++) CHECK(rsb[i] == rsum + m * (me * m + i));
    }

    /* Blocking MPI_Reduce_scatter (varying counts) and a user-op MPI_Allreduce. */
    int cnt[64], vec[4096], out[64], tot = 0;
    for (int i = 0; i < n; i++) { cnt[i] = 1 + i % 2; tot += cnt[i]; }
    /* Totals must agree between the groups: both use the same rule, so equal when
     * the group sizes are (and the test only checks when they are). */
    int my_off = 0;
    for (int i = 0; i < me; i++) my_off += cnt[i];
    if (n == m) {
        for (int i = 0; i < tot; i++) vec[i] = rank * i;
        OK(MPI_Reduce_scatter(vec, out, cnt, MPI_INT, MPI_SUM, ic));
        for (int i = 0; i < cnt[me]; i++) CHECK(out[i] == rsum * (my_off + i));
    }
    int w = rank, x = -1;
    OK(MPI_Allreduce(&w, &x, 1, MPI_INT, op, ic));
    CHECK(x == rmax);

    /* Persistent all-reduce on the intercommunicator, started many times. */
    int pin = 0, pout = -1;
    MPI_Request pr;
    OK(MPI_Allreduce_init(&pin, &pout, 1, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &pr));
    for (int it = 0; it < 5; it++) {
        pin = rank * it;
        OK(MPI_Start(&pr));
        OK(MPI_Wait(&pr, MPI_STATUS_IGNORE));
        CHECK(pout == rsum * it);
    }
    OK(MPI_Request_free(&pr));

    /* Asynchrony: the left leader's MPI_Ibcast must not wait for the right leader. */
    int v = 5, tok = 0;
    MPI_Request r;
    if (left && me == 0) {
        OK(MPI_Ibcast(&v, 1, MPI_INT, MPI_ROOT, ic, &r));
        OK(MPI_Recv(&tok, 1, MPI_INT, 0, 9, ic, MPI_STATUS_IGNORE));
        CHECK(tok == 1);
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (!left && me == 0) {
        tok = 1;
        OK(MPI_Ssend(&tok, 1, MPI_INT, 0, 9, ic));
        OK(MPI_Ibcast(&v, 1, MPI_INT, 0, ic, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(v == 5);
    } else {
        OK(MPI_Ibcast(&v, 1, MPI_INT, left ? MPI_PROC_NULL : 0, ic, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    OK(MPI_Op_free(&op));
    OK(MPI_Comm_free(&ic));
    OK(MPI_Comm_free(&half));
    OK(MPI_Finalize());
    if (rank == 0) printf("internbc ok\n");
    return 0;
}
