/* Reductions on long double (x87 80-bit extended on x86-64): MIN/MAX/SUM/PROD on
 * MPI_LONG_DOUBLE, SUM/PROD on MPI_C_LONG_DOUBLE_COMPLEX (MIN/MAX there are
 * MPI_ERR_OP), MAXLOC/MINLOC on MPI_LONG_DOUBLE_INT, through Allreduce, Reduce, Scan,
 * Iallreduce and Reduce_local. The values differ only beyond double precision (steps of
 * 2^-62 around 1), so an implementation going through double fails. */
#include "check.h"
#include <complex.h>
#include <string.h>

/* 2^-62: below double's precision at 1 (2^-52), within long double's (2^-63). */
static const long double TINY = 0x1p-62L;

/* Rank r's value: 1 + (r + 1) 2^-62, negated on odd ranks when `sign`. */
static long double val(int r, int sign) {
    long double v = 1.0L + (r + 1) * TINY;
    return sign && r % 2 ? -v : v;
}

static int same(long double a, long double b) { return memcmp(&a, &b, 10) == 0; }

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    int rank, size;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK((double)val(0, 0) == (double)val(1, 0)); /* the premise: double cannot tell */

    /* MIN/MAX, positive values: rank 0 has the least, rank size-1 the greatest. */
    long double mine = val(rank, 0), r = 0;
    OK(MPI_Allreduce(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    CHECK(same(r, val(0, 0)));
    OK(MPI_Allreduce(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(same(r, val(size - 1, 0)));
    /* Mixed signs: the minimum is the odd rank of largest magnitude. */
    long double lo = val(0, 1), hi = val(0, 1);
    for (int i = 1; i < size; i++) {
        if (val(i, 1) < lo) lo = val(i, 1);
        if (val(i, 1) > hi) hi = val(i, 1);
    }
    mine = val(rank, 1);
    r = 0;
    OK(MPI_Reduce(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_MIN, size - 1, MPI_COMM_WORLD));
    if (rank == size - 1) CHECK(same(r, lo));
    r = 0;
    OK(MPI_Reduce(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (rank == 0) CHECK(same(r, hi));
    /* Scan: prefix minimum/maximum of the positive values. */
    mine = val(size - 1 - rank, 0); /* decreasing with the rank */
    OK(MPI_Scan(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    CHECK(same(r, val(size - 1 - rank, 0)));
    OK(MPI_Scan(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(same(r, val(size - 1, 0)));
    /* Several elements, in place, nonblocking: ±0, infinities and a denormal. */
    long double v[4] = {rank % 2 ? -0.0L : 0.0L, rank ? 1.0L / 0.0L : 5.0L,
                        rank == 0 ? -1.0L / 0.0L : 2.0L, rank ? 0x1p-16440L : 0x1p-16442L};
    MPI_Request q;
    OK(MPI_Iallreduce(MPI_IN_PLACE, v, 4, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    CHECK(v[0] == 0.0L);
    CHECK(v[1] == 5.0L);
    CHECK(v[2] == -1.0L / 0.0L);
    CHECK(v[3] == 0x1p-16442L && v[3] > 0);

    /* SUM and PROD: exact in long double, folded as ((v0 op v1) op v2)... */
    long double sum = val(0, 1), prod = val(0, 0);
    for (int i = 1; i < size; i++) {
        sum = val(i, 1) + sum;
        prod = val(i, 0) * prod;
    }
    mine = val(rank, 1);
    OK(MPI_Allreduce(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    CHECK(same(r, sum));
    mine = val(rank, 0);
    OK(MPI_Allreduce(&mine, &r, 1, MPI_LONG_DOUBLE, MPI_PROD, MPI_COMM_WORLD));
    CHECK(same(r, prod));
    long double a = 3.0L + TINY, b = 1.0L + TINY;
    OK(MPI_Reduce_local(&a, &b, 1, MPI_LONG_DOUBLE, MPI_SUM));
    CHECK(same(b, 4.0L + 2 * TINY));
    a = 1.0L + TINY;
    b = 1.0L + TINY;
    OK(MPI_Reduce_local(&a, &b, 1, MPI_LONG_DOUBLE, MPI_PROD));
    CHECK(same(b, (1.0L + TINY) * (1.0L + TINY)));
    a = 2.0L;
    b = 0x1p-16445L; /* the least denormal */
    OK(MPI_Reduce_local(&a, &b, 1, MPI_LONG_DOUBLE, MPI_PROD));
    CHECK(b == 0x1p-16444L);

    /* Complex: SUM and PROD; MIN/MAX are not defined there. */
    long double _Complex z = val(rank, 0) + val(rank, 1) * I, zr = 0;
    long double _Complex zs = val(0, 0) + val(0, 1) * I, zp = zs;
    for (int i = 1; i < size; i++) {
        long double _Complex w = val(i, 0) + val(i, 1) * I;
        zs = w + zs;
        long double re = creall(w) * creall(zp) - cimagl(w) * cimagl(zp);
        long double im = creall(w) * cimagl(zp) + cimagl(w) * creall(zp);
        zp = re + im * I;
    }
    OK(MPI_Allreduce(&z, &zr, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
    CHECK(same(creall(zr), creall(zs)) && same(cimagl(zr), cimagl(zs)));
    OK(MPI_Allreduce(&z, &zr, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD));
    CHECK(same(creall(zr), creall(zp)) && same(cimagl(zr), cimagl(zp)));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int e = MPI_Allreduce(&z, &zr, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_MAX, MPI_COMM_WORLD), cls;
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_OP);
    e = MPI_Reduce_local(&z, &zr, 1, MPI_CXX_LONG_DOUBLE_COMPLEX, MPI_MIN);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_OP);

    /* MAXLOC/MINLOC on {long double, int}: ties beyond double precision. */
    struct {
        long double v;
        int i;
    } p = {val(rank, 0), rank}, pr;
    OK(MPI_Allreduce(&p, &pr, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    CHECK(same(pr.v, val(size - 1, 0)) && pr.i == size - 1);
    OK(MPI_Allreduce(&p, &pr, 1, MPI_LONG_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
    CHECK(same(pr.v, val(0, 0)) && pr.i == 0);

    OK(MPI_Finalize());
    if (rank == 0) printf("ldouble ok\n");
    return 0;
}
