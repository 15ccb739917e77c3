/* Environment, inquiry and point-to-point calls of phalanx's C ABI (2 or more ranks). */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int flag = -1, provided = -1, rank, size, v, sv, len;
    OK(MPI_Initialized(&flag));
    CHECK(flag == 0);
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Query_thread(&provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1);
    OK(MPI_Finalized(&flag));
    CHECK(flag == 0);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2 && rank >= 0 && rank < size);
    OK(MPI_Comm_size(MPI_COMM_SELF, &v));
    CHECK(v == 1);
    OK(MPI_Comm_rank(MPI_COMM_SELF, &v));
    CHECK(v == 0);

    OK(MPI_Get_version(&v, &sv));
    CHECK(v == 5 && sv == 0 && v == MPI_VERSION);
    OK(MPI_Abi_get_version(&v, &sv));
    CHECK(v == 1 && sv == 0);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    OK(MPI_Get_library_version(lib, &len));
    CHECK(len == (int)strlen(lib) && strstr(lib, "phalanx") != NULL);
    char host[MPI_MAX_PROCESSOR_NAME];
    OK(MPI_Get_processor_name(host, &len));
    CHECK(len > 0 && len == (int)strlen(host));
    double t0 = MPI_Wtime();
    CHECK(MPI_Wtick() > 0.0 && MPI_Wtick() < 1.0);
    CHECK(MPI_Wtime() >= t0);

    struct { MPI_Datatype t; int size; } types[] = {
        {MPI_CHAR, 1}, {MPI_BYTE, 1}, {MPI_SHORT, 2}, {MPI_INT, 4},
        {MPI_LONG, (int)sizeof(long)}, {MPI_LONG_LONG, 8}, {MPI_FLOAT, 4},
        {MPI_DOUBLE, 8}, {MPI_UNSIGNED, 4}, {MPI_INT64_T, 8}, {MPI_UINT8_T, 1},
        {MPI_AINT, (int)sizeof(MPI_Aint)}, {MPI_COUNT, 8}, {MPI_2INT, 8}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        OK(MPI_Type_size(types[i].t, &v));
        CHECK(v == types[i].size);
    }

    /* Blocking send/recv with status and Get_count; wildcards. */
    MPI_Status st;
    int buf[10];
    if (rank == 0) {
        for (int i = 0; i < 10; i++) buf[i] = 100 + i;
        OK(MPI_Send(buf, 7, MPI_INT, 1, 42, MPI_COMM_WORLD));
        OK(MPI_Send(buf, 3, MPI_INT, 1, 43, MPI_COMM_WORLD));
        OK(MPI_Send(buf, 0, MPI_INT, 1, 44, MPI_COMM_WORLD));
    } else if (rank == 1) {
        memset(buf, 0, sizeof buf);
        st.MPI_ERROR = MPI_ERR_DIMS; /* a single-completion call leaves it alone */
        OK(MPI_Recv(buf, 10, MPI_INT, 0, 42, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 42 && st.MPI_ERROR == MPI_ERR_DIMS);
        OK(MPI_Get_count(&st, MPI_INT, &v));
        CHECK(v == 7 && buf[6] == 106 && buf[7] == 0);
        OK(MPI_Get_count(&st, MPI_BYTE, &v));
        CHECK(v == 28);
        OK(MPI_Get_count(&st, MPI_DOUBLE, &v));
        CHECK(v == MPI_UNDEFINED);
        OK(MPI_Recv(buf, 10, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 43);
        OK(MPI_Recv(buf, 10, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }

    /* MPI_PROC_NULL. */
    OK(MPI_Send(buf, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv(buf, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    OK(MPI_Get_count(&st, MPI_INT, &v));
    CHECK(v == 0);

    /* Nonblocking ring: Isend/Irecv/Test/Wait/Waitall. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double out[4], in[4];
    for (int i = 0; i < 4; i++) out[i] = rank * 10.0 + i;
    MPI_Request reqs[3];
    OK(MPI_Irecv(in, 4, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Isend(out, 4, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &reqs[1]));
    OK(MPI_Isend(out, 1, MPI_DOUBLE, MPI_PROC_NULL, 7, MPI_COMM_WORLD, &reqs[2]));
    flag = 0;
    while (!flag) OK(MPI_Test(&reqs[0], &flag, &st));
    CHECK(reqs[0] == MPI_REQUEST_NULL && st.MPI_SOURCE == left && st.MPI_TAG == 7);
    CHECK(in[3] == left * 10.0 + 3);
    MPI_Status sts[3];
    OK(MPI_Waitall(3, reqs, sts));
    CHECK(reqs[1] == MPI_REQUEST_NULL && reqs[2] == MPI_REQUEST_NULL);
    CHECK(sts[0].MPI_SOURCE == MPI_ANY_SOURCE); /* a null request: empty status */
    OK(MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1);

    OK(MPI_Irecv(in, 4, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Isend(out, 4, MPI_DOUBLE, right, 8, MPI_COMM_WORLD, &reqs[1]));
    OK(MPI_Wait(&reqs[0], &st));
    OK(MPI_Get_count(&st, MPI_DOUBLE, &v));
    CHECK(v == 4 && st.MPI_TAG == 8 && st.MPI_SOURCE == left && reqs[0] == MPI_REQUEST_NULL);
    OK(MPI_Wait(&reqs[1], MPI_STATUS_IGNORE));
    OK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));

    /* Sendrecv around the ring, and with MPI_PROC_NULL. */
    int s = rank, r = -1;
    OK(MPI_Sendrecv(&s, 1, MPI_INT, right, 5, &r, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &st));
    CHECK(r == left && st.MPI_SOURCE == left && st.MPI_TAG == 5);
    OK(MPI_Sendrecv(&s, 1, MPI_INT, MPI_PROC_NULL, 5, &r, 1, MPI_INT, MPI_PROC_NULL, 5,
                    MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL);

    /* A duplicate communicator: separate message space, same ranks. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(dup != MPI_COMM_WORLD && dup != MPI_COMM_NULL);
    OK(MPI_Comm_rank(dup, &v));
    CHECK(v == rank);
    if (rank == 0) {
        s = 1;
        OK(MPI_Send(&s, 1, MPI_INT, 1, 0, MPI_COMM_WORLD));
        s = 2;
        OK(MPI_Send(&s, 1, MPI_INT, 1, 0, dup));
    } else if (rank == 1) {
        OK(MPI_Recv(&r, 1, MPI_INT, 0, 0, dup, MPI_STATUS_IGNORE));
        CHECK(r == 2);
        OK(MPI_Recv(&r, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(r == 1);
    }
    OK(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL);

    /* Small sends complete when they start (no request entry): every request call
       still treats them as completed requests. */
    {
        int msg[6] = {10, 11, 12, 13, 14, 15}, got[6] = {0};
        MPI_Request q[3];
        int idx = -1;
        MPI_Status st;
        OK(MPI_Isend(&msg[0], 1, MPI_INT, right, 21, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Test(&q[0], &flag, &st));
        CHECK(flag == 1 && q[0] == MPI_REQUEST_NULL);
        OK(MPI_Isend(&msg[1], 1, MPI_INT, right, 21, MPI_COMM_WORLD, &q[0]));
        MPI_Request keep = q[0];
        OK(MPI_Request_get_status(q[0], &flag, &st));
        CHECK(flag == 1 && q[0] == keep); /* not freed */
        OK(MPI_Request_get_status(q[0], &flag, &st));
        CHECK(flag == 1);
        OK(MPI_Wait(&q[0], &st));
        CHECK(q[0] == MPI_REQUEST_NULL);
        OK(MPI_Isend(&msg[2], 1, MPI_INT, right, 21, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Cancel(&q[0])); /* complete: no effect */
        OK(MPI_Wait(&q[0], &st));
        OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 0 && q[0] == MPI_REQUEST_NULL);
        OK(MPI_Isend(&msg[3], 1, MPI_INT, right, 21, MPI_COMM_WORLD, &q[0]));
        OK(MPI_Request_free(&q[0]));
        CHECK(q[0] == MPI_REQUEST_NULL);
        /* Mixed with a null and a pending receive. */
        q[0] = MPI_REQUEST_NULL;
        OK(MPI_Irecv(&got[5], 1, MPI_INT, left, 22, MPI_COMM_WORLD, &q[2]));
        OK(MPI_Isend(&msg[4], 1, MPI_INT, right, 21, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Waitany(3, q, &idx, &st));
        CHECK(idx == 1 && q[1] == MPI_REQUEST_NULL && q[2] != MPI_REQUEST_NULL);
        OK(MPI_Isend(&msg[5], 1, MPI_INT, right, 22, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
        CHECK(q[1] == MPI_REQUEST_NULL && q[2] == MPI_REQUEST_NULL);
        CHECK(got[5] == 15);
        for (int k = 0; k < 5; k++) {
            OK(MPI_Recv(&got[k], 1, MPI_INT, left, 21, MPI_COMM_WORLD, &st));
            CHECK(got[k] == 10 + k && st.MPI_SOURCE == left && st.MPI_TAG == 21);
        }
    }

    /* A request never waited for is completed by MPI_Finalize. */
    OK(MPI_Isend(&s, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Recv(&r, 1, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));

    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag));
    CHECK(flag == 1);
    if (rank == 0) printf("p2p ok\n");
    return 0;
}
