/* The third slice: MPI_Ibarrier, derived datatypes and user reduction operations, with
 * their error paths under MPI_ERRORS_RETURN. */
#include "check.h"
#include <string.h>

struct item {
    int a;
    double b;
    char c;
};

static void ibarrier(void) {
    MPI_Request r;
    int flag = 0;
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL);
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    while (!flag) OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL);
    MPI_Request rs[2];
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &rs[1]));
    OK(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
}

static MPI_Datatype item_type(void) {
    static struct item it[2];
    MPI_Aint base, d[3];
    OK(MPI_Get_address(&it[0], &base));
    OK(MPI_Get_address(&it[0].a, &d[0]));
    OK(MPI_Get_address(&it[0].b, &d[1]));
    OK(MPI_Get_address(&it[0].c, &d[2]));
    MPI_Aint next;
    OK(MPI_Get_address(&it[1], &next));
    CHECK(next - base == (MPI_Aint)sizeof(struct item));
    for (int i = 0; i < 3; i++) d[i] -= base;
    int bl[3] = {1, 1, 1};
    MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Datatype t;
    OK(MPI_Type_create_struct(3, bl, d, ts, &t));
    OK(MPI_Type_commit(&t));
    return t;
}

static void layouts(void) {
    MPI_Datatype c3, vec, idx, st;
    MPI_Aint lb, ext;
    int sz;
    OK(MPI_Type_contiguous(3, MPI_INT, &c3));
    OK(MPI_Type_size(c3, &sz));
    CHECK(sz == 12);
    OK(MPI_Type_get_extent(c3, &lb, &ext));
    CHECK(lb == 0 && ext == 12);
    OK(MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &vec));
    OK(MPI_Type_size(vec, &sz));
    CHECK(sz == 48);
    OK(MPI_Type_get_extent(vec, &lb, &ext));
    CHECK(lb == 0 && ext == 80);
    int bl[2] = {1, 2}, ds[2] = {3, 0};
    OK(MPI_Type_indexed(2, bl, ds, MPI_INT, &idx));
    OK(MPI_Type_size(idx, &sz));
    CHECK(sz == 12);
    OK(MPI_Type_get_extent(idx, &lb, &ext));
    CHECK(lb == 0 && ext == 16);
    st = item_type();
    OK(MPI_Type_size(st, &sz));
    CHECK(sz == 13);
    OK(MPI_Type_get_extent(st, &lb, &ext));
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof(struct item));
    MPI_Datatype two;
    OK(MPI_Type_contiguous(2, st, &two));
    OK(MPI_Type_size(two, &sz));
    CHECK(sz == 26);
    OK(MPI_Type_get_extent(two, &lb, &ext));
    CHECK(lb == 0 && ext == 2 * (MPI_Aint)sizeof(struct item));
    OK(MPI_Type_free(&two));
    OK(MPI_Type_get_extent(MPI_DOUBLE, &lb, &ext));
    CHECK(lb == 0 && ext == 8);

    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Type_get_name(MPI_INT, name, &len));
    CHECK(strcmp(name, "MPI_INT") == 0 && len == 7);
    OK(MPI_Type_get_name(MPI_DOUBLE, name, &len));
    CHECK(strcmp(name, "MPI_DOUBLE") == 0);
    OK(MPI_Type_get_name(vec, name, &len));
    CHECK(len == 0 && name[0] == 0);
    OK(MPI_Type_set_name(vec, "column"));
    OK(MPI_Type_get_name(vec, name, &len));
    CHECK(strcmp(name, "column") == 0 && len == 6);

    OK(MPI_Type_free(&c3));
    CHECK(c3 == MPI_DATATYPE_NULL);
    OK(MPI_Type_free(&vec));
    OK(MPI_Type_free(&idx));
    OK(MPI_Type_free(&st));
}

