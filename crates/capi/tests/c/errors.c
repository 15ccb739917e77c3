/* Error paths under MPI_ERRORS_RETURN: every class comes back, nothing crashes. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, v = 0, len;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);

    int buf[4] = {0};
    MPI_Request req;
    CHECK(MPI_Init(&argc, &argv) == MPI_ERR_OTHER); /* twice */
    CHECK(MPI_Send(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD) == MPI_ERR_RANK);
    CHECK(MPI_Send(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD) == MPI_ERR_RANK);
    CHECK(MPI_Send(buf, 1, MPI_INT, 0, -5, MPI_COMM_WORLD) == MPI_ERR_TAG);
    CHECK(MPI_Send(buf, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD) == MPI_ERR_TAG);
    CHECK(MPI_Send(buf, -1, MPI_INT, 0, 0, MPI_COMM_WORLD) == MPI_ERR_COUNT);
    CHECK(MPI_Send(buf, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD) == MPI_ERR_TYPE);
    CHECK(MPI_Send(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD) == MPI_ERR_BUFFER);
    CHECK(MPI_Recv(buf, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
          MPI_ERR_RANK);
    CHECK(MPI_Isend(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &req) == MPI_ERR_RANK);
    CHECK(MPI_Irecv(buf, 1, MPI_INT, 0, -9, MPI_COMM_WORLD, &req) == MPI_ERR_TAG);
    CHECK(MPI_Type_size(MPI_DATATYPE_NULL, &v) == MPI_ERR_TYPE);
    CHECK(MPI_Comm_rank(MPI_COMM_NULL, &v) == MPI_ERR_COMM);
    CHECK(MPI_Comm_size((MPI_Comm)0x4242, &v) == MPI_ERR_COMM);
    MPI_Comm w = MPI_COMM_WORLD;
    CHECK(MPI_Comm_free(&w) == MPI_ERR_COMM);
    req = (MPI_Request)0x777;
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
    CHECK(MPI_Bcast(buf, 1, MPI_INT, size, MPI_COMM_WORLD) == MPI_ERR_ROOT);
    CHECK(MPI_Reduce(buf, buf + 1, 1, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD) == MPI_ERR_ROOT);
    CHECK(MPI_Allreduce(buf, buf + 1, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD) == MPI_ERR_OP);
    CHECK(MPI_Allreduce(buf, buf + 1, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD) == MPI_ERR_OP);
    CHECK(MPI_Allreduce(buf, buf, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_ERR_BUFFER);
    CHECK(MPI_Allreduce(buf, buf + 2, 1, MPI_2INT, MPI_SUM, MPI_COMM_WORLD) == MPI_ERR_OP);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRHANDLER_NULL) == MPI_ERR_ARG);
    CHECK(MPI_Error_class(-4, &v) == MPI_ERR_ARG);

    /* Unimplemented functions are stubs returning MPI_ERR_OTHER. */
    MPI_Status st;
    MPI_Comm c;
    MPI_Datatype t;
    CHECK(MPI_File_sync(MPI_FILE_NULL) == MPI_ERR_OTHER);
    /* ... including the generated ones (include/mpi_stubs.h, src/stubs_gen.rs). */
    CHECK(MPI_Comm_join(-1, &c) == MPI_ERR_OTHER && c == MPI_COMM_NULL);
    CHECK(MPI_Comm_connect("port", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c) == MPI_ERR_OTHER && c == MPI_COMM_NULL);
    CHECK(MPI_File_read_c(MPI_FILE_NULL, buf, (MPI_Count)1, MPI_INT, &st) == MPI_ERR_OTHER);
    /* (a neighbour collective, now implemented, needs a topology) */
    CHECK(MPI_Neighbor_allgather_c(buf, (MPI_Count)1, MPI_INT, buf + 1, (MPI_Count)1, MPI_INT, MPI_COMM_WORLD) == MPI_ERR_TOPOLOGY);
    CHECK(PMPI_Type_get_contents(MPI_INT, 0, 0, 0, NULL, NULL, &t) == MPI_ERR_OTHER);
    CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &v) == MPI_ERR_OTHER);
    CHECK(MPI_Aint_add((MPI_Aint)8, (MPI_Aint)4) == 12);
    CHECK(MPI_Comm_fromint(MPI_Comm_toint(MPI_COMM_WORLD)) == MPI_COMM_WORLD);
    CHECK(MPI_Pcontrol(1) == MPI_SUCCESS);
    (void)st;
    (void)c;

    /* Error strings and classes. */
    char s[MPI_MAX_ERROR_STRING];
    OK(MPI_Error_string(MPI_ERR_OTHER, s, &len));
    CHECK(len == (int)strlen(s) && strstr(s, "MPI_ERR_OTHER") != NULL);
    OK(MPI_Error_string(MPI_SUCCESS, s, &len));
    CHECK(strstr(s, "MPI_SUCCESS") != NULL);
    OK(MPI_Error_class(MPI_ERR_TRUNCATE, &v));
    CHECK(v == MPI_ERR_TRUNCATE);

    /* Truncation returns MPI_ERR_TRUNCATE; the message can then be received whole. */
    int big[4] = {1, 2, 3, 4}, got[4] = {0};
    if (rank == 0) OK(MPI_Send(big, 4, MPI_INT, 1, 77, MPI_COMM_WORLD));
    if (rank == 1) {
        MPI_Status ts;
        CHECK(MPI_Recv(got, 2, MPI_INT, 0, 77, MPI_COMM_WORLD, &ts) == MPI_ERR_TRUNCATE);
        OK(MPI_Recv(got, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &ts));
        CHECK(got[3] == 4 && ts.MPI_TAG == 77 && ts.MPI_SOURCE == 0);
    }

    /* A nonblocking receive too small for its message: MPI_Wait (and MPI_Test) return
       MPI_ERR_TRUNCATE under MPI_ERRORS_RETURN, and the job goes on. */
    if (rank == 0) {
        OK(MPI_Send(big, 4, MPI_INT, 1, 78, MPI_COMM_WORLD));
        OK(MPI_Send(big, 4, MPI_INT, 1, 79, MPI_COMM_WORLD));
    }
    if (rank == 1) {
        MPI_Request rq;
        MPI_Status ts;
        OK(MPI_Irecv(got, 2, MPI_INT, 0, 78, MPI_COMM_WORLD, &rq));
        CHECK(MPI_Wait(&rq, &ts) == MPI_ERR_TRUNCATE);
        int flag = 0, rc = MPI_SUCCESS;
        OK(MPI_Irecv(got, 1, MPI_INT, 0, 79, MPI_COMM_WORLD, &rq));
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(&rq, &flag, &ts);
        CHECK(rc == MPI_ERR_TRUNCATE);
    }

    /* A duplicate inherits the handler; MPI_COMM_SELF keeps the fatal default. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(MPI_Send(buf, 1, MPI_INT, size, 0, dup) == MPI_ERR_RANK);
    OK(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    OK(MPI_Comm_free(&dup));

    /* Communication still works after the errors. */
    int x = rank + 1, sum = 0;
    OK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size * (size + 1) / 2);

    OK(MPI_Finalize());
    if (rank == 0) printf("errors ok\n");
    return 0;
}
