/* One-sided communication at MPI_THREAD_MULTIPLE: while thread 1 ping-pongs with the
 * partner rank and thread 2 runs collectives on its own communicator, thread 0 runs
 * passive-target epochs (lock, put, flush, get, unlock) on a window of program memory
 * (synchronized by messages) and on an allocated one (a shared segment on one host),
 * and the main thread then runs fence and post-start-complete-wait epochs; last, two
 * threads put and flush on one window at once. Every value is checked. Ranks pair up (0-1, 2-3, ...): run on an even number of ranks. */
#include "check.h"
#include <pthread.h>
#include <stdint.h>

#define ITERS 100
#define N 16

static int rank, size;
static MPI_Comm coll_comm;
static MPI_Win created, allocated;
static long *created_mem, *allocated_mem;

static void passive(MPI_Win win) {
    int peer = rank ^ 1;
    for (int it = 0; it < ITERS; it++) {
        long v[N], back[N];
        for (int i = 0; i < N; i++) v[i] = rank * 1000000L + it * 100 + i;
        /* Each rank writes the upper or lower half of its partner's window. */
        MPI_Aint disp = (rank % 2) * N;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, win));
        OK(MPI_Put(v, N, MPI_LONG, peer, disp, N, MPI_LONG, win));
        OK(MPI_Win_flush(peer, win));
        OK(MPI_Get(back, N, MPI_LONG, peer, disp, N, MPI_LONG, win));
        OK(MPI_Win_unlock(peer, win));
        for (int i = 0; i < N; i++) CHECK(back[i] == v[i]);
    }
}

/* Two threads issue puts and flushes on one window at once, in the main thread's
 * lock_all epoch: one may be waiting in its flush while the other puts. */
static void *same_window(void *arg) {
    int t = (int)(intptr_t)arg, peer = rank ^ 1;
    for (int it = 0; it < ITERS; it++) {
        long v = rank * 1000000L + t * 1000 + it;
        OK(MPI_Put(&v, 1, MPI_LONG, peer, 2 * N + t, 1, MPI_LONG, created));
        OK(MPI_Win_flush(peer, created));
    }
    return NULL;
}

static void *thread0(void *arg) {
    (void)arg;
    passive(created);
    passive(allocated);
    return NULL;
}

static void *thread1(void *arg) {
    (void)arg;
    int peer = rank ^ 1;
    for (int it = 0; it < ITERS * 4; it++) {
        int out = rank * 100000 + it, in = -1;
        OK(MPI_Sendrecv(&out, 1, MPI_INT, peer, 7, &in, 1, MPI_INT, peer, 7, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
        CHECK(in == peer * 100000 + it);
    }
    return NULL;
}

static void *thread2(void *arg) {
    (void)arg;
    for (int it = 0; it < ITERS; it++) {
        long v = rank + it, sum = 0;
        OK(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, coll_comm));
        CHECK(sum == (long)size * it + (long)size * (size - 1) / 2);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size % 2 == 0);
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &coll_comm));
    created_mem = calloc(3 * N, sizeof(long));
    CHECK(created_mem);
    OK(MPI_Win_create(created_mem, 3 * N * sizeof(long), sizeof(long), MPI_INFO_NULL,
                      MPI_COMM_WORLD, &created));
    OK(MPI_Win_allocate(2 * N * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                        &allocated_mem, &allocated));

    pthread_t th[3];
    void *(*fns[3])(void *) = {thread0, thread1, thread2};
    for (int t = 0; t < 3; t++) CHECK(pthread_create(&th[t], NULL, fns[t], NULL) == 0);
    for (int t = 0; t < 3; t++) CHECK(pthread_join(th[t], NULL) == 0);
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* The partner's last epoch left its values in this rank's window. */
    int peer = rank ^ 1;
    for (int i = 0; i < N; i++) {
        long want = peer * 1000000L + (ITERS - 1) * 100 + i;
        CHECK(created_mem[(peer % 2) * N + i] == want);
    }

    /* Fence and PSCW epochs from the main thread, with a thread ping-ponging meanwhile. */
    pthread_t pp;
    CHECK(pthread_create(&pp, NULL, thread1, NULL) == 0);
    for (int it = 0; it < ITERS / 4; it++) {
        long v = rank * 1000L + it, got = -1;
        OK(MPI_Win_fence(0, created));
        OK(MPI_Put(&v, 1, MPI_LONG, peer, 0, 1, MPI_LONG, created));
        OK(MPI_Win_fence(0, created));
        CHECK(created_mem[0] == peer * 1000L + it);
        MPI_Group world_group, pair;
        OK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
        OK(MPI_Group_incl(world_group, 1, &peer, &pair));
        OK(MPI_Win_post(pair, 0, created));
        OK(MPI_Win_start(pair, 0, created));
        OK(MPI_Get(&got, 1, MPI_LONG, peer, 0, 1, MPI_LONG, created));
        OK(MPI_Win_complete(created));
        OK(MPI_Win_wait(created));
        CHECK(got == rank * 1000L + it);
        OK(MPI_Group_free(&pair));
        OK(MPI_Group_free(&world_group));
    }
    OK(MPI_Win_fence(0, created));
    CHECK(pthread_join(pp, NULL) == 0);

    OK(MPI_Win_lock_all(0, created));
    pthread_t sw[2];
    for (int t = 0; t < 2; t++)
        CHECK(pthread_create(&sw[t], NULL, same_window, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < 2; t++) CHECK(pthread_join(sw[t], NULL) == 0);
    OK(MPI_Win_unlock_all(created));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int t = 0; t < 2; t++)
        CHECK(created_mem[2 * N + t] == peer * 1000000L + t * 1000 + ITERS - 1);

    OK(MPI_Win_free(&created));
    OK(MPI_Win_free(&allocated));
    free(created_mem);
    OK(MPI_Comm_free(&coll_comm));
    printf("threads_rma ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
