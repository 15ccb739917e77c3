/* MPI_Comm_split and MPI_Comm_create on intercommunicators (the result joins the
 * matching parts of both groups), MPI_Alltoallw on an intercommunicator, and
 * MPI_Allgatherv whose receive blocks overlap (erroneous in MPI, done by test suites:
 * it completes and each location holds one of the blocks written there). 2+ ranks. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2 && size <= 64);
    int left = rank < size / 2;
    MPI_Comm half, ic;
    OK(MPI_Comm_split(MPI_COMM_WORLD, left, rank, &half));
    OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, left ? size / 2 : 0, 7, &ic));
    int lsize, rsize, lrank;
    OK(MPI_Comm_size(ic, &lsize));
    OK(MPI_Comm_remote_size(ic, &rsize));
    OK(MPI_Comm_rank(ic, &lrank));

    /* Split by parity of the local rank, keys reversing the order. */
    MPI_Comm sp;
    OK(MPI_Comm_split(ic, lrank % 2, -lrank, &sp));
    int inter = 0, n, rn, r;
    int mine = (lsize - lrank % 2 + 1) / 2;          /* local ranks of my parity */
    int theirs = (rsize - lrank % 2 + 1) / 2;
    if (theirs == 0) {
        CHECK(sp == MPI_COMM_NULL);
    } else {
        OK(MPI_Comm_test_inter(sp, &inter));
        CHECK(inter);
        OK(MPI_Comm_size(sp, &n));
        OK(MPI_Comm_remote_size(sp, &rn));
        OK(MPI_Comm_rank(sp, &r));
        CHECK(n == mine && rn == theirs);
        CHECK(r == mine - 1 - lrank / 2); /* reversed by the keys */
        /* Each group gets the sum of the other group's world ranks of this parity. */
        int w = rank, sum = -1, expect = 0;
        for (int q = 0; q < size; q++) {
            int qleft = q < size / 2, ql = qleft ? q : q - size / 2;
            if (qleft != left && ql % 2 == lrank % 2) expect += q;
        }
        OK(MPI_Allreduce(&w, &sum, 1, MPI_INT, MPI_SUM, sp));
        CHECK(sum == expect);
        OK(MPI_Comm_free(&sp));
    }

    /* MPI_Comm_create dropping local rank 0 on both sides. */
    MPI_Group g, g1;
    OK(MPI_Comm_group(ic, &g));
    int zero = 0;
    OK(MPI_Group_excl(g, 1, &zero, &g1));
    MPI_Comm cr;
    OK(MPI_Comm_create(ic, g1, &cr));
    if (lrank == 0 || lsize == 1 || rsize == 1) {
        CHECK(cr == MPI_COMM_NULL);
    } else {
        OK(MPI_Comm_size(cr, &n));
        OK(MPI_Comm_remote_size(cr, &rn));
        OK(MPI_Comm_rank(cr, &r));
        CHECK(n == lsize - 1 && rn == rsize - 1 && r == lrank - 1);
        int x = 1, got = 0;
        OK(MPI_Allreduce(&x, &got, 1, MPI_INT, MPI_SUM, cr));
        CHECK(got == rsize - 1);
        OK(MPI_Comm_free(&cr));
    }
    OK(MPI_Group_free(&g1));
    OK(MPI_Group_free(&g));

    /* Alltoallw across: block j goes to remote rank j. */
    int sb[64], rb[64], cnt[64], dsp[64];
    MPI_Datatype ty[64];
    for (int j = 0; j < rsize; j++) {
        sb[j] = 1000 * rank + j;
        rb[j] = -1;
        cnt[j] = 1;
        dsp[j] = j * (int)sizeof(int);
        ty[j] = MPI_INT;
    }
    OK(MPI_Alltoallw(sb, cnt, dsp, ty, rb, cnt, dsp, ty, ic));
    for (int j = 0; j < rsize; j++) {
        int wj = left ? size / 2 + j : j; /* world rank of remote rank j */
        CHECK(rb[j] == 1000 * wj + lrank);
    }
    OK(MPI_Comm_free(&ic));
    OK(MPI_Comm_free(&half));

    /* Allgatherv with every block at displacement 0. */
    int counts[64], displs[64], out[4] = {-1, -1, -1, -1}, in[2] = {rank, rank};
    for (int q = 0; q < size; q++) { counts[q] = 2; displs[q] = 0; }
    OK(MPI_Allgatherv(in, 2, MPI_INT, out, counts, displs, MPI_INT, MPI_COMM_WORLD));
    CHECK(out[0] == out[1] && out[0] >= 0 && out[0] < size && out[2] == -1);

    OK(MPI_Finalize());
    if (rank == 0) printf("intersplit ok\n");
    return 0;
}