static void transfers(int rank, int size) {
    MPI_Datatype vec, idx, st;
    OK(MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &vec));
    OK(MPI_Type_commit(&vec));
    int bl[2] = {1, 2}, ds[2] = {3, 0};
    OK(MPI_Type_indexed(2, bl, ds, MPI_INT, &idx));
    OK(MPI_Type_commit(&idx));
    st = item_type();
    double m[10], flat[6];
    for (int i = 0; i < 10; i++) m[i] = rank * 100 + i;
    MPI_Status s;
    int n;
    if (size >= 2 && rank < 2) {
        int peer = 1 - rank;
        if (rank == 0) {
            /* Vector out, contiguous in (and back). */
            OK(MPI_Send(m, 1, vec, peer, 1, MPI_COMM_WORLD));
            double back[10];
            for (int i = 0; i < 10; i++) back[i] = -1;
            MPI_Request r;
            OK(MPI_Irecv(back, 1, vec, peer, 2, MPI_COMM_WORLD, &r));
            OK(MPI_Wait(&r, &s));
            OK(MPI_Get_count(&s, vec, &n));
            CHECK(n == 1);
            const int at[6] = {0, 1, 4, 5, 8, 9};
            for (int i = 0; i < 6; i++) CHECK(back[at[i]] == 1000 + i);
            CHECK(back[2] == -1 && back[3] == -1 && back[6] == -1 && back[7] == -1);
            /* Indexed: Isend + Test loop on the receiver side. */
            int iv[4] = {10, 11, 12, 13};
            OK(MPI_Isend(iv, 1, idx, peer, 3, MPI_COMM_WORLD, &r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            /* Structs. */
            struct item its[2] = {{1, 1.5, 'x'}, {2, 2.5, 'y'}};
            OK(MPI_Send(its, 2, st, peer, 4, MPI_COMM_WORLD));
            /* A freed derived-datatype send still completes (its staging lives on). */
            OK(MPI_Isend(m, 1, vec, peer, 6, MPI_COMM_WORLD, &r));
            OK(MPI_Request_free(&r));
            CHECK(r == MPI_REQUEST_NULL);
        } else {
            OK(MPI_Recv(flat, 6, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, &s));
            const int at[6] = {0, 1, 4, 5, 8, 9};
            for (int i = 0; i < 6; i++) CHECK(flat[i] == at[i]);
            for (int i = 0; i < 6; i++) flat[i] = 1000 + i;
            OK(MPI_Send(flat, 6, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD));
            int iv[4] = {-1, -1, -1, -1}, flag = 0;
            MPI_Request r;
            OK(MPI_Irecv(iv, 1, idx, peer, 3, MPI_COMM_WORLD, &r));
            while (!flag) OK(MPI_Test(&r, &flag, &s));
            /* Type map order: element 3 first, then elements 0 and 1. */
            CHECK(iv[3] == 13 && iv[0] == 10 && iv[1] == 11 && iv[2] == -1);
            struct item its[3];
            memset(its, 0, sizeof its);
            OK(MPI_Recv(its, 3, st, peer, 4, MPI_COMM_WORLD, &s));
            OK(MPI_Get_count(&s, st, &n));
            CHECK(n == 2);
            CHECK(its[0].a == 1 && its[0].b == 1.5 && its[0].c == 'x');
            CHECK(its[1].a == 2 && its[1].b == 2.5 && its[1].c == 'y');
            CHECK(its[2].a == 0);
            /* Waitany completes (and unpacks) a derived-datatype receive. */
            double w[10];
            for (int i = 0; i < 10; i++) w[i] = -1;
            MPI_Request rs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            int which = -1;
            OK(MPI_Irecv(w, 1, vec, peer, 6, MPI_COMM_WORLD, &rs[1]));
            OK(MPI_Waitany(2, rs, &which, &s));
            CHECK(which == 1 && rs[1] == MPI_REQUEST_NULL);
            for (int i = 0; i < 10; i++) CHECK(w[i] == ((i % 4) < 2 ? i : -1));
        }
    }
    /* Sendrecv around a ring: vector out, vector in. */
    double in[10];
    for (int i = 0; i < 10; i++) in[i] = -1;
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    OK(MPI_Sendrecv(m, 1, vec, to, 5, in, 1, vec, from, 5, MPI_COMM_WORLD, &s));
    for (int i = 0; i < 10; i++) CHECK(in[i] == ((i % 4) < 2 ? from * 100 + i : -1));
    /* Bcast of structs from the last rank. */
    struct item b[2];
    memset(b, 0, sizeof b);
    if (rank == size - 1) {
        b[0] = (struct item){7, 7.5, 'a'};
        b[1] = (struct item){8, 8.5, 'b'};
    }
    OK(MPI_Bcast(b, 2, st, size - 1, MPI_COMM_WORLD));
    CHECK(b[0].a == 7 && b[0].b == 7.5 && b[0].c == 'a');
    CHECK(b[1].a == 8 && b[1].b == 8.5 && b[1].c == 'b');
    /* A vector Bcast leaves the gaps alone. */
    for (int i = 0; i < 10; i++) in[i] = rank == 0 ? i : -1;
    OK(MPI_Bcast(in, 1, vec, 0, MPI_COMM_WORLD));
    for (int i = 0; i < 10; i++) CHECK(in[i] == ((i % 4) < 2 || rank == 0 ? i : -1));
    OK(MPI_Type_free(&vec));
    OK(MPI_Type_free(&idx));
    OK(MPI_Type_free(&st));
}

/* 2x2 integer matrix product, row-major: non-commutative. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int *a = in, *b = inout;
    (void)dt;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        int r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                    a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, r, sizeof r);
    }
}

static void isum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    CHECK(*dt == MPI_INT);
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* Keeps the item with the larger b (the earlier rank's on ties). */
static void maxb(void *in, void *inout, int *len, MPI_Datatype *dt) {
    struct item *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++)
        if (a[i].b >= b[i].b) b[i] = a[i];
}

