/* Derived datatypes in every collective, the reductions the core does not do itself
 * (MINLOC/MAXLOC, user operations in scans, predefined operations on derived types),
 * MPI_Reduce_local, MPI_Op_commutative, MPI_Reduce_scatter, and their error paths. */
#include "check.h"
#include <string.h>

#define N 3 /* ints per block */

/* A vector picking every other int: N elements of a block of 2N ints. */
static MPI_Datatype every_other(void) {
    MPI_Datatype t;
    OK(MPI_Type_vector(N, 1, 2, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    return t;
}

static void fill(int *b, int n, int base) {
    for (int i = 0; i < n; i++) b[i] = -1;
    for (int i = 0; i < n / 2; i++) b[2 * i] = base + i;
}

static void data_movement(int rank, int size) {
    MPI_Datatype v = every_other(), rv;
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(v, &lb, &ext));
    /* v's extent is 2N-1 ints; resize it to 2N so consecutive elements interleave. */
    OK(MPI_Type_create_resized(v, 0, 2 * N * sizeof(int), &rv));
    OK(MPI_Type_commit(&rv));
    int send[2 * N * 64], recv[2 * N * 64], plain[N * 64];
    int root = size - 1;

    /* Gather: vector send, contiguous receive at the root. */
    fill(send, 2 * N, rank * 100);
    memset(plain, 0, sizeof plain);
    OK(MPI_Gather(send, 1, v, plain, N, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < N; i++) CHECK(plain[r * N + i] == r * 100 + i);

    /* Gather into a resized vector at the root (contiguous send). */
    for (int i = 0; i < N; i++) plain[i] = rank * 100 + i;
    for (int i = 0; i < 2 * N * size; i++) recv[i] = -7;
    OK(MPI_Gather(plain, N, MPI_INT, recv, 1, rv, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < N; i++) {
                CHECK(recv[r * 2 * N + 2 * i] == r * 100 + i);
                CHECK(recv[r * 2 * N + 2 * i + 1] == -7);
            }

    /* Scatter: resized vectors at the root, vector receive. */
    for (int r = 0; r < size; r++) fill(send + r * 2 * N, 2 * N, r * 10);
    for (int i = 0; i < 2 * N; i++) recv[i] = -3;
    OK(MPI_Scatter(send, 1, rv, recv, 1, v, root, MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) CHECK(recv[2 * i] == rank * 10 + i && recv[2 * i + 1] == -3);

    /* Allgather and Alltoall with resized vectors on both sides. */
    fill(send, 2 * N, rank);
    OK(MPI_Allgather(send, 1, v, recv, 1, rv, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++) CHECK(recv[r * 2 * N + 2 * i] == r + i);
    for (int r = 0; r < size; r++) fill(send + r * 2 * N, 2 * N, rank * 1000 + r * 10);
    OK(MPI_Alltoall(send, 1, rv, recv, N, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++) CHECK(recv[r * N + i] == r * 1000 + rank * 10 + i);
    /* In place. */
    for (int r = 0; r < size; r++) fill(recv + r * 2 * N, 2 * N, rank * 1000 + r * 10);
    OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, 1, rv, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++) CHECK(recv[r * 2 * N + 2 * i] == r * 1000 + rank * 10 + i);

    /* Varying counts: rank r contributes r+1 elements of rv. */
    int counts[64], displs[64], tot = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r + 1;
        displs[r] = tot;
        tot += r + 1;
    }
    for (int k = 0; k <= rank; k++) fill(send + k * 2 * N, 2 * N, rank * 100 + k * 10);
    for (int i = 0; i < 2 * N * tot; i++) recv[i] = -1;
    OK(MPI_Allgatherv(send, rank + 1, rv, recv, counts, displs, rv, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int k = 0; k <= r; k++)
            for (int i = 0; i < N; i++)
                CHECK(recv[(displs[r] + k) * 2 * N + 2 * i] == r * 100 + k * 10 + i);
    for (int i = 0; i < 2 * N * tot; i++) recv[i] = -1;
    OK(MPI_Gatherv(send, rank + 1, rv, recv, counts, displs, rv, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < N; i++) CHECK(recv[displs[r] * 2 * N + 2 * i] == r * 100 + i);
    /* Scatterv from rank 0 of what it gathered. */
    int mine[2 * N * 64];
    OK(MPI_Scatterv(recv, counts, displs, rv, mine, rank + 1, rv, 0, MPI_COMM_WORLD));
    for (int k = 0; k <= rank; k++)
        for (int i = 0; i < N; i++) CHECK(mine[k * 2 * N + 2 * i] == rank * 100 + k * 10 + i);
    /* Alltoallv: one rv to every rank, received as N ints. */
    int sc[64], sd[64], rc[64], rd[64];
    for (int r = 0; r < size; r++) {
        sc[r] = 1;
        sd[r] = r;
        rc[r] = N;
        rd[r] = r * N;
        fill(send + r * 2 * N, 2 * N, rank * 100 + r);
    }
    OK(MPI_Alltoallv(send, sc, sd, rv, plain, rc, rd, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++) CHECK(plain[r * N + i] == r * 100 + rank + i);

    /* Sendrecv_replace with a vector, around a ring. */
    fill(send, 2 * N, rank);
    MPI_Status st;
    OK(MPI_Sendrecv_replace(send, 1, v, (rank + 1) % size, 4, (rank + size - 1) % size, 4,
                            MPI_COMM_WORLD, &st));
    int from = (rank + size - 1) % size, cnt;
    for (int i = 0; i < N; i++) CHECK(send[2 * i] == from + i && send[2 * i + 1] == -1);
    OK(MPI_Get_count(&st, v, &cnt));
    CHECK(cnt == 1 && st.MPI_SOURCE == from);
    OK(MPI_Type_free(&rv));
    OK(MPI_Type_free(&v));
}

static void reductions(int rank, int size) {
    MPI_Datatype v = every_other(), c;
    int send[2 * N], recv[2 * N];
    OK(MPI_Type_contiguous(N, MPI_INT, &c));
    OK(MPI_Type_commit(&c));

    /* Predefined operations on derived types of one basic type. */
    fill(send, 2 * N, rank);
    for (int i = 0; i < 2 * N; i++) recv[i] = -5;
    OK(MPI_Allreduce(send, recv, 1, v, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) CHECK(recv[2 * i] == size * (size - 1) / 2 + size * i && recv[2 * i + 1] == -5);
    OK(MPI_Reduce(send, recv, 1, v, MPI_MAX, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int i = 0; i < N; i++) CHECK(recv[2 * i] == size - 1 + i);
    OK(MPI_Scan(send, recv, 1, v, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) CHECK(recv[2 * i] == rank * (rank + 1) / 2 + (rank + 1) * i);
    OK(MPI_Exscan(send, recv, 1, v, MPI_SUM, MPI_COMM_WORLD));
    if (rank > 0)
        for (int i = 0; i < N; i++) CHECK(recv[2 * i] == rank * (rank - 1) / 2 + rank * i);
    int big[N * 64], out[N];
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++) big[r * N + i] = rank + r + i;
    OK(MPI_Reduce_scatter_block(big, out, 1, c, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) CHECK(out[i] == size * (size - 1) / 2 + size * (rank + i));
    int counts[64];
    for (int r = 0; r < size; r++) counts[r] = N;
    OK(MPI_Reduce_scatter(big, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < N; i++) CHECK(out[i] == size * (size - 1) / 2 + size * (rank + i));

    /* Logical and bitwise operations (the core), MINLOC/MAXLOC (here). */
    int bits = 1 << rank, any;
    OK(MPI_Allreduce(&bits, &any, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD));
    CHECK(any == (1 << size) - 1);
    int t = rank > 0, all;
    OK(MPI_Allreduce(&t, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    CHECK(all == 0);
    struct { double v; int i; } p = {(double)(rank % 2), rank}, q;
    OK(MPI_Allreduce(&p, &q, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
    CHECK(q.v == 0.0 && q.i == 0);
    OK(MPI_Allreduce(&p, &q, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    CHECK(q.v == (size > 1 ? 1.0 : 0.0) && q.i == (size > 1 ? 1 : 0));

    /* Reduce_local and Op_commutative. */
    int a[2] = {1, 2}, b[2] = {10, 20}, com;
    OK(MPI_Reduce_local(a, b, 2, MPI_INT, MPI_SUM));
    CHECK(b[0] == 11 && b[1] == 22);
    OK(MPI_Reduce_local(a, b, 1, MPI_INT, MPI_PROD));
    CHECK(b[0] == 11);
    OK(MPI_Op_commutative(MPI_SUM, &com));
    CHECK(com == 1);

    /* Errors: returned on every rank before any communication. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Allreduce(a, b, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD) == MPI_ERR_OP);
    CHECK(MPI_Reduce(a, b, 1, MPI_FLOAT, MPI_BXOR, 0, MPI_COMM_WORLD) == MPI_ERR_OP);
    MPI_Datatype mixed;
    int bl[2] = {1, 1};
    MPI_Aint dsp[2] = {0, 8};
    MPI_Datatype ts[2] = {MPI_INT, MPI_DOUBLE};
    OK(MPI_Type_create_struct(2, bl, dsp, ts, &mixed));
    OK(MPI_Type_commit(&mixed));
    double m[4];
    CHECK(MPI_Allreduce(m, m + 2, 1, mixed, MPI_SUM, MPI_COMM_WORLD) == MPI_ERR_TYPE);
    CHECK(MPI_Reduce_local(a, b, 1, MPI_INT, (MPI_Op)0x777) == MPI_ERR_OP);
    CHECK(MPI_Op_commutative(MPI_OP_NULL, &com) == MPI_ERR_OP);
    CHECK(MPI_Reduce_scatter(big, out, NULL, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_ERR_BUFFER);
    MPI_Datatype unc;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &unc)); /* not committed: an error everywhere */
    CHECK(MPI_Gather(send, 1, unc, recv, 2, MPI_INT, 0, MPI_COMM_WORLD) == MPI_ERR_TYPE);
    CHECK(MPI_Alltoall(send, 1, unc, recv, 2, MPI_INT, MPI_COMM_WORLD) == MPI_ERR_TYPE);
    OK(MPI_Type_free(&unc));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Type_free(&mixed));
    OK(MPI_Type_free(&c));
    OK(MPI_Type_free(&v));
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    data_movement(rank, size);
    reductions(rank, size);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("dtcoll ok\n");
    OK(MPI_Finalize());
    return 0;
}
