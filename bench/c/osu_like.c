/*
 * osu_like.c: the phalanx project's OSU-style benchmarks in C.
 *
 * Same measurements, defaults, options and output format as crates/bench
 * (phalanx-bench), so the two can be compared under the same parser
 * (bench/compare.py). Uses MPI-1 calls, and MPI-3 one-sided calls for the one-sided
 * tests, so it builds against Open MPI's mpicc and against phalanx's C ABI alike.
 *
 *   mpirun -n 2 ./osu_like latency [-m [min:]max] [-i iters] [-x warmup]
 *   mpirun -n 2 ./osu_like latency_mt [-m [min:]max] [-i iters] [-x warmup] [-T threads]
 *   mpirun -n 2 ./osu_like bw      [-m [min:]max] [-i iters] [-x warmup] [-W window]
 *   mpirun -n 2 ./osu_like bibw    [-m [min:]max] [-i iters] [-x warmup] [-W window]
 *   mpirun -n P ./osu_like mbw_mr  [-m [min:]max] [-i iters] [-x warmup] [-W window]
 *   mpirun -n P ./osu_like bcast|allgather|gather|scatter|reduce|allreduce|alltoall
 *                                  [-m [min:]max] [-i iters] [-x warmup]
 *   mpirun -n P ./osu_like barrier [-i iters] [-x warmup]
 *   mpirun -n 2 ./osu_like put_latency|get_latency|acc_latency|fop_latency|cas_latency
 *                                  [-m [min:]max] [-i iters] [-x warmup]
 *   mpirun -n 2 ./osu_like put_bw|get_bw|put_bibw [-m [min:]max] [-i iters] [-x warmup]
 *                                  [-W window]
 *
 * latency: ping-pong between ranks 0 and 1; one-way latency in microseconds.
 * latency_mt: osu_latency_mt's measurement under MPI_THREAD_MULTIPLE: `threads`
 *          threads per rank (default 2), thread t of rank 0 ping-pongs with thread t
 *          of rank 1 on tag 1 + t, all at once (a pthread barrier starts each size);
 *          one-way latency in microseconds averaged over the threads. Every message
 *          carries its iteration and thread, checked on arrival.
 * bw:      rank 0 posts `window` MPI_Isend, rank 1 `window` MPI_Irecv (all into
 *          the same buffer), both MPI_Waitall, then rank 1 sends a 4-byte ack;
 *          bandwidth in MB/s (10^6 bytes per second).
 * bibw:    osu_bibw: each rank posts `window` MPI_Irecv, then `window` MPI_Isend
 *          (rank 0 sends tag 100 and receives tag 10, rank 1 the reverse), then
 *          waits for them all (rank 0: sends first, rank 1: receives first); no
 *          ack. MB/s = size * window * 2 * iterations / time on rank 0.
 * mbw_mr:  osu_mbw_mr: ranks r < P/2 send to r + P/2 (an odd P leaves the last
 *          rank idle). Every iteration starts with an untimed MPI_Barrier; then
 *          each sender times `window` MPI_Isend, MPI_Waitall and a 4-byte ack
 *          MPI_Recv, while its receiver posts `window` MPI_Irecv, MPI_Waitall and
 *          sends the ack. The senders' summed times are averaged over the pairs
 *          (MPI_Reduce); MB/s = pairs * size * window * iterations / time (all
 *          pairs together), Messages/s = pairs * window * iterations / time
 *          (OSU's MB/s * 10^6 / size, and defined for size 0). Prints
 *          "# Size  MB/s  Messages/s".
 *          bw, bibw and mbw_mr share bw's defaults: 1 B .. 4 MiB, window 64, 100
 *          timed / 10 warm-up iterations, 20 / 2 above 8 KiB.
 * collectives: every rank times each call on its own with an untimed
 *          MPI_Barrier between calls (as OSU does); the per-rank mean is summed
 *          to rank 0 with MPI_Reduce and divided by P ("# Size  Avg Latency(us)").
 *          Bcast, gather, scatter and reduce use root = iteration mod P (seed
 *          000 §4.1). Sizes: the per-rank block for gather, scatter, allgather
 *          and alltoall; the message for bcast; size/4 floats (sum) for reduce
 *          and allreduce, whose sizes start at 4. Defaults: 1 B .. 1 MiB, 1000
 *          timed / 200 warm-up calls, 100 / 10 above 8 KiB. barrier prints
 *          "# Avg Latency(us)" and one value.
 * One-sided (the loops of OMB's defaults: MPI_Win_allocate, one window per size):
 *          put_latency / get_latency / acc_latency (MPI_SUM on MPI_CHAR): rank 0
 *          locks rank 1 shared once, then times MPI_Put (Get, Accumulate) + MPI_Win_flush
 *          per operation; fop_latency (MPI_Fetch_and_op, MPI_SUM) and cas_latency
 *          (MPI_Compare_and_swap) the same on one 8-byte integer. put_bw / get_bw:
 *          under the same lock, `window` operations to consecutive offsets then one
 *          flush per iteration (window 32 above LARGE_MESSAGE_SIZE), MB/s on rank 0.
 *          put_bibw: both ranks, MPI_Win_post/start, `window` puts to each other,
 *          complete/wait. Latency in microseconds per operation.
 * Sizes above LARGE_MESSAGE_SIZE use the smaller "large" iteration counts
 * unless -i / -x are given.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_MESSAGE_SIZE 8192
#define DEFAULT_MAX_SIZE (1L << 22)
#define DEFAULT_MAX_COLL_SIZE (1L << 20)
#define MAX_WINDOW 1024
#define MAX_THREADS 64
#define SYNC_TAG 999
#define DATA_TAG 100
#define ACK_TAG 101
#define BIBW_BACK_TAG 10 /* osu_bibw: rank 1 -> rank 0 */

