/* Collectives on an intercommunicator from C: the world split into a low group (the
 * first half, rounded up) and a high group, joined by MPI_Intercomm_create; every
 * collective MPI defines there, in both directions, with the root in either group
 * (MPI_ROOT at the root, MPI_PROC_NULL at its group's other members). One rank: nothing
 * to join, "intercoll ok" all the same. */
#include "check.h"
#include <string.h>

#define MAXP 64

static int val(int w, int i) { return (w + 1) * 1000 + i; }
static int vlen(int w) { return (int[]){3, 0, 1, 7, 2, 5}[w % 6]; }

int main(int argc, char **argv) {
    int wr, wp;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &wr));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &wp));
    if (wp < 2 || wp > MAXP) {
        printf("rank %d of %d: intercoll ok\n", wr, wp);
        OK(MPI_Finalize());
        return 0;
    }
    int nlow = (wp + 1) / 2, low = wr < nlow;
    MPI_Comm local, ic;
    OK(MPI_Comm_split(MPI_COMM_WORLD, low, wr, &local));
    OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? nlow : 0, 9, &ic));
    int me, lsize, q;
    OK(MPI_Comm_rank(ic, &me));
    OK(MPI_Comm_size(ic, &lsize));
    OK(MPI_Comm_remote_size(ic, &q));
    CHECK(lsize == (low ? nlow : wp - nlow) && q == wp - lsize);
    int first = low ? nlow : 0; /* world rank of remote rank 0 */
    OK(MPI_Barrier(ic));

    /* Allreduce: the remote group's sum. */
    int mine[8], got[8 * MAXP], want;
    for (int i = 0; i < 3; i++) mine[i] = val(wr, i);
    OK(MPI_Allreduce(mine, got, 3, MPI_INT, MPI_SUM, ic));
    for (int i = 0; i < 3; i++) {
        want = 0;
        for (int j = 0; j < q; j++) want += val(first + j, i);
        CHECK(got[i] == want);
    }
    /* Allgather: 3 values of every remote member. */
    OK(MPI_Allgather(mine, 3, MPI_INT, got, 3, MPI_INT, ic));
    for (int j = 0; j < q; j++)
        for (int i = 0; i < 3; i++) CHECK(got[3 * j + i] == val(first + j, i));
    /* Alltoall: 2 values to each remote member j. */
    int send[2 * MAXP], recv[2 * MAXP];
    for (int j = 0; j < q; j++)
        for (int k = 0; k < 2; k++) send[2 * j + k] = val(wr, 10 * j + k);
    OK(MPI_Alltoall(send, 2, MPI_INT, recv, 2, MPI_INT, ic));
    for (int j = 0; j < q; j++)
        for (int k = 0; k < 2; k++) CHECK(recv[2 * j + k] == val(first + j, 10 * me + k));
    /* Allgatherv: remote member j contributes vlen(its world rank) values, one gap each. */
    int counts[MAXP], displs[MAXP], at = 0, all[8 * MAXP + MAXP];
    for (int j = 0; j < q; j++) {
        counts[j] = vlen(first + j);
        displs[j] = at;
        at += counts[j] + 1;
    }
    for (int i = 0; i < at; i++) all[i] = -1;
    for (int i = 0; i < vlen(wr); i++) mine[i] = val(wr, i);
    OK(MPI_Allgatherv(mine, vlen(wr), MPI_INT, all, counts, displs, MPI_INT, ic));
    for (int j = 0; j < q; j++) {
        for (int i = 0; i < counts[j]; i++) CHECK(all[displs[j] + i] == val(first + j, i));
        CHECK(all[displs[j] + counts[j]] == -1);
    }
    /* Alltoallv: (my world rank + remote world rank) % 4 values each way. */
    int sc[MAXP], sd[MAXP], rc[MAXP], rd[MAXP], sb[4 * MAXP], rb[4 * MAXP], so = 0, ro = 0;
    for (int j = 0; j < q; j++) {
        int w = first + j;
        sc[j] = rc[j] = (wr + w) % 4;
        sd[j] = so;
        rd[j] = ro;
        for (int k = 0; k < sc[j]; k++) sb[so + k] = val(wr, 100 * w + k);
        so += sc[j];
        ro += rc[j];
    }
    OK(MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, ic));
    for (int j = 0; j < q; j++)
        for (int k = 0; k < rc[j]; k++) CHECK(rb[rd[j] + k] == val(first + j, 100 * wr + k));
    /* Reduce_scatter_block: vectors of T = 2 nlow (wp - nlow) values in both groups,
     * scattered in blocks of T / lsize. */
    int t = 2 * nlow * (wp - nlow), blk = t / lsize, v[2 * MAXP * MAXP], out[2 * MAXP];
    for (int i = 0; i < t; i++) v[i] = wr * 7 + i;
    OK(MPI_Reduce_scatter_block(v, out, blk, MPI_INT, MPI_SUM, ic));
    for (int i = 0; i < blk; i++) {
        want = 0;
        for (int j = 0; j < q; j++) want += (first + j) * 7 + me * blk + i;
        CHECK(out[i] == want);
    }

    /* Rooted calls: every root of either group. */
    for (int root_low = 1; root_low >= 0; root_low--) {
        int nroot = root_low ? nlow : wp - nlow;
        for (int r = 0; r < nroot; r++) {
            int root_world = root_low ? r : nlow + r;
            if (low == root_low) {
                int role = wr == root_world ? MPI_ROOT : MPI_PROC_NULL;
                int b[4] = {val(wr, 0), val(wr, 1), val(wr, 2), val(wr, 3)};
                OK(MPI_Bcast(b, 4, MPI_INT, role, ic));
                int g[2 * MAXP];
                OK(MPI_Gather(NULL, 0, MPI_INT, g, 2, MPI_INT, role, ic));
                if (role == MPI_ROOT)
                    for (int j = 0; j < q; j++)
                        CHECK(g[2 * j] == val(first + j, 0) && g[2 * j + 1] == val(first + j, 1));
                int gc[MAXP], gd[MAXP], gv[8 * MAXP], n = 0;
                for (int j = 0; j < q; j++) {
                    gc[j] = vlen(first + j);
                    gd[j] = n;
                    n += gc[j];
                }
                OK(MPI_Gatherv(NULL, 0, MPI_INT, gv, gc, gd, MPI_INT, role, ic));
                if (role == MPI_ROOT)
                    for (int j = 0; j < q; j++)
                        for (int i = 0; i < gc[j]; i++) CHECK(gv[gd[j] + i] == val(first + j, i));
                int s[2 * MAXP];
                for (int i = 0; i < 2 * q; i++) s[i] = val(wr, 50 + i);
                OK(MPI_Scatter(s, 2, MPI_INT, NULL, 0, MPI_INT, role, ic));
                for (int j = 0; j < q; j++)
                    for (int i = 0; i < gc[j]; i++) gv[gd[j] + i] = val(j, i);
                OK(MPI_Scatterv(gv, gc, gd, MPI_INT, NULL, 0, MPI_INT, role, ic));
                int red[3] = {-1, -1, -1};
                OK(MPI_Reduce(NULL, red, 3, MPI_INT, MPI_SUM, role, ic));
                if (role == MPI_ROOT)
                    for (int i = 0; i < 3; i++) {
                        want = 0;
                        for (int j = 0; j < q; j++) want += val(first + j, i);
                        CHECK(red[i] == want);
                    }
            } else {
                int b[4];
                OK(MPI_Bcast(b, 4, MPI_INT, r, ic));
                for (int i = 0; i < 4; i++) CHECK(b[i] == val(root_world, i));
                int two[2] = {val(wr, 0), val(wr, 1)};
                OK(MPI_Gather(two, 2, MPI_INT, NULL, 0, MPI_INT, r, ic));
                for (int i = 0; i < vlen(wr); i++) mine[i] = val(wr, i);
                OK(MPI_Gatherv(mine, vlen(wr), MPI_INT, NULL, NULL, NULL, MPI_INT, r, ic));
                int s[2];
                OK(MPI_Scatter(NULL, 0, MPI_INT, s, 2, MPI_INT, r, ic));
                CHECK(s[0] == val(root_world, 50 + 2 * me) && s[1] == val(root_world, 51 + 2 * me));
                int sv[8];
                OK(MPI_Scatterv(NULL, NULL, NULL, MPI_INT, sv, vlen(wr), MPI_INT, r, ic));
                for (int i = 0; i < vlen(wr); i++) CHECK(sv[i] == val(me, i));
                int three[3] = {val(wr, 0), val(wr, 1), val(wr, 2)};
                OK(MPI_Reduce(three, NULL, 3, MPI_INT, MPI_SUM, r, ic));
            }
        }
    }
    /* Errors: a root outside the remote group. */
    OK(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
    CHECK(MPI_Gather(mine, 1, MPI_INT, got, 1, MPI_INT, q, ic) == MPI_ERR_ROOT);
    OK(MPI_Barrier(ic));
    OK(MPI_Comm_free(&ic));
    OK(MPI_Comm_free(&local));
    printf("rank %d of %d: intercoll ok\n", wr, wp);
    OK(MPI_Finalize());
    return 0;
}
