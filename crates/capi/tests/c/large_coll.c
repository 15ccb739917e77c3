/* The large-count blocking collectives with small counts, results checked, mixed with
 * their int forms on other ranks (the two forms take one path and match): Bcast_c,
 * Reduce_c, Allreduce_c, Gather_c, Scatter_c, Allgather_c, Alltoall_c; a negative
 * count is MPI_ERR_COUNT. Any number of ranks. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int odd = rank % 2; /* odd ranks call the int forms */
    int a[16], b[16 * 64];
    for (int root = 0; root < size; root++) {
        for (int i = 0; i < 16; i++) a[i] = rank == root ? 10 * root + i : -1;
        if (odd) OK(MPI_Bcast(a, 16, MPI_INT, root, MPI_COMM_WORLD));
        else OK(MPI_Bcast_c(a, 16, MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < 16; i++) CHECK(a[i] == 10 * root + i);

        for (int i = 0; i < 16; i++) a[i] = rank + i;
        memset(b, 0, sizeof b);
        if (odd) OK(MPI_Reduce(a, b, 16, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
        else OK(MPI_Reduce_c(a, b, 16, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int i = 0; i < 16; i++) CHECK(b[i] == size * (size - 1) / 2 + size * i);

        memset(b, 0, sizeof b);
        if (odd) OK(MPI_Gather(a, 2, MPI_INT, b, 2, MPI_INT, root, MPI_COMM_WORLD));
        else OK(MPI_Gather_c(a, 2, MPI_INT, b, 2, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++) CHECK(b[2 * r] == r && b[2 * r + 1] == r + 1);

        for (int i = 0; i < 2 * size; i++) b[i] = 100 * root + i;
        memset(a, 0, sizeof a);
        if (odd) OK(MPI_Scatter(b, 2, MPI_INT, a, 2, MPI_INT, root, MPI_COMM_WORLD));
        else OK(MPI_Scatter_c(b, 2, MPI_INT, a, 2, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(a[0] == 100 * root + 2 * rank && a[1] == 100 * root + 2 * rank + 1);
    }
    for (int i = 0; i < 16; i++) a[i] = rank * i;
    if (odd) OK(MPI_Allreduce(a, b, 16, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    else OK(MPI_Allreduce_c(a, b, 16, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    for (int i = 0; i < 16; i++) CHECK(b[i] == (size - 1) * i);
    OK(MPI_Allreduce_c(MPI_IN_PLACE, a, 16, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < 16; i++) CHECK(a[i] == size * (size - 1) / 2 * i);

    a[0] = rank;
    a[1] = -rank;
    if (odd) OK(MPI_Allgather(a, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD));
    else OK(MPI_Allgather_c(a, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++) CHECK(b[2 * r] == r && b[2 * r + 1] == -r);

    int s[64], t[64];
    for (int r = 0; r < size; r++) s[r] = 1000 * rank + r;
    if (odd) OK(MPI_Alltoall(s, 1, MPI_INT, t, 1, MPI_INT, MPI_COMM_WORLD));
    else OK(MPI_Alltoall_c(s, 1, MPI_INT, t, 1, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++) CHECK(t[r] == 1000 * r + rank);

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int cls, e = MPI_Bcast_c(a, -1, MPI_INT, 0, MPI_COMM_WORLD);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    e = MPI_Allreduce_c(a, b, -5, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);

    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("large coll ok\n");
    OK(MPI_Finalize());
    return 0;
}
