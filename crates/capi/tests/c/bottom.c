/* MPI_BOTTOM with datatypes built from absolute addresses (MPI_Get_address of a
 * struct's members and of separate variables): Send/Recv, Isend/Irecv, Sendrecv, Bcast,
 * Ibcast, Allreduce (in place and not), Gather. Then the errors under MPI_ERRORS_RETURN: a null
 * buffer with a contiguous type, or MPI_BOTTOM with a type of relative displacements,
 * is MPI_ERR_BUFFER before any communication, and the peers go on (no hang). */
#include "check.h"
#include <stddef.h>
#include <string.h>

struct rec {
    int a;
    double b;
};

static struct rec s, s2;
static char tail[3], tail2[3];

/* The struct type of (a, b, tail) at their absolute addresses. */
static MPI_Datatype absolute(struct rec *r, char *c) {
    MPI_Aint d[3];
    OK(MPI_Get_address(&r->a, &d[0]));
    OK(MPI_Get_address(&r->b, &d[1]));
    OK(MPI_Get_address(c, &d[2]));
    int bl[3] = {1, 1, 3};
    MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, t;
    OK(MPI_Type_create_struct(3, bl, d, ts, &t));
    OK(MPI_Type_commit(&t));
    return t;
}

static void fill_at(struct rec *r, char *c, int k) {
    r->a = 10 * k + 1;
    r->b = k + 0.5;
    c[0] = (char)('a' + k);
    c[1] = (char)('b' + k);
    c[2] = (char)('c' + k);
}

static void fill(int k) { fill_at(&s, tail, k); }

static void clear(void) {
    memset(&s, 0, sizeof s);
    memset(tail, 0, sizeof tail);
}

static int filled(int k) {
    return s.a == 10 * k + 1 && s.b == k + 0.5 && tail[0] == 'a' + k && tail[1] == 'b' + k &&
           tail[2] == 'c' + k;
}

static int cls(int e) {
    int c;
    OK(MPI_Error_class(e, &c));
    return c;
}

