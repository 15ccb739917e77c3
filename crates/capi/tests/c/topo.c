/* Cartesian topologies through the C ABI: MPI_Dims_create, MPI_Cart_create and its
 * queries, shifts with a send-receive around the periodic dimension, MPI_Cart_sub,
 * MPI_Cart_map, MPI_Topo_test, and the errors of a bad grid. Any rank count. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));

    int dims[2] = {0, 0};
    OK(MPI_Dims_create(size, 2, dims));
    CHECK(dims[0] * dims[1] == size && dims[0] >= dims[1]);

    int periods[2] = {0, 1};
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart));
    CHECK(cart != MPI_COMM_NULL);
    int status;
    OK(MPI_Topo_test(cart, &status));
    CHECK(status == MPI_CART);
    OK(MPI_Topo_test(MPI_COMM_WORLD, &status));
    CHECK(status == MPI_UNDEFINED);

    int nd, d[2], p[2], c[2], crank, back[2];
    OK(MPI_Cartdim_get(cart, &nd));
    CHECK(nd == 2);
    OK(MPI_Comm_rank(cart, &crank));
    OK(MPI_Cart_get(cart, 2, d, p, c));
    CHECK(d[0] == dims[0] && d[1] == dims[1] && p[0] == 0 && p[1] == 1);
    CHECK(c[0] == crank / dims[1] && c[1] == crank % dims[1]); /* row-major */
    int r;
    OK(MPI_Cart_rank(cart, c, &r));
    CHECK(r == crank);
    OK(MPI_Cart_coords(cart, crank, 2, back));
    CHECK(back[0] == c[0] && back[1] == c[1]);

    /* Non-periodic first dimension: no neighbour off the edge. */
    int src, dst;
    OK(MPI_Cart_shift(cart, 0, 1, &src, &dst));
    CHECK(c[0] == 0 ? src == MPI_PROC_NULL : src == crank - dims[1]);
    CHECK(c[0] == dims[0] - 1 ? dst == MPI_PROC_NULL : dst == crank + dims[1]);
    /* Periodic second dimension: a ring; pass ranks around it. */
    OK(MPI_Cart_shift(cart, 1, 1, &src, &dst));
    CHECK(src != MPI_PROC_NULL && dst != MPI_PROC_NULL);
    int got = -1;
    OK(MPI_Sendrecv(&crank, 1, MPI_INT, dst, 5, &got, 1, MPI_INT, src, 5, cart,
                    MPI_STATUS_IGNORE));
    CHECK(got == src);

    /* The row of this rank: the second dimension kept. */
    int keep[2] = {0, 1};
    MPI_Comm row;
    OK(MPI_Cart_sub(cart, keep, &row));
    int rsize, rrank;
    OK(MPI_Comm_size(row, &rsize));
    OK(MPI_Comm_rank(row, &rrank));
    CHECK(rsize == dims[1] && rrank == c[1]);
    OK(MPI_Cartdim_get(row, &nd));
    CHECK(nd == 1);

    /* A duplicate keeps the grid. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(cart, &dup));
    OK(MPI_Topo_test(dup, &status));
    CHECK(status == MPI_CART);
    int s2, d2;
    OK(MPI_Cart_shift(dup, 1, 1, &s2, &d2));
    CHECK(s2 == src && d2 == dst);
    OK(MPI_Comm_free(&dup));

    int newrank;
    OK(MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &newrank));
    CHECK(newrank == rank);

    /* Errors come back under MPI_ERRORS_RETURN: a grid larger than the communicator,
     * a query on a communicator without one, coordinates off a non-periodic edge. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN));
    int big[2] = {size + 1, 1};
    MPI_Comm none;
    int e = MPI_Cart_create(MPI_COMM_WORLD, 2, big, periods, 0, &none);
    int cls;
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_DIMS && none == MPI_COMM_NULL);
    e = MPI_Cartdim_get(MPI_COMM_WORLD, &nd);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_TOPOLOGY);
    int off[2] = {dims[0], 0};
    e = MPI_Cart_rank(cart, off, &r);
    CHECK(e != MPI_SUCCESS);
    int three[1] = {3};
    CHECK(MPI_Dims_create(7, 1, three) != MPI_SUCCESS); /* 7 is no multiple of 3 */

    OK(MPI_Comm_free(&row));
    OK(MPI_Comm_free(&cart));
    if (rank == 0) printf("topo ok\n");
    OK(MPI_Finalize());
    return 0;
}
