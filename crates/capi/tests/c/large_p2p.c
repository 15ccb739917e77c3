/* The large-count point-to-point and status calls with small counts, results checked:
 * Send_c, Recv_c, Ssend_c, Rsend_c, Bsend_c, Ibsend_c, Isend_c, Issend_c, Irsend_c,
 * Irecv_c, Sendrecv_c, Sendrecv_replace_c (predefined and derived types), the
 * persistent *_init_c, Buffer_attach_c/detach_c, Get_count_c, Get_elements_c/_x,
 * Status_set_elements_c/_x (past 2^31), and the count errors (negative, count × size
 * past any buffer). Ranks 0 and 1 talk. */
#include "check.h"
#include <string.h>

static void fill(int *b, int n, int base) {
    for (int i = 0; i < n; i++) b[i] = base + i;
}

static void expect(const int *b, int n, int base) {
    for (int i = 0; i < n; i++) CHECK(b[i] == base + i);
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int peer = 1 - rank, b[64], c[64];
    MPI_Status st;
    MPI_Count n;
    if (rank < 2) {
        static char pool[4096];
        OK(MPI_Buffer_attach_c(pool, (MPI_Count)sizeof pool));
        MPI_Request r[6];
        if (rank == 0) {
            fill(b, 64, 100);
            OK(MPI_Send_c(b, 64, MPI_INT, 1, 1, MPI_COMM_WORLD));
            OK(MPI_Ssend_c(b, 32, MPI_INT, 1, 2, MPI_COMM_WORLD));
            OK(MPI_Bsend_c(b, 16, MPI_INT, 1, 3, MPI_COMM_WORLD));
            OK(MPI_Ibsend_c(b, 8, MPI_INT, 1, 4, MPI_COMM_WORLD, &r[0]));
            OK(MPI_Isend_c(b, 7, MPI_INT, 1, 5, MPI_COMM_WORLD, &r[1]));
            OK(MPI_Issend_c(b, 6, MPI_INT, 1, 6, MPI_COMM_WORLD, &r[2]));
            OK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
            OK(MPI_Recv_c(c, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE)); /* ready */
            OK(MPI_Rsend_c(b, 5, MPI_INT, 1, 8, MPI_COMM_WORLD));
            OK(MPI_Irsend_c(b, 4, MPI_INT, 1, 9, MPI_COMM_WORLD, &r[0]));
            OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        } else {
            memset(c, 0, sizeof c);
            OK(MPI_Recv_c(c, 64, MPI_INT, 0, 1, MPI_COMM_WORLD, &st));
            expect(c, 64, 100);
            OK(MPI_Get_count_c(&st, MPI_INT, &n));
            CHECK(n == 64);
            OK(MPI_Recv_c(c, 64, MPI_INT, 0, 2, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count_c(&st, MPI_INT, &n));
            CHECK(n == 32);
            OK(MPI_Recv_c(c, 64, MPI_INT, 0, 3, MPI_COMM_WORLD, &st));
            OK(MPI_Get_elements_c(&st, MPI_INT, &n));
            CHECK(n == 16);
            int tags[3] = {4, 5, 6};
            for (int i = 0; i < 3; i++)
                OK(MPI_Irecv_c(c + 16 * i, 16, MPI_INT, 0, tags[i], MPI_COMM_WORLD, &r[i]));
            MPI_Status sts[3];
            OK(MPI_Waitall(3, r, sts));
            for (int i = 0; i < 3; i++) {
                OK(MPI_Get_count_c(&sts[i], MPI_INT, &n));
                CHECK(n == 8 - i);
                expect(c + 16 * i, 8 - i, 100);
            }
            OK(MPI_Irecv_c(c, 64, MPI_INT, 0, 8, MPI_COMM_WORLD, &r[0]));
            OK(MPI_Irecv_c(c + 32, 32, MPI_INT, 0, 9, MPI_COMM_WORLD, &r[1]));
            OK(MPI_Send_c(b, 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
            OK(MPI_Waitall(2, r, sts));
            OK(MPI_Get_count_c(&sts[0], MPI_INT, &n));
            CHECK(n == 5);
            OK(MPI_Get_count_c(&sts[1], MPI_INT, &n));
            CHECK(n == 4);
            expect(c + 32, 4, 100);
        }
        void *addr;
        OK(MPI_Buffer_detach_c(&addr, &n));
        CHECK(addr == pool && n == (MPI_Count)sizeof pool);

        /* Sendrecv_c, Sendrecv_replace_c (a vector type: the derived path). */
        fill(b, 64, 1000 * rank);
        OK(MPI_Sendrecv_c(b, 10, MPI_INT, peer, 11, c, 64, MPI_INT, peer, 11, MPI_COMM_WORLD, &st));
        expect(c, 10, 1000 * peer);
        OK(MPI_Get_count_c(&st, MPI_INT, &n));
        CHECK(n == 10);
        OK(MPI_Sendrecv_replace_c(b, 20, MPI_INT, peer, 12, peer, 12, MPI_COMM_WORLD, &st));
        expect(b, 20, 1000 * peer);
        MPI_Datatype v;
        OK(MPI_Type_vector(4, 1, 2, MPI_INT, &v));
        OK(MPI_Type_commit(&v));
        fill(b, 64, 1000 * rank);
        OK(MPI_Sendrecv_replace_c(b, 2, v, peer, 13, peer, 13, MPI_COMM_WORLD, &st));
        for (int i = 0; i < 16; i++) { /* the vector's extent is 7 ints */
            int in = (i < 7 ? i : i - 7) % 2 == 0 && i < 14;
            CHECK(b[i] == (in ? 1000 * peer + i : 1000 * rank + i));
        }
        OK(MPI_Get_elements_x(&st, v, &n));
        CHECK(n == 8);
        OK(MPI_Type_free(&v));

        /* Persistent, large-count forms. */
        OK(MPI_Buffer_attach_c(pool, (MPI_Count)sizeof pool));
        fill(b, 64, 7 * rank);
        memset(c, 0, sizeof c);
        MPI_Request p[5];
        OK(MPI_Send_init_c(b, 3, MPI_INT, peer, 21, MPI_COMM_WORLD, &p[0]));
        OK(MPI_Ssend_init_c(b, 4, MPI_INT, peer, 22, MPI_COMM_WORLD, &p[1]));
        OK(MPI_Bsend_init_c(b, 5, MPI_INT, peer, 23, MPI_COMM_WORLD, &p[2]));
        OK(MPI_Recv_init_c(c, 64, MPI_INT, peer, 21, MPI_COMM_WORLD, &p[3]));
        OK(MPI_Startall(4, p));
        OK(MPI_Wait(&p[3], &st));
        expect(c, 3, 7 * peer);
        OK(MPI_Recv_c(c, 64, MPI_INT, peer, 22, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count_c(&st, MPI_INT, &n));
        CHECK(n == 4);
        OK(MPI_Recv_c(c, 64, MPI_INT, peer, 23, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count_c(&st, MPI_INT, &n));
        CHECK(n == 5);
        OK(MPI_Waitall(3, p, MPI_STATUSES_IGNORE));
        if (rank == 0) {
            OK(MPI_Recv_c(c, 1, MPI_INT, 1, 24, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            OK(MPI_Rsend_init_c(b, 6, MPI_INT, 1, 25, MPI_COMM_WORLD, &p[4]));
            OK(MPI_Start(&p[4]));
            OK(MPI_Wait(&p[4], MPI_STATUS_IGNORE));
        } else {
            OK(MPI_Irecv_c(c, 64, MPI_INT, 0, 25, MPI_COMM_WORLD, &p[4]));
            OK(MPI_Send_c(b, 1, MPI_INT, 0, 24, MPI_COMM_WORLD));
            OK(MPI_Wait(&p[4], &st));
            OK(MPI_Get_count_c(&st, MPI_INT, &n));
            CHECK(n == 6);
            p[4] = MPI_REQUEST_NULL;
        }
        for (int i = 0; i < 5; i++)
            if (p[i] != MPI_REQUEST_NULL) OK(MPI_Request_free(&p[i]));
        OK(MPI_Buffer_detach_c(&addr, &n));
    }

    /* Status elements past 2^31 (64-bit in the status). */
    MPI_Status s;
    const MPI_Count big = ((MPI_Count)1 << 33) + 5;
    OK(MPI_Status_set_elements_c(&s, MPI_INT, big));
    OK(MPI_Get_elements_c(&s, MPI_INT, &n));
    CHECK(n == big);
    OK(MPI_Get_count_c(&s, MPI_BYTE, &n));
    CHECK(n == 4 * big);
    int k;
    OK(MPI_Get_count(&s, MPI_INT, &k));
    CHECK(k == MPI_UNDEFINED);
    OK(MPI_Status_set_elements_x(&s, MPI_DOUBLE, big));
    OK(MPI_Get_elements_x(&s, MPI_DOUBLE, &n));
    CHECK(n == big);
    OK(MPI_Get_elements(&s, MPI_DOUBLE, &k));
    CHECK(k == MPI_UNDEFINED);

    /* Count errors: negative, and count × size past any buffer (never wrapped). */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int e, cls;
    e = MPI_Send_c(b, -1, MPI_INT, peer < size ? peer : 0, 0, MPI_COMM_WORLD);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    e = MPI_Send_c(b, (MPI_Count)1 << 62, MPI_DOUBLE, rank, 0, MPI_COMM_WORLD);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    e = MPI_Recv_c(b, (MPI_Count)1 << 61, MPI_INT, rank, 0, MPI_COMM_WORLD, &st);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    e = MPI_Status_set_elements_c(&s, MPI_INT, -3);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);

    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("large p2p ok\n");
    OK(MPI_Finalize());
    return 0;
}
