/* MPI_THREAD_MULTIPLE: several threads of every rank send, receive, probe, wait and run
 * collectives at once (each on its own tag or communicator), send to threads of their own
 * rank, and receive from any source while other threads send. Every message is checked.
 * Ranks pair up (0-1, 2-3, ...): run on an even number of ranks. */
#include "check.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define T 4
#define ITERS 200
#define ANY_MSGS 50

static int rank, size;
static MPI_Comm comms[T];

static unsigned char fill(int t, int it, size_t i) { return (unsigned char)(t * 31 + it * 7 + i); }

static void pingpong(int t, size_t n, int iters) {
    int peer = rank ^ 1;
    unsigned char *s = malloc(n ? n : 1), *r = malloc(n ? n : 1);
    CHECK(s && r);
    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < n; i++) s[i] = fill(t, it, i);
        memset(r, 0, n);
        MPI_Status st;
        if (rank % 2 == 0) {
            OK(MPI_Send(s, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD));
            OK(MPI_Recv(r, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD, &st));
        } else {
            OK(MPI_Recv(r, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD, &st));
            OK(MPI_Send(s, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD));
        }
        int got;
        OK(MPI_Get_count(&st, MPI_BYTE, &got));
        CHECK(got == (int)n && st.MPI_SOURCE == peer && st.MPI_TAG == t);
        for (size_t i = 0; i < n; i++) CHECK(r[i] == fill(t, it, i));
    }
    free(s);
    free(r);
}

/* Nonblocking exchange with the partner: Isend/Irecv, then Waitall or Waitany. */
static void exchange(int t) {
    int peer = rank ^ 1;
    for (int it = 0; it < ITERS; it++) {
        int out[4], in[4];
        for (int i = 0; i < 4; i++) out[i] = rank * 100000 + t * 1000 + it * 4 + i;
        MPI_Request rq[2];
        OK(MPI_Irecv(in, 4, MPI_INT, peer, 10 + t, MPI_COMM_WORLD, &rq[0]));
        OK(MPI_Isend(out, 4, MPI_INT, peer, 10 + t, MPI_COMM_WORLD, &rq[1]));
        if (it % 2 == 0) {
            OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        } else {
            int idx, left = 2;
            while (left > 0) {
                OK(MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE));
                CHECK(idx == 0 || idx == 1);
                left--;
            }
        }
        for (int i = 0; i < 4; i++) CHECK(in[i] == peer * 100000 + t * 1000 + it * 4 + i);
    }
}

/* Matched probes (the thread-safe probe): each thread takes its partner's message with
 * MPI_Mprobe and receives exactly that one with MPI_Mrecv. */
static void matched(int t) {
    int peer = rank ^ 1;
    for (int it = 0; it < ITERS / 2; it++) {
        int v = rank * 100000 + t * 1000 + it, w = -1;
        MPI_Request rq;
        MPI_Message m;
        MPI_Status st;
        OK(MPI_Isend(&v, 1, MPI_INT, peer, 400 + t, MPI_COMM_WORLD, &rq));
        OK(MPI_Mprobe(peer, 400 + t, MPI_COMM_WORLD, &m, &st));
        OK(MPI_Mrecv(&w, 1, MPI_INT, &m, &st));
        OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(w == peer * 100000 + t * 1000 + it && st.MPI_TAG == 400 + t);
    }
}

/* Collectives on this thread's own communicator. */
static void collectives(int t) {
    MPI_Comm c = comms[t];
    for (int it = 0; it < ITERS; it++) {
        long v = rank + t + it, sum = 0;
        OK(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, c));
        CHECK(sum == (long)size * (t + it) + (long)size * (size - 1) / 2);
        int b = (rank == it % size) ? t * 1000 + it : -1;
        OK(MPI_Bcast(&b, 1, MPI_INT, it % size, c));
        CHECK(b == t * 1000 + it);
        if (it % 16 == 0) OK(MPI_Barrier(c));
    }
}

/* Thread t sends to thread t+1 of the same rank and receives from thread t-1. */
static void to_self(int t) {
    for (int it = 0; it < ITERS; it++) {
        int v = t * 10000 + it, w = -1;
        MPI_Request rq;
        OK(MPI_Isend(&v, 1, MPI_INT, rank, 200 + (t + 1) % T, MPI_COMM_WORLD, &rq));
        OK(MPI_Recv(&w, 1, MPI_INT, rank, 200 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(w == ((t + T - 1) % T) * 10000 + it);
    }
}

/* Thread 0 of rank 0 receives from any source (probing first) what threads 1.. of every
 * other rank send; the other threads of rank 0 stay busy with their own traffic. */
static void any_source(int t) {
    if (rank == 0 && t == 0) {
        int expect = (size - 1) * (T - 1) * ANY_MSGS;
        long seen[T] = {0};
        for (int k = 0; k < expect; k++) {
            MPI_Status st;
            OK(MPI_Probe(MPI_ANY_SOURCE, 300, MPI_COMM_WORLD, &st));
            int m[2];
            OK(MPI_Recv(m, 2, MPI_INT, st.MPI_SOURCE, 300, MPI_COMM_WORLD, &st));
            CHECK(m[0] == st.MPI_SOURCE && m[1] >= 1 && m[1] < T);
            seen[m[1]]++;
        }
        for (int i = 1; i < T; i++) CHECK(seen[i] == (size - 1) * ANY_MSGS);
    } else if (rank != 0 && t != 0) {
        for (int k = 0; k < ANY_MSGS; k++) {
            int m[2] = {rank, t};
            OK(MPI_Send(m, 2, MPI_INT, 0, 300, MPI_COMM_WORLD));
        }
    }
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Long waits, which go to sleep: the odd rank's thread waits for a message its partner
 * sends 150 ms later (with `everyone`, every thread of both ranks is asleep meanwhile:
 * the arrival itself must wake one; otherwise the others keep progressing and wake it). */
static void late(int t, int tag, int everyone) {
    if (!everyone && t != 1) return;
    int peer = rank ^ 1, v = tag * 10 + t, w = -1;
    if (rank % 2 == 0) {
        pause_ms(150);
        OK(MPI_Send(&v, 1, MPI_INT, peer, tag + t, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(&w, 1, MPI_INT, peer, tag + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(w == v);
    }
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg, is_main = -1;
    OK(MPI_Is_thread_main(&is_main));
    CHECK(is_main == (t == 0));
    late(t, 500, 0);
    pingpong(t, 8, ITERS);
    pingpong(t, 40000, 20);
    pingpong(t, 300000, 5);
    exchange(t);
    matched(t);
    collectives(t);
    to_self(t);
    any_source(t);
    late(t, 600, 1);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1, main_thread = 0;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    int q = -1;
    OK(MPI_Query_thread(&q));
    CHECK(q == MPI_THREAD_MULTIPLE);
    OK(MPI_Is_thread_main(&main_thread));
    CHECK(main_thread);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size % 2 == 0);
    for (int t = 0; t < T; t++) OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));

    pthread_t th[T];
    for (int t = 1; t < T; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    worker((void *)(intptr_t)0);
    for (int t = 1; t < T; t++) CHECK(pthread_join(th[t], NULL) == 0);

    for (int t = 0; t < T; t++) OK(MPI_Comm_free(&comms[t]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("threads ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