enum test {
    TEST_LATENCY,
    TEST_BW,
    TEST_BIBW,
    TEST_MBW_MR,
    TEST_BCAST,
    TEST_ALLGATHER,
    TEST_GATHER,
    TEST_SCATTER,
    TEST_BARRIER,
    TEST_REDUCE,
    TEST_ALLREDUCE,
    TEST_ALLTOALL,
    TEST_PUT_LATENCY,
    TEST_GET_LATENCY,
    TEST_ACC_LATENCY,
    TEST_FOP_LATENCY,
    TEST_CAS_LATENCY,
    TEST_PUT_BW,
    TEST_GET_BW,
    TEST_PUT_BIBW,
    TEST_LATENCY_MT
};

/* Indexed by enum test. */
static const char *const TEST_NAMES[] = {
    "latency", "bw", "bibw", "mbw_mr", "bcast", "allgather",
    "gather", "scatter", "barrier", "reduce", "allreduce", "alltoall",
    "put_latency", "get_latency", "acc_latency", "fop_latency", "cas_latency",
    "put_bw", "get_bw", "put_bibw", "latency_mt"};
static const char *const TEST_TITLES[] = {"Latency",
                                          "Bandwidth",
                                          "Bi-Directional Bandwidth",
                                          "Multiple Bandwidth / Message Rate",
                                          "Broadcast Latency",
                                          "Allgather Latency",
                                          "Gather Latency",
                                          "Scatter Latency",
                                          "Barrier Latency",
                                          "Reduce Latency",
                                          "Allreduce Latency",
                                          "All-to-All Latency",
                                          "MPI_Put Latency",
                                          "MPI_Get Latency",
                                          "MPI_Accumulate Latency",
                                          "MPI_Fetch_and_op Latency",
                                          "MPI_Compare_and_swap Latency",
                                          "MPI_Put Bandwidth",
                                          "MPI_Get Bandwidth",
                                          "MPI_Put Bi-directional Bandwidth",
                                          "Multi-threaded Latency"};
#define NUM_TESTS ((int)(sizeof TEST_NAMES / sizeof TEST_NAMES[0]))

struct plan {
    enum test test;
    long min_size, max_size;
    long iterations, warmup; /* -1: per-size default */
    long small_iters, small_warmup, large_iters, large_warmup;
    int window;
    int threads;
};

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s latency|bw|bibw|mbw_mr|bcast|allgather|gather|scatter|barrier|"
            "reduce|allreduce|alltoall|put_latency|get_latency|acc_latency|fop_latency|"
            "cas_latency|put_bw|get_bw|put_bibw|latency_mt [-m [min:]max] [-i iterations] "
            "[-x warmup] [-W window] [-T threads]\n",
            prog);
}

