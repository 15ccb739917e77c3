/* A real transfer past 2^31 bytes on the large-count path: MPI_Send_c of 2^29 + 1024
 * MPI_INTs (2^31 + 4096 bytes) received with MPI_Recv_c as 2^31 + 4096 MPI_BYTEs, the
 * data checked (a pattern), MPI_Get_count_c giving the whole count and MPI_Get_count
 * MPI_UNDEFINED; then back with MPI_Isend_c of the bytes into MPI_Irecv_c of the ints.
 * Then MPI_Bcast_c of the bytes from rank 0 to rank 1. Ranks 0 and 1 (about 2 GiB each). */
#include "check.h"
#include <stdint.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    const MPI_Count bytes = ((MPI_Count)1 << 31) + 4096;
    const MPI_Count ints = bytes / 4; /* 2^29 + 1024 */
    CHECK(ints > ((MPI_Count)1 << 29));
    if (rank < 2) {
        uint32_t *b = malloc((size_t)bytes);
        CHECK(b != NULL);
        if (rank == 0) {
            for (MPI_Count i = 0; i < ints; i++) b[i] = (uint32_t)(i * 2654435761u + 7);
            OK(MPI_Send_c(b, ints, MPI_INT, 1, 3, MPI_COMM_WORLD));
            memset(b, 0, (size_t)bytes);
            MPI_Request r;
            MPI_Status st;
            OK(MPI_Irecv_c(b, ints, MPI_INT, 1, 4, MPI_COMM_WORLD, &r));
            OK(MPI_Wait(&r, &st));
            for (MPI_Count i = 0; i < ints; i++) CHECK(b[i] == (uint32_t)(i * 2654435761u + 7));
            MPI_Count n = -1;
            OK(MPI_Get_count_c(&st, MPI_BYTE, &n));
            CHECK(n == bytes);
        } else {
            memset(b, 0, (size_t)bytes);
            MPI_Status st;
            OK(MPI_Recv_c(b, bytes, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 3);
            for (MPI_Count i = 0; i < ints; i++) CHECK(b[i] == (uint32_t)(i * 2654435761u + 7));
            MPI_Count n = -1;
            OK(MPI_Get_count_c(&st, MPI_BYTE, &n));
            CHECK(n == bytes);
            OK(MPI_Get_count_c(&st, MPI_INT, &n));
            CHECK(n == ints);
            OK(MPI_Get_elements_c(&st, MPI_BYTE, &n));
            CHECK(n == bytes);
            OK(MPI_Get_elements_x(&st, MPI_INT, &n));
            CHECK(n == ints);
            int k = 0;
            OK(MPI_Get_count(&st, MPI_BYTE, &k));
            CHECK(k == MPI_UNDEFINED);
            OK(MPI_Get_elements(&st, MPI_BYTE, &k));
            CHECK(k == MPI_UNDEFINED);
            OK(MPI_Get_count(&st, MPI_INT, &k)); /* 2^29 + 1024 fits an int */
            CHECK(k == (int)ints);
            MPI_Request r;
            OK(MPI_Isend_c(b, bytes, MPI_BYTE, 0, 4, MPI_COMM_WORLD, &r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        /* MPI_Bcast_c of the same 2^31 + 4096 bytes (rank 0 holds the pattern again). */
        MPI_Comm pair;
        OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &pair));
        if (rank == 1) memset(b, 0, (size_t)bytes);
        OK(MPI_Bcast_c(b, bytes, MPI_BYTE, 0, pair));
        for (MPI_Count i = 0; i < ints; i++) CHECK(b[i] == (uint32_t)(i * 2654435761u + 7));
        OK(MPI_Comm_free(&pair));
        free(b);
    } else {
        MPI_Comm none;
        OK(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, rank, &none));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("large big ok\n");
    OK(MPI_Finalize());
    return 0;
}