static void user_ops(int rank, int size) {
    MPI_Op mm, sum, mx;
    OK(MPI_Op_create(matmul, 0, &mm));
    OK(MPI_Op_create(isum, 1, &sum));
    OK(MPI_Op_create(maxb, 1, &mx));
    MPI_Datatype m4;
    OK(MPI_Type_contiguous(4, MPI_INT, &m4));
    OK(MPI_Type_commit(&m4));

    /* Matrices [[r+1, 1], [0, 1]], two per rank; product in rank order. */
    int mine[8], got[8], want[4] = {1, 0, 0, 1};
    for (int k = 0; k < 2; k++) {
        int *p = mine + 4 * k;
        p[0] = rank + 1 + k;
        p[1] = 1;
        p[2] = 0;
        p[3] = 1;
    }
    for (int r = 0; r < size; r++) {
        int x[4] = {r + 1, 1, 0, 1}, len = 1;
        matmul(want, x, &len, NULL);
        memcpy(want, x, sizeof x);
    }
    OK(MPI_Allreduce(mine, got, 2, m4, mm, MPI_COMM_WORLD));
    for (int i = 0; i < 4; i++) CHECK(got[i] == want[i]);
    int root = 1 % size;
    memset(got, 0, sizeof got);
    OK(MPI_Reduce(mine, got, 2, m4, mm, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int i = 0; i < 4; i++) CHECK(got[i] == want[i]);

    /* Predefined datatype, MPI_IN_PLACE at the root and in Allreduce. */
    int v[3] = {rank, 2 * rank, 1};
    if (rank == root)
        OK(MPI_Reduce(MPI_IN_PLACE, v, 3, MPI_INT, sum, root, MPI_COMM_WORLD));
    else
        OK(MPI_Reduce(v, NULL, 3, MPI_INT, sum, root, MPI_COMM_WORLD));
    int tot = size * (size - 1) / 2;
    if (rank == root) CHECK(v[0] == tot && v[1] == 2 * tot && v[2] == size);
    int w[2] = {rank, 1};
    OK(MPI_Allreduce(MPI_IN_PLACE, w, 2, MPI_INT, sum, MPI_COMM_WORLD));
    CHECK(w[0] == tot && w[1] == size);

    /* Struct datatype with padding. */
    MPI_Datatype st = item_type();
    struct item it = {rank, (double)(rank % 2), (char)('a' + rank)}, res;
    OK(MPI_Allreduce(&it, &res, 1, st, mx, MPI_COMM_WORLD));
    int best = size > 1 ? 1 : 0;
    CHECK(res.a == best && res.b == (double)(best % 2) && res.c == 'a' + best);

    /* Errors. */
    CHECK(MPI_Op_create(NULL, 1, &mx) != MPI_SUCCESS);
    MPI_Op p = MPI_SUM;
    CHECK(MPI_Op_free(&p) == MPI_ERR_OP);
    OK(MPI_Op_free(&mm));
    CHECK(mm == MPI_OP_NULL);
    MPI_Op gone = sum;
    OK(MPI_Op_free(&sum));
    CHECK(MPI_Allreduce(w, v, 1, MPI_INT, gone, MPI_COMM_WORLD) == MPI_ERR_OP);
    CHECK(MPI_Op_free(&gone) == MPI_ERR_OP);
    OK(MPI_Op_free(&mx));
    OK(MPI_Type_free(&m4));
    OK(MPI_Type_free(&st));
}

/* Subarrays in C and Fortran order: the elements, their order, the bounds, and errors. */
static void subarrays(int rank) {
    int a[4][5], got[6];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) a[i][j] = 10 * i + j;
    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 1};
    MPI_Datatype c, f, bad;
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &c));
    OK(MPI_Type_commit(&c));
    MPI_Aint lb, ext;
    int sz;
    OK(MPI_Type_get_extent(c, &lb, &ext));
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof a);
    OK(MPI_Type_get_true_extent(c, &lb, &ext));
    CHECK(lb == (MPI_Aint)(6 * sizeof(int)) && ext == (MPI_Aint)(8 * sizeof(int)));
    OK(MPI_Type_size(c, &sz));
    CHECK(sz == (int)(6 * sizeof(int)));
    OK(MPI_Sendrecv(a, 1, c, rank, 9, got, 6, MPI_INT, rank, 9, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    int want_c[6] = {11, 12, 13, 21, 22, 23};
    for (int k = 0; k < 6; k++) CHECK(got[k] == want_c[k]);
    /* Fortran order on the same memory seen as a 5x4 column-major array: dimension 0
       (size 5) varies fastest. */
    int fsizes[2] = {5, 4}, fsubs[2] = {3, 2}, fstarts[2] = {1, 1};
    OK(MPI_Type_create_subarray(2, fsizes, fsubs, fstarts, MPI_ORDER_FORTRAN, MPI_INT, &f));
    OK(MPI_Type_commit(&f));
    OK(MPI_Sendrecv(a, 1, f, rank, 9, got, 6, MPI_INT, rank, 9, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    for (int k = 0; k < 6; k++) CHECK(got[k] == want_c[k]);
    /* Receiving into a subarray leaves the rest untouched. */
    int b[4][5] = {{0}}, six[6] = {1, 2, 3, 4, 5, 6};
    OK(MPI_Sendrecv(six, 6, MPI_INT, rank, 9, b, 1, c, rank, 9, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            int in = i >= 1 && i < 3 && j >= 1 && j < 4;
            CHECK(b[i][j] == (in ? six[(i - 1) * 3 + (j - 1)] : 0));
        }
    OK(MPI_Type_free(&c));
    OK(MPI_Type_free(&f));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int over[2] = {3, 3};
    CHECK(MPI_Type_create_subarray(2, sizes, subs, over, MPI_ORDER_C, MPI_INT, &bad) ==
          MPI_ERR_ARG);
    CHECK(MPI_Type_create_subarray(2, sizes, subs, starts, 7, MPI_INT, &bad) == MPI_ERR_ARG);
    CHECK(MPI_Type_create_subarray(0, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &bad) ==
          MPI_ERR_DIMS);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void type_errors(int size) {
    MPI_Request r;
    CHECK(MPI_Ibarrier(MPI_COMM_WORLD, NULL) == MPI_ERR_ARG);
    CHECK(MPI_Ibarrier((MPI_Comm)0x4242, &r) == MPI_ERR_COMM);
    MPI_Datatype t, u;
    int x[4] = {0}, n;
    CHECK(MPI_Type_contiguous(-1, MPI_INT, &t) == MPI_ERR_COUNT);
    CHECK(MPI_Type_contiguous(2, (MPI_Datatype)0x4343, &t) == MPI_ERR_TYPE);
    CHECK(MPI_Type_vector(2, 1, 2, MPI_DATATYPE_NULL, &t) == MPI_ERR_TYPE);
    CHECK(MPI_Type_commit(NULL) == MPI_ERR_ARG);
    u = MPI_INT;
    CHECK(MPI_Type_free(&u) == MPI_ERR_TYPE);
    CHECK(MPI_Type_get_name((MPI_Datatype)0x4343, (char[MPI_MAX_OBJECT_NAME]){0}, &n) ==
          MPI_ERR_TYPE);
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    /* Not committed yet. */
    CHECK(MPI_Send(x, 1, t, MPI_PROC_NULL, 0, MPI_COMM_WORLD) == MPI_ERR_TYPE);
    OK(MPI_Type_commit(&t));
    OK(MPI_Send(x, 1, t, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    /* Derived datatypes in reductions (dtcoll.c covers the collectives). */
    x[0] = 1;
    x[1] = 2;
    OK(MPI_Allreduce(x, x + 2, 1, t, MPI_SUM, MPI_COMM_WORLD));
    CHECK(x[2] == size && x[3] == 2 * size);
    u = t;
    OK(MPI_Type_free(&t));
    CHECK(MPI_Type_free(&u) == MPI_ERR_TYPE);
    CHECK(MPI_Send(x, 1, u, MPI_PROC_NULL, 0, MPI_COMM_WORLD) == MPI_ERR_TYPE);
    CHECK(MPI_Type_size(u, &n) == MPI_ERR_TYPE);
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (argc > 1 && strcmp(argv[1], "fatal_type") == 0) {
        MPI_Datatype t;
        int x[4] = {0}, y[64];
        OK(MPI_Type_contiguous(2, MPI_INT, &t)); /* not committed */
        MPI_Gather(x, 1, t, y, 1, t, 0, MPI_COMM_WORLD);
        printf("still alive\n");
        return 0;
    }
    ibarrier();
    layouts();
    transfers(rank, size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    user_ops(rank, size);
    type_errors(size);
    subarrays(rank);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    if (rank == 0) printf("types ok\n");
    return 0;
}