static int parse_long(const char *s, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Parses "max" or "min:max" into the plan (call after the test's defaults are set). */
static int parse_sizes(const char *arg, struct plan *p)
{
    char buf[64];
    char *colon;
    if (strlen(arg) >= sizeof buf)
        return -1;
    strcpy(buf, arg);
    colon = strchr(buf, ':');
    if (colon) {
        *colon = '\0';
        if (parse_long(buf, &p->min_size) || parse_long(colon + 1, &p->max_size))
            return -1;
    } else { /* "max": the minimum keeps the test's default */
        if (parse_long(buf, &p->max_size))
            return -1;
    }
    return p->min_size <= p->max_size ? 0 : -1;
}

static int parse_args(int argc, char **argv, struct plan *p)
{
    int i;
    long v;
    if (argc < 2)
        return -1;
    memset(p, 0, sizeof *p);
    for (i = 0; i < NUM_TESTS && strcmp(argv[1], TEST_NAMES[i]) != 0; i++)
        ;
    if (i == NUM_TESTS)
        return -1;
    p->test = (enum test)i;
    p->max_size = DEFAULT_MAX_SIZE;
    if (p->test == TEST_LATENCY_MT) {
        p->min_size = 0;
        p->small_iters = 10000, p->small_warmup = 100;
        p->large_iters = 1000, p->large_warmup = 10;
    } else if (p->test >= TEST_PUT_LATENCY && p->test <= TEST_CAS_LATENCY) {
        p->min_size = 1;
        if (p->test == TEST_FOP_LATENCY || p->test == TEST_CAS_LATENCY)
            p->min_size = p->max_size = 8;
        p->small_iters = 10000, p->small_warmup = 100;
        p->large_iters = 1000, p->large_warmup = 10;
    } else if (p->test >= TEST_PUT_BW) {
        p->min_size = 1;
        p->small_iters = 100, p->small_warmup = 10;
        p->large_iters = 20, p->large_warmup = 2;
    } else if (p->test == TEST_LATENCY) {
        p->min_size = 0;
        p->small_iters = 10000, p->small_warmup = 100;
        p->large_iters = 1000, p->large_warmup = 10;
    } else if (p->test == TEST_BW || p->test == TEST_BIBW || p->test == TEST_MBW_MR) {
        p->min_size = 1;
        p->small_iters = 100, p->small_warmup = 10;
        p->large_iters = 20, p->large_warmup = 2;
    } else {
        p->min_size = (p->test == TEST_REDUCE || p->test == TEST_ALLREDUCE) ? 4 : 1;
        p->max_size = DEFAULT_MAX_COLL_SIZE;
        p->small_iters = 1000, p->small_warmup = 200;
        p->large_iters = 100, p->large_warmup = 10;
    }
    p->iterations = p->warmup = -1;
    p->window = 64;
    p->threads = 2;
    for (i = 2; i < argc; i++) {
        const char *opt = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val)
            return -1;
        if (strcmp(opt, "-m") == 0) {
            if (parse_sizes(val, p))
                return -1;
        } else if (strcmp(opt, "-i") == 0) {
            if (parse_long(val, &v) || v < 1)
                return -1;
            p->iterations = v;
        } else if (strcmp(opt, "-x") == 0) {
            if (parse_long(val, &v))
                return -1;
            p->warmup = v;
        } else if (strcmp(opt, "-W") == 0) {
            if (parse_long(val, &v) || v < 1 || v > MAX_WINDOW)
                return -1;
            p->window = (int)v;
        } else if (strcmp(opt, "-T") == 0) {
            if (parse_long(val, &v) || v < 1 || v > MAX_THREADS)
                return -1;
            p->threads = (int)v;
        } else {
            return -1;
        }
        i++;
    }
    return 0;
}

static void counts(const struct plan *p, long size, long *iters, long *warmup)
{
    int large = size > LARGE_MESSAGE_SIZE;
    *iters = p->iterations >= 0 ? p->iterations : (large ? p->large_iters : p->small_iters);
    *warmup = p->warmup >= 0 ? p->warmup : (large ? p->large_warmup : p->small_warmup);
}

/* First size of the plan: 0 if min is 0, else the smallest power of two >= min. */
static long first_size(const struct plan *p)
{
    long s = 1;
    if (p->min_size == 0)
        return 0;
    while (s < p->min_size)
        s *= 2;
    return s;
}

/* Size after `size`: 1 after 0, then doubling. */
static long next_size(long size)
{
    return size == 0 ? 1 : size * 2;
}

/* A two-rank barrier from point-to-point messages (the same one phalanx-bench uses). */
static void pair_barrier(int rank)
{
    char c = 0;
    int peer = 1 - rank;
    if (rank == 0) {
        MPI_Send(&c, 0, MPI_CHAR, peer, SYNC_TAG, MPI_COMM_WORLD);
        MPI_Recv(&c, 0, MPI_CHAR, peer, SYNC_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&c, 0, MPI_CHAR, peer, SYNC_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&c, 0, MPI_CHAR, peer, SYNC_TAG, MPI_COMM_WORLD);
    }
}

static void header(const char *title, const char *column)
{
    printf("# OSU-style C/MPI %s Test\n", title);
    printf("%-10s%18s\n", "# Size", column);
}

static void row(long size, double value)
{
    printf("%-10ld%18.3f\n", size, value);
    fflush(stdout);
}

/* A row of two value columns (mbw_mr: MB/s and Messages/s). */
static void row2(long size, double first, double second)
{
    printf("%-10ld%18.2f%18.2f\n", size, first, second);
    fflush(stdout);
}

static void run_latency(const struct plan *p, int rank, char *sbuf, char *rbuf)
{
    int peer = 1 - rank;
    long size, i, iters, warmup;
    if (rank == 0)
        header("Latency", "Latency (us)");
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        double start = 0.0, elapsed;
        counts(p, size, &iters, &warmup);
        pair_barrier(rank);
        start = MPI_Wtime();
        for (i = 0; i < iters + warmup; i++) {
            if (i == warmup)
                start = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(sbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            }
        }
        elapsed = MPI_Wtime() - start;
        if (rank == 0)
            row(size, elapsed * 1e6 / (2.0 * (double)iters));
    }
}

