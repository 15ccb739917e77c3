/* MPI_Type_create_subarray and MPI_Type_create_darray end to end: subarrays sent and
 * received between ranks (a halo exchange of columns, a block large enough for the
 * rendezvous path, count 2); darrays with block, cyclic, cyclic(k) and none
 * distributions, C and Fortran order, checked against an independent model of MPI-4.1
 * §5.1.4 (process grid row-major; each dimension's owned indices; the type map is the
 * owned elements in storage order; lb 0, extent the whole array) by sending the global
 * array through every rank's darray and receiving it into zeroed arrays. Needs 4 ranks
 * (2x2 and 1x4 process grids); on fewer it checks what fits. */
#include "check.h"
#include <string.h>

/* Whether index i of a dimension of g elements is owned by process p of P. */
static int owns(int distrib, int darg, int g, int p, int P, int i) {
    switch (distrib) {
    case MPI_DISTRIBUTE_NONE:
        return 1;
    case MPI_DISTRIBUTE_BLOCK: {
        int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + P - 1) / P : darg;
        return i / b == p;
    }
    default: {
        int k = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
        return (i / k) % P == p;
    }
    }
}

/* The global linear indices rank r owns in 2D, in storage order; returns how many. */
static int model(int r, const int g[2], const int dist[2], const int darg[2], const int ps[2],
                 int order, int *idx) {
    int c[2] = {r / ps[1], r % ps[1]}, n = 0; /* row-major process grid */
    if (order == MPI_ORDER_C) {
        for (int i = 0; i < g[0]; i++)
            for (int j = 0; j < g[1]; j++)
                if (owns(dist[0], darg[0], g[0], c[0], ps[0], i) &&
                    owns(dist[1], darg[1], g[1], c[1], ps[1], j))
                    idx[n++] = i * g[1] + j;
    } else {
        for (int j = 0; j < g[1]; j++)
            for (int i = 0; i < g[0]; i++)
                if (owns(dist[0], darg[0], g[0], c[0], ps[0], i) &&
                    owns(dist[1], darg[1], g[1], c[1], ps[1], j))
                    idx[n++] = j * g[0] + i;
    }
    return n;
}

#define G0 7
#define G1 9

static int global[G0 * G1], got[G0 * G1], idx[G0 * G1];

