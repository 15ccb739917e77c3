/* One-sided communication under fence: MPI_Put, MPI_Get, MPI_Accumulate (SUM, MAX, MIN,
 * REPLACE), MPI_Get_accumulate (SUM, NO_OP) on a window from MPI_Win_allocate and one from
 * MPI_Win_create on program memory; data above the 8 KiB a control message carries;
 * derived datatypes at the target (stride-2 vector) and at the origin; the _c forms.
 * Runs on any number of ranks. */
#include "check.h"
#include <string.h>

#define N 3000 /* ints: 12000 bytes, sent after their control message */

int main(int argc, char **argv) {
    int rank, p;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    int next = (rank + 1) % p, prev = (rank + p - 1) % p;

    /* ---- an allocated window of 2N ints: block 0 for the ring, block 1 for sums ---- */
    MPI_Win win;
    int *base = NULL;
    OK(MPI_Win_allocate((MPI_Aint)(2 * N * sizeof(int)), sizeof(int), MPI_INFO_NULL,
                        MPI_COMM_WORLD, &base, &win));
    CHECK(base != NULL && win != MPI_WIN_NULL);
    for (int i = 0; i < N; i++) base[i] = -1;
    for (int i = N; i < 2 * N; i++) base[i] = 0;
    int *mine = malloc(N * sizeof(int)), *back = malloc(N * sizeof(int));
    int *ones = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) {
        mine[i] = rank * 100000 + i;
        back[i] = -7;
        ones[i] = rank + 1;
    }
    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    OK(MPI_Put(mine, N, MPI_INT, next, 0, N, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) CHECK(base[i] == prev * 100000 + i);
    /* Get back what this rank put; everyone adds rank + 1 to block 1 of everyone. */
    OK(MPI_Get(back, N, MPI_INT, next, 0, N, MPI_INT, win));
    for (int r = 0; r < p; r++)
        OK(MPI_Accumulate(ones, N, MPI_INT, r, N, N, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) CHECK(back[i] == mine[i]);
    for (int i = N; i < 2 * N; i++) CHECK(base[i] == p * (p + 1) / 2);

    /* ---- derived datatypes: a stride-2 vector at the target, then at the origin ---- */
    MPI_Datatype vec;
    OK(MPI_Type_vector(N / 2, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int *halves = malloc((N / 2) * sizeof(int));
    for (int i = 0; i < N / 2; i++) halves[i] = 7000000 + i;
    OK(MPI_Put(halves, N / 2, MPI_INT, next, 0, 1, vec, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N / 2; i++) {
        CHECK(base[2 * i] == 7000000 + i);
        CHECK(base[2 * i + 1] == prev * 100000 + 2 * i + 1);
    }
    /* Every other element of a local buffer from the next rank's sums (odd ones stay). */
    int *spread = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) spread[i] = -3;
    OK(MPI_Get(spread, 1, vec, next, N, N / 2, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N / 2; i++) {
        CHECK(spread[2 * i] == p * (p + 1) / 2);
        CHECK(spread[2 * i + 1] == -3);
    }
    /* Large-count forms. */
    int two[2] = {rank, -rank}, got2[2] = {0, 0};
    OK(MPI_Put_c(two, (MPI_Count)2, MPI_INT, next, (MPI_Aint)N, (MPI_Count)2, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    CHECK(base[N] == prev && base[N + 1] == -prev);
    /* (The next epoch's accumulates may land as soon as a rank passes a fence: this
     * rank's loads above must be done before any rank starts them.) */
    OK(MPI_Win_fence(0, win));
    OK(MPI_Accumulate_c(two, (MPI_Count)2, MPI_INT, next, (MPI_Aint)N, (MPI_Count)2, MPI_INT,
                        MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Get_c(got2, (MPI_Count)2, MPI_INT, next, (MPI_Aint)N, (MPI_Count)2, MPI_INT, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(got2[0] == 2 * rank && got2[1] == -2 * rank);
    OK(MPI_Type_free(&vec));
    OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL);

    /* ---- a window on program memory: doubles, reductions into rank 0 ---- */
    int nd = 5 + p;
    double *dmem = malloc(nd * sizeof(double));
    for (int i = 0; i < nd; i++) dmem[i] = 0.0;
    dmem[1] = 1e9;
    MPI_Win dw;
    OK(MPI_Win_create_c(dmem, (MPI_Aint)(nd * sizeof(double)), (MPI_Aint)sizeof(double),
                        MPI_INFO_NULL, MPI_COMM_WORLD, &dw));
    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, dw));
    double me = rank, half = 0.5, one = 1.0, ten = 10.0 + rank, fetched = -1.0, peek = -1.0;
    OK(MPI_Accumulate(&me, 1, MPI_DOUBLE, 0, 0, 1, MPI_DOUBLE, MPI_MAX, dw));
    OK(MPI_Accumulate(&me, 1, MPI_DOUBLE, 0, 1, 1, MPI_DOUBLE, MPI_MIN, dw));
    OK(MPI_Accumulate(&half, 1, MPI_DOUBLE, 0, 2, 1, MPI_DOUBLE, MPI_SUM, dw));
    OK(MPI_Get_accumulate(&one, 1, MPI_DOUBLE, &fetched, 1, MPI_DOUBLE, 0, 3, 1, MPI_DOUBLE,
                          MPI_SUM, dw));
    OK(MPI_Accumulate(&ten, 1, MPI_DOUBLE, 0, 5 + rank, 1, MPI_DOUBLE, MPI_REPLACE, dw));
    OK(MPI_Win_fence(0, dw));
    CHECK(fetched >= 0.0 && fetched < p);
    if (rank == 0) {
        CHECK(dmem[0] == p - 1);
        CHECK(dmem[1] == 0.0);
        CHECK(dmem[2] == 0.5 * p);
        CHECK(dmem[3] == p);
        for (int r = 0; r < p; r++) CHECK(dmem[5 + r] == 10.0 + r);
    }
    /* A fetch without change (MPI_NO_OP: the origin is not read). */
    OK(MPI_Get_accumulate_c(NULL, (MPI_Count)0, MPI_DATATYPE_NULL, &peek, (MPI_Count)1,
                            MPI_DOUBLE, 0, 3, (MPI_Count)1, MPI_DOUBLE, MPI_NO_OP, dw));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, dw));
    CHECK(peek == p);
    if (rank == 0) CHECK(dmem[3] == p);
    OK(MPI_Win_free(&dw));
    free(dmem);
    free(mine);
    free(back);
    free(ones);
    free(halves);
    free(spread);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("rma_fence ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