/* latency_mt: one thread's share (see the file's comment). */
struct mt_arg {
    const struct plan *p;
    int rank, t;
    long size;
    pthread_barrier_t *start;
    double elapsed;
    int bad;
};

static void *mt_pingpong(void *argp)
{
    struct mt_arg *a = argp;
    int peer = 1 - a->rank, tag = 1 + a->t;
    long i, iters, warmup, n = a->size < 8 ? 8 : a->size;
    char *s = malloc((size_t)n), *r = malloc((size_t)n);
    double start = 0.0;
    if (!s || !r) {
        a->bad = 1;
        return NULL;
    }
    memset(s, 'a', (size_t)n);
    counts(a->p, a->size, &iters, &warmup);
    pthread_barrier_wait(a->start);
    start = MPI_Wtime();
    for (i = 0; i < iters + warmup; i++) {
        int stamp = (int)(i * MAX_THREADS + a->t);
        if (i == warmup)
            start = MPI_Wtime();
        if (a->size >= 4)
            memcpy(s, &stamp, sizeof stamp);
        if (a->rank == 0) {
            MPI_Send(s, (int)a->size, MPI_CHAR, peer, tag, MPI_COMM_WORLD);
            MPI_Recv(r, (int)a->size, MPI_CHAR, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(r, (int)a->size, MPI_CHAR, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(s, (int)a->size, MPI_CHAR, peer, tag, MPI_COMM_WORLD);
        }
        if (a->size >= 4 && memcmp(r, &stamp, sizeof stamp) != 0)
            a->bad = 1;
    }
    a->elapsed = MPI_Wtime() - start;
    if (iters > 0)
        a->elapsed /= 2.0 * (double)iters;
    free(s);
    free(r);
    return NULL;
}

static void run_latency_mt(const struct plan *p, int rank)
{
    pthread_t th[MAX_THREADS];
    struct mt_arg args[MAX_THREADS];
    pthread_barrier_t start;
    long size;
    int t, bad = 0;
    if (rank == 0) {
        printf("# OSU-style C/MPI Multi-threaded Latency Test (%d threads per rank)\n",
               p->threads);
        printf("%-10s%18s\n", "# Size", "Latency (us)");
    }
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        double sum = 0.0;
        pthread_barrier_init(&start, NULL, (unsigned)p->threads);
        pair_barrier(rank);
        for (t = 0; t < p->threads; t++) {
            args[t] = (struct mt_arg){p, rank, t, size, &start, 0.0, 0};
            if (pthread_create(&th[t], NULL, mt_pingpong, &args[t]) != 0) {
                fprintf(stderr, "osu_like: pthread_create failed\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        for (t = 0; t < p->threads; t++) {
            pthread_join(th[t], NULL);
            sum += args[t].elapsed;
            bad |= args[t].bad;
        }
        pthread_barrier_destroy(&start);
        if (bad) {
            fprintf(stderr, "osu_like: latency_mt: wrong data at size %ld\n", size);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == 0)
            row(size, sum * 1e6 / p->threads);
    }
}

static void run_bw(const struct plan *p, int rank, char *sbuf, char *rbuf)
{
    static MPI_Request reqs[MAX_WINDOW];
    int peer = 1 - rank;
    char ack[4] = {0};
    long size, i, iters, warmup;
    int j;
    if (rank == 0)
        header("Bandwidth", "Bandwidth (MB/s)");
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        double start = 0.0, elapsed;
        counts(p, size, &iters, &warmup);
        pair_barrier(rank);
        start = MPI_Wtime();
        for (i = 0; i < iters + warmup; i++) {
            if (i == warmup)
                start = MPI_Wtime();
            if (rank == 0) {
                for (j = 0; j < p->window; j++)
                    MPI_Isend(sbuf, (int)size, MPI_CHAR, peer, DATA_TAG, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall(p->window, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(ack, 4, MPI_CHAR, peer, ACK_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (j = 0; j < p->window; j++)
                    MPI_Irecv(rbuf, (int)size, MPI_CHAR, peer, DATA_TAG, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall(p->window, reqs, MPI_STATUSES_IGNORE);
                MPI_Send(ack, 4, MPI_CHAR, peer, ACK_TAG, MPI_COMM_WORLD);
            }
        }
        elapsed = MPI_Wtime() - start;
        if (rank == 0)
            row(size, (double)size * p->window * (double)iters / 1e6 / elapsed);
    }
}

/* osu_bibw: both ranks post a window of receives, then a window of sends, and wait.
 * As in run_bw, the barrier before each size is pair_barrier and rank 0 times from the
 * end of the warm-up to the last wait (OMB 7.x sums per-iteration times on rank 0: the
 * same interval, as nothing runs between iterations). */
static void run_bibw(const struct plan *p, int rank, char *sbuf, char *rbuf)
{
    static MPI_Request sreqs[MAX_WINDOW], rreqs[MAX_WINDOW];
    int peer = 1 - rank;
    int stag = rank == 0 ? DATA_TAG : BIBW_BACK_TAG, rtag = rank == 0 ? BIBW_BACK_TAG : DATA_TAG;
    long size, i, iters, warmup;
    int j;
    if (rank == 0)
        header("Bi-Directional Bandwidth", "Bandwidth (MB/s)");
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        double start = 0.0, elapsed;
        counts(p, size, &iters, &warmup);
        pair_barrier(rank);
        start = MPI_Wtime();
        for (i = 0; i < iters + warmup; i++) {
            if (i == warmup)
                start = MPI_Wtime();
            for (j = 0; j < p->window; j++)
                MPI_Irecv(rbuf, (int)size, MPI_CHAR, peer, rtag, MPI_COMM_WORLD, &rreqs[j]);
            for (j = 0; j < p->window; j++)
                MPI_Isend(sbuf, (int)size, MPI_CHAR, peer, stag, MPI_COMM_WORLD, &sreqs[j]);
            if (rank == 0) {
                MPI_Waitall(p->window, sreqs, MPI_STATUSES_IGNORE);
                MPI_Waitall(p->window, rreqs, MPI_STATUSES_IGNORE);
            } else {
                MPI_Waitall(p->window, rreqs, MPI_STATUSES_IGNORE);
                MPI_Waitall(p->window, sreqs, MPI_STATUSES_IGNORE);
            }
        }
        elapsed = MPI_Wtime() - start;
        if (rank == 0)
            row(size, (double)size * p->window * 2.0 * (double)iters / 1e6 / elapsed);
    }
}

/* osu_mbw_mr: ranks r < P/2 stream windows to r + P/2; aggregate MB/s and messages/s. */
static void run_mbw_mr(const struct plan *p, int rank, int nprocs, char *sbuf, char *rbuf)
{
    static MPI_Request reqs[MAX_WINDOW];
    int pairs = nprocs / 2;
    char ack[4] = {0};
    long size, i, iters, warmup;
    int j;
    if (rank == 0) {
        printf("# OSU-style C/MPI %s Test\n", TEST_TITLES[TEST_MBW_MR]);
        printf("# [ pairs: %d ] [ window size: %d ]\n", pairs, p->window);
        printf("%-10s%18s%18s\n", "# Size", "MB/s", "Messages/s");
    }
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        double t = 0.0, start, sum = 0.0;
        counts(p, size, &iters, &warmup);
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < iters + warmup; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank < pairs) {
                int peer = rank + pairs;
                start = MPI_Wtime();
                for (j = 0; j < p->window; j++)
                    MPI_Isend(sbuf, (int)size, MPI_CHAR, peer, DATA_TAG, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall(p->window, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(ack, 4, MPI_CHAR, peer, ACK_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= warmup)
                    t += MPI_Wtime() - start;
            } else if (rank < 2 * pairs) {
                int peer = rank - pairs;
                for (j = 0; j < p->window; j++)
                    MPI_Irecv(rbuf, (int)size, MPI_CHAR, peer, DATA_TAG, MPI_COMM_WORLD, &reqs[j]);
                MPI_Waitall(p->window, reqs, MPI_STATUSES_IGNORE);
                MPI_Send(ack, 4, MPI_CHAR, peer, ACK_TAG, MPI_COMM_WORLD);
            }
        }
        /* Receivers and an idle odd rank add 0: the mean over the pairs' senders. */
        MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double mean = sum / pairs, messages = (double)pairs * p->window * (double)iters;
            row2(size, messages * (double)size / 1e6 / mean, messages / mean);
        }
    }
}

/* The mean of `value` over all ranks, valid on rank 0. */
static double average_over_ranks(double value, int nprocs)
{
    double sum = 0.0;
    MPI_Reduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum / nprocs;
}

static void run_barrier(const struct plan *p, int rank, int nprocs)
{
    long i, iters, warmup;
    double start, mean;
    counts(p, 0, &iters, &warmup);
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    for (i = 0; i < iters + warmup; i++) {
        if (i == warmup)
            start = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
    }
    mean = (MPI_Wtime() - start) / (double)iters;
    mean = average_over_ranks(mean, nprocs);
    if (rank == 0) {
        printf("# OSU-style C/MPI %s Test\n", TEST_TITLES[TEST_BARRIER]);
        printf("# Avg Latency(us)\n");
        printf("%18.3f\n", mean * 1e6);
        fflush(stdout);
    }
}

static void run_collective(const struct plan *p, int rank, int nprocs, char *sbuf, char *rbuf)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    long size, i, iters, warmup;
    if (rank == 0)
        header(TEST_TITLES[p->test], "Avg Latency(us)");
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        int n = (int)size, nf = (int)(size / 4);
        double total = 0.0, start, avg;
        if ((p->test == TEST_REDUCE || p->test == TEST_ALLREDUCE) && size < 4)
            continue;
        counts(p, size, &iters, &warmup);
        MPI_Barrier(comm);
        for (i = 0; i < iters + warmup; i++) {
            int root = (int)(i % nprocs);
            start = MPI_Wtime();
            switch (p->test) {
            case TEST_BCAST:
                MPI_Bcast(sbuf, n, MPI_CHAR, root, comm);
                break;
            case TEST_GATHER:
                MPI_Gather(sbuf, n, MPI_CHAR, rbuf, n, MPI_CHAR, root, comm);
                break;
            case TEST_SCATTER:
                MPI_Scatter(sbuf, n, MPI_CHAR, rbuf, n, MPI_CHAR, root, comm);
                break;
            case TEST_REDUCE:
                MPI_Reduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, root, comm);
                break;
            case TEST_ALLREDUCE:
                MPI_Allreduce(sbuf, rbuf, nf, MPI_FLOAT, MPI_SUM, comm);
                break;
            case TEST_ALLGATHER:
                MPI_Allgather(sbuf, n, MPI_CHAR, rbuf, n, MPI_CHAR, comm);
                break;
            case TEST_ALLTOALL:
                MPI_Alltoall(sbuf, n, MPI_CHAR, rbuf, n, MPI_CHAR, comm);
                break;
            default:
                break;
            }
            if (i >= warmup)
                total += MPI_Wtime() - start;
            MPI_Barrier(comm);
        }
        avg = average_over_ranks(total / (double)iters, nprocs);
        if (rank == 0)
            row(size, avg * 1e6);
    }
}

