/* MPI_Allreduce at every size from 1 element to 3 MiB (the board splits the combining
 * from 8 KiB, also with two ranks): sums and maxima right, in place too, and the
 * doubles bit-identical on every rank. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    int bad = 0;
    for (int n = 1; n <= (1 << 20); n = n * 3 + 1) {
        int *a = malloc(n * sizeof(int)), *r = malloc(n * sizeof(int));
        double *d = malloc(n * sizeof(double)), *dr = malloc(n * sizeof(double)), *other = malloc(n * sizeof(double));
        for (int i = 0; i < n; i++) { a[i] = i * (rank + 1); d[i] = 0.1 * i + rank * 1e-3 + 1.0 / (i + 1 + rank); }
        MPI_Allreduce(a, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) if (r[i] != i * size * (size + 1) / 2) { bad++; break; }
        MPI_Allreduce(d, dr, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        /* every rank's result bit-identical: compare with rank 0's */
        memcpy(other, dr, n * sizeof(double));
        MPI_Bcast(other, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (memcmp(other, dr, n * sizeof(double))) bad++;
        MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) if (a[i] != i * size) { bad++; break; }
        free(a); free(r); free(d); free(dr); free(other);
    }
    int tb; MPI_Allreduce(&bad, &tb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(tb == 0);
    if (rank == 0)
        printf("allreduce_sizes ok\n");
    MPI_Finalize();
    return 0;
}
