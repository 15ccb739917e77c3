/*
 * osu_like.c: the phalanx project's OSU-style point-to-point benchmarks in C.
 *
 * Same measurements, defaults, options and output format as crates/bench
 * (phalanx-bench), so the two can be compared under the same parser
 * (bench/compare.py). Uses MPI-1 calls only, so it builds against Open MPI's
 * mpicc and against phalanx's C ABI alike.
 *
 *   mpirun -n 2 ./osu_like latency [-m [min:]max] [-i iters] [-x warmup]
 *   mpirun -n 2 ./osu_like bw      [-m [min:]max] [-i iters] [-x warmup] [-W window]
 *
 * latency: ping-pong between ranks 0 and 1; one-way latency in microseconds.
 * bw:      rank 0 posts `window` MPI_Isend, rank 1 `window` MPI_Irecv (all into
 *          the same buffer), both MPI_Waitall, then rank 1 sends a 4-byte ack;
 *          bandwidth in MB/s (10^6 bytes per second).
 * Sizes above LARGE_MESSAGE_SIZE use the smaller "large" iteration counts
 * unless -i / -x are given.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_MESSAGE_SIZE 8192
#define DEFAULT_MAX_SIZE (1L << 22)
#define MAX_WINDOW 1024
#define SYNC_TAG 999
#define DATA_TAG 100
#define ACK_TAG 101

enum test { TEST_LATENCY, TEST_BW };

struct plan {
    enum test test;
    long min_size, max_size;
    long iterations, warmup; /* -1: per-size default */
    long small_iters, small_warmup, large_iters, large_warmup;
    int window;
};

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s latency|bw [-m [min:]max] [-i iterations] [-x warmup] "
            "[-W window]\n",
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
    if (strcmp(argv[1], "latency") == 0) {
        p->test = TEST_LATENCY;
        p->min_size = 0;
        p->small_iters = 10000, p->small_warmup = 100;
        p->large_iters = 1000, p->large_warmup = 10;
    } else if (strcmp(argv[1], "bw") == 0) {
        p->test = TEST_BW;
        p->min_size = 1;
        p->small_iters = 100, p->small_warmup = 10;
        p->large_iters = 20, p->large_warmup = 2;
    } else {
        return -1;
    }
    p->max_size = DEFAULT_MAX_SIZE;
    p->iterations = p->warmup = -1;
    p->window = 64;
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
    printf("%-10ld%18.2f\n", size, value);
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

int main(int argc, char **argv)
{
    struct plan plan;
    int rank, size;
    char *sbuf, *rbuf;
    size_t bytes;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parse_args(argc, argv, &plan)) {
        if (rank == 0)
            usage(argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "osu_like: this test requires exactly two processes\n");
        MPI_Finalize();
        return 1;
    }
    bytes = plan.max_size > 0 ? (size_t)plan.max_size : 1;
    sbuf = malloc(bytes);
    rbuf = malloc(bytes);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "osu_like: out of memory\n");
        MPI_Finalize();
        return 1;
    }
    memset(sbuf, 'a', bytes);
    memset(rbuf, 'b', bytes);
    if (plan.test == TEST_LATENCY)
        run_latency(&plan, rank, sbuf, rbuf);
    else
        run_bw(&plan, rank, sbuf, rbuf);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