/* One window per size, as OMB allocates it: `bytes` of MPI_Win_allocate. */
static MPI_Win rma_window(long bytes, char **base)
{
    MPI_Win win;
    if (bytes < 8) /* room for fop/cas's 8-byte integer */
        bytes = 8;
    MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, base, &win);
    memset(*base, 0, (size_t)bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    return win;
}

/* put/get/acc/fop/cas latency: rank 0, shared lock on rank 1, operation + flush. */
static void run_rma_latency(const struct plan *p, int rank, char *sbuf, char *rbuf)
{
    long size, i, iters, warmup;
    if (rank == 0)
        header(TEST_TITLES[p->test], "Latency (us)");
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        char *base;
        MPI_Win win = rma_window(size, &base);
        double start = 0.0, elapsed = 0.0;
        long long one = 1, cmp = 0, old = 0;
        counts(p, size, &iters, &warmup);
        if (rank == 0) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            for (i = 0; i < iters + warmup; i++) {
                if (i == warmup)
                    start = MPI_Wtime();
                switch (p->test) {
                case TEST_PUT_LATENCY:
                    MPI_Put(sbuf, (int)size, MPI_CHAR, 1, 0, (int)size, MPI_CHAR, win);
                    break;
                case TEST_GET_LATENCY:
                    MPI_Get(rbuf, (int)size, MPI_CHAR, 1, 0, (int)size, MPI_CHAR, win);
                    break;
                case TEST_ACC_LATENCY:
                    MPI_Accumulate(sbuf, (int)size, MPI_CHAR, 1, 0, (int)size, MPI_CHAR, MPI_SUM,
                                   win);
                    break;
                case TEST_FOP_LATENCY:
                    MPI_Fetch_and_op(&one, &old, MPI_LONG_LONG, 1, 0, MPI_SUM, win);
                    break;
                default:
                    MPI_Compare_and_swap(&one, &cmp, &old, MPI_LONG_LONG, 1, 0, win);
                    break;
                }
                MPI_Win_flush(1, win);
            }
            elapsed = MPI_Wtime() - start;
            MPI_Win_unlock(1, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            row(size, elapsed * 1e6 / (double)iters);
        MPI_Win_free(&win);
    }
}