struct flat {
    int a;
    double b;
    char c[3];
};

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    int rank, size;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(MPI_BOTTOM == NULL);
    /* t: where data lands (s, tail); t2: what is sent (s2, tail2, this rank's values). */
    MPI_Datatype t = absolute(&s, tail), t2 = absolute(&s2, tail2);
    fill_at(&s2, tail2, rank);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Send/Recv around the ring. */
    MPI_Status st;
    clear();
    if (rank == 0) {
        OK(MPI_Send(MPI_BOTTOM, 1, t2, right, 1, MPI_COMM_WORLD));
        OK(MPI_Recv(MPI_BOTTOM, 1, t, left, 1, MPI_COMM_WORLD, &st));
    } else {
        OK(MPI_Recv(MPI_BOTTOM, 1, t, left, 1, MPI_COMM_WORLD, &st));
        OK(MPI_Send(MPI_BOTTOM, 1, t2, right, 1, MPI_COMM_WORLD));
    }
    CHECK(filled(left));
    int n;
    OK(MPI_Get_count(&st, t, &n));
    CHECK(n == 1 && st.MPI_SOURCE == left);

    /* Isend/Irecv: the received data lands at the absolute addresses at completion. */
    clear();
    MPI_Request q[2];
    OK(MPI_Irecv(MPI_BOTTOM, 1, t, left, 2, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Isend(MPI_BOTTOM, 1, t2, right, 2, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    CHECK(filled(left));

    /* Sendrecv: out of t2, into t. */
    clear();
    OK(MPI_Sendrecv(MPI_BOTTOM, 1, t2, right, 3, MPI_BOTTOM, 1, t, left, 3, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    CHECK(filled(left));

    /* Bcast from the last rank. */
    if (rank == size - 1)
        fill(7);
    else
        clear();
    OK(MPI_Bcast(MPI_BOTTOM, 1, t, size - 1, MPI_COMM_WORLD));
    CHECK(filled(7));
    if (rank != 0) clear();
    MPI_Request b;
    OK(MPI_Ibcast(MPI_BOTTOM, 1, t, 0, MPI_COMM_WORLD, &b));
    OK(MPI_Wait(&b, MPI_STATUS_IGNORE));
    CHECK(filled(7));

    /* Allreduce of two separate doubles: in place at MPI_BOTTOM, and from MPI_BOTTOM into
     * a buffer at the same relative positions (recvbuf = the shift between the two). */
    static double x, y;
    static struct {
        double x;
        char gap[40];
        double y;
    } in, out;
    MPI_Aint dd[2];
    OK(MPI_Get_address(&x, &dd[0]));
    OK(MPI_Get_address(&y, &dd[1]));
    int bl2[2] = {1, 1};
    MPI_Datatype dts[2] = {MPI_DOUBLE, MPI_DOUBLE}, tx;
    OK(MPI_Type_create_struct(2, bl2, dd, dts, &tx));
    OK(MPI_Type_commit(&tx));
    x = rank;
    y = 2.0 * rank + 1;
    OK(MPI_Allreduce(MPI_IN_PLACE, MPI_BOTTOM, 1, tx, MPI_SUM, MPI_COMM_WORLD));
    CHECK(x == size * (size - 1) / 2.0 && y == size * (double)size);
    MPI_Datatype tin;
    OK(MPI_Get_address(&in.x, &dd[0]));
    OK(MPI_Get_address(&in.y, &dd[1]));
    OK(MPI_Type_create_struct(2, bl2, dd, dts, &tin));
    OK(MPI_Type_commit(&tin));
    MPI_Aint a_in, a_out;
    OK(MPI_Get_address(&in, &a_in));
    OK(MPI_Get_address(&out, &a_out));
    in.x = rank;
    in.y = -rank;
    void *shifted = (void *)MPI_Aint_diff(a_out, a_in);
    OK(MPI_Allreduce(MPI_BOTTOM, shifted, 1, tin, MPI_MAX, MPI_COMM_WORLD));
    CHECK(out.x == size - 1 && out.y == 0);

    /* Gather of the struct into contiguous records at the root. */
    fill(rank);
    struct flat all[8];
    MPI_Datatype packed_t, rt;
    int pbl[3] = {1, 1, 3};
    MPI_Aint pd[3] = {offsetof(struct flat, a), offsetof(struct flat, b),
                      offsetof(struct flat, c)};
    MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    OK(MPI_Type_create_struct(3, pbl, pd, ts, &packed_t));
    OK(MPI_Type_create_resized(packed_t, 0, sizeof all[0], &rt));
    OK(MPI_Type_commit(&rt));
    CHECK(size <= 8);
    OK(MPI_Gather(MPI_BOTTOM, 1, t, all, 1, rt, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int r = 0; r < size; r++)
            CHECK(all[r].a == 10 * r + 1 && all[r].b == r + 0.5 && all[r].c[2] == 'c' + r);

    /* Errors: returned, before any communication, and nobody hangs. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype rel, contig;
    MPI_Aint rd[2] = {0, 8};
    OK(MPI_Type_create_struct(2, bl2, rd, dts, &rel));
    OK(MPI_Type_commit(&rel));
    OK(MPI_Type_contiguous(2, MPI_INT, &contig));
    OK(MPI_Type_commit(&contig));
    int v = -1;
    if (rank == 0) {
        CHECK(cls(MPI_Send(NULL, 1, MPI_INT, right, 4, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
        CHECK(cls(MPI_Send(NULL, 1, contig, right, 4, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
        CHECK(cls(MPI_Send(MPI_BOTTOM, 1, rel, right, 4, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
        MPI_Request r = MPI_REQUEST_NULL;
        CHECK(cls(MPI_Isend(MPI_BOTTOM, 1, rel, right, 4, MPI_COMM_WORLD, &r)) ==
              MPI_ERR_BUFFER);
        CHECK(r == MPI_REQUEST_NULL);
        CHECK(cls(MPI_Isend(NULL, 3, MPI_INT, right, 4, MPI_COMM_WORLD, &r)) == MPI_ERR_BUFFER);
        CHECK(r == MPI_REQUEST_NULL);
        v = 42;
        OK(MPI_Send(&v, 1, MPI_INT, right, 4, MPI_COMM_WORLD)); /* what the peer waits for */
    }
    if (rank == 1 % size) {
        CHECK(cls(MPI_Recv(NULL, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) ==
              MPI_ERR_BUFFER);
        CHECK(cls(MPI_Recv(MPI_BOTTOM, 1, rel, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) ==
              MPI_ERR_BUFFER);
        MPI_Request r = MPI_REQUEST_NULL;
        CHECK(cls(MPI_Irecv(NULL, 1, contig, 0, 4, MPI_COMM_WORLD, &r)) == MPI_ERR_BUFFER);
        CHECK(r == MPI_REQUEST_NULL);
        CHECK(cls(MPI_Irecv(MPI_BOTTOM, 1, rel, 0, 4, MPI_COMM_WORLD, &r)) == MPI_ERR_BUFFER);
        CHECK(r == MPI_REQUEST_NULL);
        OK(MPI_Recv(&v, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v == 42);
    }
    /* A collective every member fails alike, then one that works. */
    CHECK(cls(MPI_Bcast(NULL, 1, MPI_INT, 0, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
    CHECK(cls(MPI_Bcast(MPI_BOTTOM, 1, rel, 0, MPI_COMM_WORLD)) == MPI_ERR_BUFFER);
    CHECK(cls(MPI_Allreduce(MPI_IN_PLACE, MPI_BOTTOM, 1, rel, MPI_SUM, MPI_COMM_WORLD)) ==
          MPI_ERR_BUFFER);
    v = rank == 0 ? 5 : 0;
    OK(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(v == 5);

    OK(MPI_Type_free(&t));
    OK(MPI_Type_free(&t2));
    OK(MPI_Type_free(&tx));
    OK(MPI_Type_free(&tin));
    OK(MPI_Type_free(&packed_t));
    OK(MPI_Type_free(&rt));
    OK(MPI_Type_free(&rel));
    OK(MPI_Type_free(&contig));
    OK(MPI_Finalize());
    if (rank == 0) printf("bottom ok\n");
    return 0;
}
