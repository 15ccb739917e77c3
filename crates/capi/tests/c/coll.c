/* Collectives of phalanx's C ABI: every op on every reduction type, MPI_IN_PLACE. */
#include "check.h"
#include <string.h>

static int rank, size;

#define TRI(n) ((n) * ((n) - 1) / 2)

/* Reduce/Allreduce of T (values rank+1+i) with SUM/PROD/MIN/MAX, checked on root 0. */
#define TEST_REDUCE(T, DT)                                                          \
    do {                                                                            \
        T send[3], recv[3], inplace[3];                                             \
        MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};                      \
        for (int o = 0; o < 4; o++) {                                               \
            for (int i = 0; i < 3; i++) {                                           \
                send[i] = (T)(rank + 1 + i);                                        \
                inplace[i] = send[i];                                               \
            }                                                                       \
            T want[3];                                                              \
            for (int i = 0; i < 3; i++) {                                           \
                T acc = (T)(1 + i);                                                 \
                for (int r = 1; r < size; r++) {                                    \
                    T x = (T)(r + 1 + i);                                           \
                    if (o == 0) acc = (T)(acc + x);                                 \
                    if (o == 1) acc = (T)(acc * x);                                 \
                    if (o == 2) acc = x < acc ? x : acc;                            \
                    if (o == 3) acc = x > acc ? x : acc;                            \
                }                                                                   \
                want[i] = acc;                                                      \
            }                                                                       \
            OK(MPI_Allreduce(send, recv, 3, DT, ops[o], MPI_COMM_WORLD));           \
            for (int i = 0; i < 3; i++) CHECK(recv[i] == want[i]);                  \
            OK(MPI_Allreduce(MPI_IN_PLACE, inplace, 3, DT, ops[o], MPI_COMM_WORLD)); \
            for (int i = 0; i < 3; i++) CHECK(inplace[i] == want[i]);               \
            memset(recv, 0, sizeof recv);                                           \
            OK(MPI_Reduce(send, recv, 3, DT, ops[o], size - 1, MPI_COMM_WORLD));     \
            if (rank == size - 1)                                                   \
                for (int i = 0; i < 3; i++) CHECK(recv[i] == want[i]);             \
            memcpy(inplace, send, sizeof send);                                     \
            OK(MPI_Reduce(rank == 0 ? MPI_IN_PLACE : (void *)inplace, inplace, 3, DT, \
                          ops[o], 0, MPI_COMM_WORLD));                              \
            if (rank == 0)                                                          \
                for (int i = 0; i < 3; i++) CHECK(inplace[i] == want[i]);          \
        }                                                                           \
    } while (0)

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Bcast from every root. */
    for (int root = 0; root < size; root++) {
        long b[5];
        for (int i = 0; i < 5; i++) b[i] = rank == root ? root * 100 + i : -1;
        OK(MPI_Bcast(b, 5, MPI_LONG, root, MPI_COMM_WORLD));
        for (int i = 0; i < 5; i++) CHECK(b[i] == root * 100 + i);
    }

    TEST_REDUCE(int, MPI_INT);
    TEST_REDUCE(long, MPI_LONG);
    TEST_REDUCE(float, MPI_FLOAT);
    TEST_REDUCE(double, MPI_DOUBLE);
    TEST_REDUCE(signed char, MPI_CHAR);
    TEST_REDUCE(unsigned char, MPI_BYTE);

    /* Gather / Scatter with every root, plus MPI_IN_PLACE at the root. */
    int *all = malloc(sizeof(int) * 2 * size);
    for (int root = 0; root < size; root++) {
        int mine[2] = {rank, rank * 2};
        memset(all, 0xff, sizeof(int) * 2 * size);
        OK(MPI_Gather(mine, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++) CHECK(all[2 * r] == r && all[2 * r + 1] == 2 * r);
        if (rank == root) {
            memset(all, 0, sizeof(int) * 2 * size);
            all[2 * root] = root;
            all[2 * root + 1] = 2 * root;
        }
        OK(MPI_Gather(rank == root ? MPI_IN_PLACE : (void *)mine, 2, MPI_INT, all, 2, MPI_INT,
                      root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++) CHECK(all[2 * r] == r && all[2 * r + 1] == 2 * r);

        if (rank == root)
            for (int i = 0; i < 2 * size; i++) all[i] = 1000 + i;
        int got[2] = {0, 0};
        OK(MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(got[0] == 1000 + 2 * rank && got[1] == 1001 + 2 * rank);
        OK(MPI_Scatter(all, 2, MPI_INT, rank == root ? MPI_IN_PLACE : (void *)got, 2, MPI_INT,
                       root, MPI_COMM_WORLD));
        CHECK(got[0] == 1000 + 2 * rank);
    }

    /* Allgather, in place too. */
    double *d = malloc(sizeof(double) * size);
    double me = rank + 0.5;
    OK(MPI_Allgather(&me, 1, MPI_DOUBLE, d, 1, MPI_DOUBLE, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++) CHECK(d[r] == r + 0.5);
    for (int r = 0; r < size; r++) d[r] = r == rank ? rank + 0.25 : -1.0;
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d, 1, MPI_DOUBLE, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++) CHECK(d[r] == r + 0.25);

    /* Alltoall: block j of rank i is i*100+j; in place too. */
    int *sa = malloc(sizeof(int) * size), *ra = malloc(sizeof(int) * size);
    for (int j = 0; j < size; j++) sa[j] = rank * 100 + j;
    OK(MPI_Alltoall(sa, 1, MPI_INT, ra, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) CHECK(ra[i] == i * 100 + rank);
    OK(MPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, sa, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) CHECK(sa[i] == i * 100 + rank);

    /* Collectives on a duplicate communicator. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int one = 1, n = 0;
    OK(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, dup));
    CHECK(n == size);
    OK(MPI_Barrier(dup));
    OK(MPI_Comm_free(&dup));
    CHECK(TRI(size) >= 0);

    free(all);
    free(d);
    free(sa);
    free(ra);
    OK(MPI_Finalize());
    if (rank == 0) printf("coll ok\n");
    return 0;
}