/* put_bw / get_bw (rank 0 under a shared lock) and put_bibw (both, post/start). */
static void run_rma_bw(const struct plan *p, int rank, char *sbuf, char *rbuf)
{
    long size, i, iters, warmup;
    int j, peer = 1 - rank;
    MPI_Group world, other;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &peer, &other);
    if (rank == 0)
        header(TEST_TITLES[p->test], "Bandwidth (MB/s)");
    for (size = first_size(p); size <= p->max_size; size = next_size(size)) {
        int w = size > LARGE_MESSAGE_SIZE && p->window > 32 ? 32 : p->window;
        char *base;
        MPI_Win win = rma_window(size * w, &base);
        double start = 0.0, elapsed = 0.0;
        counts(p, size, &iters, &warmup);
        if (p->test == TEST_PUT_BIBW) {
            for (i = 0; i < iters + warmup; i++) {
                if (i == warmup)
                    start = MPI_Wtime();
                MPI_Win_post(other, 0, win);
                MPI_Win_start(other, 0, win);
                for (j = 0; j < w; j++)
                    MPI_Put(sbuf + (size_t)j * size, (int)size, MPI_CHAR, peer,
                            (MPI_Aint)j * size, (int)size, MPI_CHAR, win);
                MPI_Win_complete(win);
                MPI_Win_wait(win);
            }
            elapsed = MPI_Wtime() - start;
        } else if (rank == 0) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            for (i = 0; i < iters + warmup; i++) {
                if (i == warmup)
                    start = MPI_Wtime();
                for (j = 0; j < w; j++) {
                    if (p->test == TEST_PUT_BW)
                        MPI_Put(sbuf + (size_t)j * size, (int)size, MPI_CHAR, 1,
                                (MPI_Aint)j * size, (int)size, MPI_CHAR, win);
                    else
                        MPI_Get(rbuf + (size_t)j * size, (int)size, MPI_CHAR, 1,
                                (MPI_Aint)j * size, (int)size, MPI_CHAR, win);
                }
                MPI_Win_flush(1, win);
            }
            elapsed = MPI_Wtime() - start;
            MPI_Win_unlock(1, win);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            double bytes = (double)size * w * (double)iters;
            if (p->test == TEST_PUT_BIBW)
                bytes *= 2;
            row(size, bytes / 1e6 / elapsed);
        }
        MPI_Win_free(&win);
    }
    MPI_Group_free(&other);
    MPI_Group_free(&world);
}