static void darray_case(int rank, int size, const int dist[2], const int darg[2],
                        const int ps[2], int order) {
    int g[2] = {G0, G1};
    if (ps[0] * ps[1] != size) return;
    for (int k = 0; k < G0 * G1; k++) global[k] = 1000 + k;
    /* Every rank checks its own type against the model: size, bounds, and the data a
     * send of the global array through it carries, in order. */
    MPI_Datatype t;
    OK(MPI_Type_create_darray(size, rank, 2, g, dist, darg, ps, order, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    int n = model(rank, g, dist, darg, ps, order, idx), sz;
    MPI_Aint lb, ext;
    OK(MPI_Type_size(t, &sz));
    CHECK(sz == n * (int)sizeof(int));
    OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof global);
    memset(got, 0, sizeof got);
    OK(MPI_Sendrecv(global, 1, t, rank, 5, got, n, MPI_INT, rank, 5, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    for (int k = 0; k < n; k++) CHECK(got[k] == 1000 + idx[k]);
    /* Rank 0 scatters the global array: to rank r through r's darray (built here with
     * rank = r), received by r through its own into a zeroed array. */
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            MPI_Datatype tr;
            OK(MPI_Type_create_darray(size, r, 2, g, dist, darg, ps, order, MPI_INT, &tr));
            OK(MPI_Type_commit(&tr));
            MPI_Request q;
            OK(MPI_Isend(global, 1, tr, r, 6, MPI_COMM_WORLD, &q));
            OK(MPI_Type_free(&tr)); /* the send goes on */
            if (r == 0) {
                memset(got, 0, sizeof got);
                OK(MPI_Recv(got, 1, t, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            }
            OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        }
    } else {
        memset(got, 0, sizeof got);
        OK(MPI_Recv(got, 1, t, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    int k = 0;
    for (int l = 0; l < G0 * G1; l++) {
        int mine = k < n && idx[k] == l;
        /* idx is in storage order = increasing linear index */
        CHECK(got[l] == (mine ? 1000 + l : 0));
        k += mine;
    }
    CHECK(k == n);
    /* Every element is owned by exactly one rank. */
    int total;
    OK(MPI_Allreduce(&n, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(total == G0 * G1);
    OK(MPI_Type_free(&t));
}

static void darrays(int rank, int size) {
    const int B = MPI_DISTRIBUTE_BLOCK, C = MPI_DISTRIBUTE_CYCLIC, N = MPI_DISTRIBUTE_NONE,
              D = MPI_DISTRIBUTE_DFLT_DARG;
    int grid22[2] = {2, 2}, grid14[2] = {1, 4}, grid41[2] = {4, 1}, grid11[2] = {1, 1};
    int grid12[2] = {1, 2}, grid21[2] = {2, 1};
    const int *grids[] = {grid22, grid14, grid41, grid11, grid12, grid21};
    struct {
        int dist[2], darg[2];
    } cases[] = {
        {{B, B}, {D, D}}, /* block */
        {{C, C}, {D, D}}, /* cyclic */
        {{C, C}, {2, 3}}, /* cyclic(k) */
        {{B, C}, {4, 2}}, /* block(darg), cyclic(2) */
        {{C, B}, {D, 5}},
    };
    int orders[2] = {MPI_ORDER_C, MPI_ORDER_FORTRAN};
    for (int o = 0; o < 2; o++) {
        for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int gr = 0; gr < 6; gr++) {
                /* block(darg) needs darg × psize >= gsize */
                if (cases[c].dist[0] == B && cases[c].darg[0] != D &&
                    cases[c].darg[0] * grids[gr][0] < G0)
                    continue;
                if (cases[c].dist[1] == B && cases[c].darg[1] != D &&
                    cases[c].darg[1] * grids[gr][1] < G1)
                    continue;
                darray_case(rank, size, cases[c].dist, cases[c].darg, grids[gr], orders[o]);
            }
        /* none: the whole dimension, on a grid of 1 there */
        int nb[2] = {N, B}, bn[2] = {B, N}, dd[2] = {D, D};
        darray_case(rank, size, nb, dd, grid14, orders[o]);
        darray_case(rank, size, bn, dd, grid41, orders[o]);
        darray_case(rank, size, nb, dd, grid12, orders[o]);
        darray_case(rank, size, bn, dd, grid11, orders[o]);
    }
    /* A 3D darray (cyclic(2) x none x block) against the size and bounds it must have. */
    int g3[3] = {6, 3, 5}, d3[3] = {C, N, B}, a3[3] = {2, D, D}, p3[3] = {size, 1, 1};
    MPI_Datatype t3;
    OK(MPI_Type_create_darray(size, rank, 3, g3, d3, a3, p3, MPI_ORDER_C, MPI_DOUBLE, &t3));
    int sz3, rows = 0;
    for (int i = 0; i < 6; i++) rows += (i / 2) % size == rank;
    OK(MPI_Type_size(t3, &sz3));
    CHECK(sz3 == rows * 3 * 5 * (int)sizeof(double));
    OK(MPI_Type_free(&t3));

    /* Errors. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int g[2] = {G0, G1}, bb[2] = {B, B}, small[2] = {1, 1}, dd[2] = {D, D}, one[2] = {1, size};
    int nn[2] = {N, N}, bad_d[2] = {99, B};
    MPI_Datatype bad = MPI_DATATYPE_NULL;
    int cls;
    /* block(1) on 1 x size processes cannot cover 9 elements */
    int e = MPI_Type_create_darray(size, rank, 2, g, bb, small, one, MPI_ORDER_C, MPI_INT, &bad);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_ARG && bad == MPI_DATATYPE_NULL);
    if (size > 1) {
        /* none needs a grid of 1 in that dimension */
        int ps[2] = {1, size};
        e = MPI_Type_create_darray(size, rank, 2, g, nn, dd, ps, MPI_ORDER_C, MPI_INT, &bad);
        OK(MPI_Error_class(e, &cls));
        CHECK(cls == MPI_ERR_ARG);
    }
    int wrong[2] = {size + 1, 1};
    e = MPI_Type_create_darray(size, rank, 2, g, bb, dd, wrong, MPI_ORDER_C, MPI_INT, &bad);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_ARG);
    e = MPI_Type_create_darray(size, size, 2, g, bb, dd, one, MPI_ORDER_C, MPI_INT, &bad);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_ARG);
    e = MPI_Type_create_darray(size, rank, 2, g, bad_d, dd, one, MPI_ORDER_C, MPI_INT, &bad);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_ARG);
    e = MPI_Type_create_darray(size, rank, 2, g, bb, dd, one, 3, MPI_INT, &bad);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_ARG);
    e = MPI_Type_create_darray(size, rank, 0, g, bb, dd, one, MPI_ORDER_C, MPI_INT, &bad);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_DIMS);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

#define N0 300
#define N1 260
static double big[N0][N1], land[N0][N1];

/* Subarrays between ranks: columns of a halo exchange, a block over the rendezvous size,
 * and count 2 (the second subarray one whole array further). */
static void subarrays(int rank, int size) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < N0; i++)
        for (int j = 0; j < N1; j++) big[i][j] = rank * 1e6 + i * 1000 + j;
    memset(land, 0, sizeof land);
    int sizes[2] = {N0, N1}, col[2] = {N0 - 2, 1};
    int last_in[2] = {1, N1 - 2}, halo_l[2] = {1, 0};
    MPI_Datatype send_col, recv_col;
    OK(MPI_Type_create_subarray(2, sizes, col, last_in, MPI_ORDER_C, MPI_DOUBLE, &send_col));
    OK(MPI_Type_create_subarray(2, sizes, col, halo_l, MPI_ORDER_C, MPI_DOUBLE, &recv_col));
    OK(MPI_Type_commit(&send_col));
    OK(MPI_Type_commit(&recv_col));
    /* last inner column to the right, into the left halo column */
    MPI_Request q;
    OK(MPI_Irecv(land, 1, recv_col, left, 1, MPI_COMM_WORLD, &q));
    OK(MPI_Send(big, 1, send_col, right, 1, MPI_COMM_WORLD));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (int i = 0; i < N0; i++)
        for (int j = 0; j < N1; j++) {
            int in = j == 0 && i >= 1 && i < N0 - 1;
            CHECK(land[i][j] == (in ? left * 1e6 + i * 1000 + (N1 - 2) : 0));
        }
    /* A 200 x 200 block (320 KB): blocking Send to the right, Recv from the left. */
    int blk[2] = {200, 200}, at[2] = {50, 30}, at2[2] = {7, 11};
    MPI_Datatype sb, rb;
    OK(MPI_Type_create_subarray(2, sizes, blk, at, MPI_ORDER_C, MPI_DOUBLE, &sb));
    OK(MPI_Type_create_subarray(2, sizes, blk, at2, MPI_ORDER_C,
                                MPI_DOUBLE, &rb));
    OK(MPI_Type_commit(&sb));
    OK(MPI_Type_commit(&rb));
    memset(land, 0, sizeof land);
    if (size == 1) {
        OK(MPI_Sendrecv(big, 1, sb, 0, 2, land, 1, rb, 0, 2, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    } else if (rank % 2 == 0) {
        OK(MPI_Send(big, 1, sb, right, 2, MPI_COMM_WORLD));
        OK(MPI_Recv(land, 1, rb, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Recv(land, 1, rb, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Send(big, 1, sb, right, 2, MPI_COMM_WORLD));
    }
    for (int i = 0; i < N0; i++)
        for (int j = 0; j < N1; j++) {
            int in = i >= 7 && i < 207 && j >= 11 && j < 211;
            double want = in ? left * 1e6 + (i - 7 + 50) * 1000 + (j - 11 + 30) : 0;
            CHECK(land[i][j] == want);
        }
    /* count 2: the same small subarray of two consecutive 4x5 arrays. */
    int a[2][4][5], b[2][4][5];
    memset(b, 0, sizeof b);
    for (int k = 0; k < 40; k++) (&a[0][0][0])[k] = rank * 100 + k;
    int s45[2] = {4, 5}, sub[2] = {2, 3}, st[2] = {1, 2};
    MPI_Datatype t45;
    OK(MPI_Type_create_subarray(2, s45, sub, st, MPI_ORDER_C, MPI_INT, &t45));
    OK(MPI_Type_commit(&t45));
    OK(MPI_Sendrecv(a, 2, t45, right, 3, b, 2, t45, left, 3, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++) {
                int in = i >= 1 && i < 3 && j >= 2;
                CHECK(b[m][i][j] == (in ? left * 100 + m * 20 + i * 5 + j : 0));
            }
    OK(MPI_Type_free(&send_col));
    OK(MPI_Type_free(&recv_col));
    OK(MPI_Type_free(&sb));
    OK(MPI_Type_free(&rb));
    OK(MPI_Type_free(&t45));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    int rank, size;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    subarrays(rank, size);
    darrays(rank, size);
    OK(MPI_Finalize());
    if (rank == 0) printf("darray ok\n");
    return 0;
}
