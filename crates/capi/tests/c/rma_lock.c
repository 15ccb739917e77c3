/* Passive-target one-sided communication: a counter on rank 0 under exclusive locks with
 * MPI_Fetch_and_op (every fetched value distinct), puts and gets under shared locks,
 * MPI_Win_lock_all with MPI_Win_flush / flush_all / flush_local / flush_local_all, and a
 * mutex made of MPI_Compare_and_swap guarding a read-modify-write of plain gets and puts.
 * Runs on any number of ranks. */
#include "check.h"
#include <string.h>

#define ROUNDS 30
/* Slots of the window (longs). */
#define COUNTER 0
#define MUTEX 1
#define GUARDED 2
#define SUMS 3
#define LAST 4
#define PER_RANK 8

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int rank, p;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    int next = (rank + 1) % p;
    MPI_Win win;
    long *w;
    int slots = PER_RANK + p;
    OK(MPI_Win_allocate((MPI_Aint)(slots * sizeof(long)), sizeof(long), MPI_INFO_NULL,
                        MPI_COMM_WORLD, &w, &win));
    for (int i = 0; i < slots; i++) w[i] = 0;
    w[MUTEX] = -1;
    OK(MPI_Win_sync(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* ---- a counter under exclusive locks ---- */
    long one = 1, olds[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Fetch_and_op(&one, &olds[i], MPI_LONG, 0, COUNTER, MPI_SUM, win));
        OK(MPI_Win_unlock(0, win));
    }
    long *all = malloc((size_t)ROUNDS * p * sizeof(long));
    OK(MPI_Gather(olds, ROUNDS, MPI_LONG, all, ROUNDS, MPI_LONG, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        qsort(all, (size_t)ROUNDS * p, sizeof(long), cmp_long);
        for (long i = 0; i < (long)ROUNDS * p; i++) CHECK(all[i] == i);
        CHECK(w[COUNTER] == (long)ROUNDS * p);
    }
    free(all);

    /* ---- shared locks: each rank writes its slot at every rank, then reads them ---- */
    long mark = 7L * rank + 1;
    for (int t = 0; t < p; t++) {
        OK(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
        OK(MPI_Put(&mark, 1, MPI_LONG, t, PER_RANK + rank, 1, MPI_LONG, win));
        OK(MPI_Win_unlock(t, win));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    long *seen = malloc(p * sizeof(long));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, next, MPI_MODE_NOCHECK, win));
    OK(MPI_Get(seen, p, MPI_LONG, next, PER_RANK, p, MPI_LONG, win));
    OK(MPI_Win_unlock(next, win));
    for (int r = 0; r < p; r++) CHECK(seen[r] == 7L * r + 1);
    free(seen);
    /* A lock on MPI_PROC_NULL does nothing. */
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, MPI_PROC_NULL, 0, win));
    OK(MPI_Win_unlock(MPI_PROC_NULL, win));

    /* ---- lock_all with flushes ---- */
    OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < p; t++) {
        OK(MPI_Accumulate(&one, 1, MPI_LONG, t, SUMS, 1, MPI_LONG, MPI_SUM, win));
        OK(MPI_Win_flush(t, win));
    }
    OK(MPI_Put(&mark, 1, MPI_LONG, next, LAST, 1, MPI_LONG, win));
    OK(MPI_Win_flush_local(next, win));
    mark = -1; /* the origin buffer may be reused after a local flush */
    OK(MPI_Win_flush_all(win));
    long counted = -1;
    OK(MPI_Fetch_and_op(NULL, &counted, MPI_LONG, 0, COUNTER, MPI_NO_OP, win));
    OK(MPI_Win_flush_local_all(win));
    CHECK(counted == (long)ROUNDS * p);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_sync(win));
    CHECK(w[SUMS] == p);
    CHECK(w[LAST] == 7L * ((rank + p - 1) % p) + 1);

    /* ---- a mutex of compare-and-swap on rank 0 guarding a get + put increment ---- */
    long me = rank, none = -1, got;
    OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < ROUNDS; i++) {
        do {
            OK(MPI_Compare_and_swap(&me, &none, &got, MPI_LONG, 0, MUTEX, win));
            OK(MPI_Win_flush(0, win));
        } while (got != -1);
        long v = -100;
        OK(MPI_Get(&v, 1, MPI_LONG, 0, GUARDED, 1, MPI_LONG, win));
        OK(MPI_Win_flush(0, win));
        v += 1;
        OK(MPI_Put(&v, 1, MPI_LONG, 0, GUARDED, 1, MPI_LONG, win));
        OK(MPI_Win_flush(0, win));
        OK(MPI_Fetch_and_op(&none, &got, MPI_LONG, 0, MUTEX, MPI_REPLACE, win));
        OK(MPI_Win_flush(0, win));
        CHECK(got == me);
    }
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        OK(MPI_Win_sync(win));
        CHECK(w[GUARDED] == (long)ROUNDS * p);
        CHECK(w[MUTEX] == -1);
    }
    OK(MPI_Win_free(&win));
    printf("rma_lock ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