int main(int argc, char **argv)
{
    struct plan plan;
    int rank, size;
    char *sbuf, *rbuf;
    size_t bytes;

    if (argc > 1 && strcmp(argv[1], "latency_mt") == 0) {
        int provided = MPI_THREAD_SINGLE;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "osu_like: latency_mt needs MPI_THREAD_MULTIPLE\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parse_args(argc, argv, &plan)) {
        if (rank == 0)
            usage(argv[0]);
        MPI_Finalize();
        return 2;
    }
    if ((plan.test == TEST_LATENCY || plan.test == TEST_BW || plan.test == TEST_BIBW ||
         plan.test >= TEST_PUT_LATENCY) &&
        size != 2) {
        if (rank == 0)
            fprintf(stderr, "osu_like: this test requires exactly two processes\n");
        MPI_Finalize();
        return 1;
    }
    if (plan.test == TEST_MBW_MR && size < 2) {
        if (rank == 0)
            fprintf(stderr, "osu_like: this test requires at least two processes\n");
        MPI_Finalize();
        return 1;
    }
    /* Collectives need p blocks at the root / in the all-* buffers. */
    bytes = (plan.max_size > 0 ? (size_t)plan.max_size : 1) * (size_t)size;
    if (plan.test >= TEST_PUT_BW && plan.test <= TEST_PUT_BIBW) /* distinct offsets */
        bytes = (plan.max_size > 0 ? (size_t)plan.max_size : 1) * (size_t)plan.window;
    sbuf = malloc(bytes);
    rbuf = malloc(bytes);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "osu_like: out of memory\n");
        MPI_Finalize();
        return 1;
    }
    memset(sbuf, 'a', bytes);
    memset(rbuf, 'b', bytes);
    if (plan.test == TEST_REDUCE || plan.test == TEST_ALLREDUCE) {
        /* 1.0f everywhere, as phalanx-bench sums. */
        size_t k;
        for (k = 0; k < bytes / sizeof(float); k++)
            ((float *)sbuf)[k] = 1.0f;
    }
    if (plan.test == TEST_LATENCY)
        run_latency(&plan, rank, sbuf, rbuf);
    else if (plan.test == TEST_LATENCY_MT)
        run_latency_mt(&plan, rank);
    else if (plan.test == TEST_BW)
        run_bw(&plan, rank, sbuf, rbuf);
    else if (plan.test == TEST_BIBW)
        run_bibw(&plan, rank, sbuf, rbuf);
    else if (plan.test == TEST_MBW_MR)
        run_mbw_mr(&plan, rank, size, sbuf, rbuf);
    else if (plan.test >= TEST_PUT_BW)
        run_rma_bw(&plan, rank, sbuf, rbuf);
    else if (plan.test >= TEST_PUT_LATENCY)
        run_rma_latency(&plan, rank, sbuf, rbuf);
    else if (plan.test == TEST_BARRIER)
        run_barrier(&plan, rank, size);
    else
        run_collective(&plan, rank, size, sbuf, rbuf);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
