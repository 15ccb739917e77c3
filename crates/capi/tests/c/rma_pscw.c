/* General active-target synchronization: MPI_Win_post / start / complete / wait and
 * MPI_Win_test, on a ring (large puts), all to all, with empty groups, and on a window
 * whose group orders the ranks differently from the groups given (made from
 * MPI_COMM_WORLD's group: translated to the window's ranks). Runs on any number of
 * ranks. */
#include "check.h"
#include <string.h>

#define N 4000

static int rank, p;

/* The group of world ranks `ranks[0..n)`. */
static MPI_Group world_group(int n, const int *ranks) {
    MPI_Group wg, g;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Group_incl(wg, n, ranks, &g));
    OK(MPI_Group_free(&wg));
    return g;
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    int next = (rank + 1) % p, prev = (rank + p - 1) % p;
    int *buf = malloc(N * sizeof(int)), *src = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) {
        buf[i] = -1;
        src[i] = rank * 10000 + i;
    }
    MPI_Win win;
    OK(MPI_Win_create(buf, (MPI_Aint)(N * sizeof(int)), sizeof(int), MPI_INFO_NULL,
                      MPI_COMM_WORLD, &win));
    MPI_Group gprev = world_group(1, &prev), gnext = world_group(1, &next);

    /* ---- ring: expose to the previous rank, access the next; wait ---- */
    OK(MPI_Win_post(gprev, 0, win));
    OK(MPI_Win_start(gnext, 0, win));
    OK(MPI_Put(src, N, MPI_INT, next, 0, N, MPI_INT, win));
    OK(MPI_Win_complete(win));
    OK(MPI_Win_wait(win));
    for (int i = 0; i < N; i++) CHECK(buf[i] == prev * 10000 + i);

    /* ---- the same, closed with MPI_Win_test ---- */
    OK(MPI_Win_post(gprev, MPI_MODE_NOSTORE, win));
    OK(MPI_Win_start(gnext, 0, win));
    int small = -rank;
    OK(MPI_Put(&small, 1, MPI_INT, next, 5, 1, MPI_INT, win));
    OK(MPI_Win_complete(win));
    int flag = 0, polls = 0;
    while (!flag) {
        OK(MPI_Win_test(win, &flag));
        polls++;
    }
    CHECK(polls >= 1);
    CHECK(buf[5] == -prev);

    /* ---- all to all: every rank writes its rank into slot r of every other rank ---- */
    int *others = malloc(p * sizeof(int)), no = 0;
    for (int r = 0; r < p; r++)
        if (r != rank) others[no++] = r;
    MPI_Group gothers = world_group(no, others);
    OK(MPI_Win_post(gothers, 0, win));
    OK(MPI_Win_start(gothers, 0, win));
    for (int k = 0; k < no; k++)
        OK(MPI_Accumulate(&rank, 1, MPI_INT, others[k], 100 + rank, 1, MPI_INT, MPI_REPLACE,
                          win));
    OK(MPI_Win_complete(win));
    OK(MPI_Win_wait(win));
    for (int r = 0; r < p; r++)
        if (r != rank) CHECK(buf[100 + r] == r);

    /* ---- empty groups: epochs with nobody ---- */
    OK(MPI_Win_post(MPI_GROUP_EMPTY, 0, win));
    OK(MPI_Win_start(MPI_GROUP_EMPTY, 0, win));
    OK(MPI_Win_complete(win));
    flag = 0;
    OK(MPI_Win_test(win, &flag));
    CHECK(flag == 1);
    OK(MPI_Win_free(&win));

    /* ---- a window whose ranks are the world's reversed ---- */
    MPI_Comm rev;
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, p - 1 - rank, &rev));
    int rrank;
    OK(MPI_Comm_rank(rev, &rrank));
    CHECK(rrank == p - 1 - rank);
    int slot[2] = {-1, -1};
    MPI_Win rw;
    OK(MPI_Win_create(slot, (MPI_Aint)sizeof slot, 1, MPI_INFO_NULL, rev, &rw));
    OK(MPI_Win_post(gprev, 0, rw));  /* world ranks: translated to the window's */
    OK(MPI_Win_start(gnext, 0, rw));
    int word = 1000 + rank;
    /* The target rank is a rank of the window: world rank `next` is p - 1 - next. */
    OK(MPI_Put(&word, 1, MPI_INT, p - 1 - next, sizeof(int), 1, MPI_INT, rw));
    OK(MPI_Win_complete(rw));
    OK(MPI_Win_wait(rw));
    CHECK(slot[0] == -1 && slot[1] == 1000 + prev);
    OK(MPI_Win_free(&rw));
    OK(MPI_Comm_free(&rev));

    OK(MPI_Group_free(&gprev));
    OK(MPI_Group_free(&gnext));
    if (gothers != MPI_GROUP_EMPTY) OK(MPI_Group_free(&gothers));
    free(others);
    free(buf);
    free(src);
    printf("rma_pscw ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
