/* Persistent collectives (MPI-4 *_init), each started many times with new data, through
 * MPI_Start/MPI_Startall and completed by MPI_Wait/MPI_Test/MPI_Waitall; derived
 * datatypes freed right after the _init call (persistent collectives and a persistent
 * send/receive keep their own copy); neighbour collectives, blocking, nonblocking
 * (MPI_Ineighbor_*) and persistent, including alltoallw, on a periodic ring; persistent
 * collectives started in different orders on different members. Any number of ranks. */
#include "check.h"
#include <string.h>

#define ROUNDS 12
#define N 5

static int rank, size;

static void rooted(void) {
    int root = size - 1;
    int bc[N], red[N], rsum[N], gath[64 * N], scat[64 * N], part[N];
    MPI_Request r[4];
    MPI_Datatype pair; /* two ints, 3 apart: freed at once after the _init calls */
    OK(MPI_Type_vector(2, 1, 3, MPI_INT, &pair));
    OK(MPI_Type_commit(&pair));
    int vec[6];
    MPI_Request rv;
    OK(MPI_Bcast_init(vec, 1, pair, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rv));
    OK(MPI_Type_free(&pair));
    CHECK(pair == MPI_DATATYPE_NULL);
    OK(MPI_Bcast_init(bc, N, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
    OK(MPI_Reduce_init(red, rsum, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
    OK(MPI_Gather_init(part, N, MPI_INT, gath, N, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &r[2]));
    OK(MPI_Scatter_init(scat, N, MPI_INT, part, N, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &r[3]));
    for (int it = 0; it < ROUNDS; it++) {
        for (int i = 0; i < N; i++) {
            bc[i] = rank == root ? 1000 * it + i : -1;
            red[i] = rank + it + i;
            part[i] = 100 * rank + it + i;
        }
        for (int i = 0; i < 6; i++) vec[i] = rank == 0 ? 10 * it + i : -1;
        OK(MPI_Start(&r[0]));
        OK(MPI_Start(&rv));
        OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        CHECK(r[0] != MPI_REQUEST_NULL);
        OK(MPI_Wait(&rv, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++) CHECK(bc[i] == 1000 * it + i);
        CHECK(vec[0] == 10 * it && vec[3] == 10 * it + 3);
        if (rank != 0) CHECK(vec[1] == -1 && vec[2] == -1 && vec[4] == -1);
        /* Reduce and Gather together, completed by polling MPI_Test. */
        OK(MPI_Startall(2, &r[1]));
        int done = 0;
        while (!done) OK(MPI_Testall(2, &r[1], &done, MPI_STATUSES_IGNORE));
        if (rank == root) {
            for (int i = 0; i < N; i++)
                CHECK(rsum[i] == size * (it + i) + size * (size - 1) / 2);
            for (int p = 0; p < size; p++)
                for (int i = 0; i < N; i++) CHECK(gath[p * N + i] == 100 * p + it + i);
        }
        for (int i = 0; i < size * N; i++) scat[i] = rank == root ? 7000 + 10 * it + i : -1;
        OK(MPI_Start(&r[3]));
        OK(MPI_Wait(&r[3], MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++) CHECK(part[i] == 7000 + 10 * it + rank * N + i);
    }
    for (int i = 0; i < 4; i++) OK(MPI_Request_free(&r[i]));
    OK(MPI_Request_free(&rv));
    CHECK(rv == MPI_REQUEST_NULL);
}

static void all(void) {
    int s[N] = {0}, ar[N], sc[N], ex[N], ag[64 * N], a2s[64], a2r[64], rsb[2], rs[2], *rsin;
    int counts[64], vcounts[64], vdispls[64], agv[64 * 3];
    MPI_Datatype types[64];
    int wcounts[64], wdispls[64], w2s[64], w2r[64];
    rsin = malloc(sizeof(int) * 2 * size);
    for (int p = 0; p < size; p++) {
        counts[p] = 2;
        vcounts[p] = 1 + p % 3;
        vdispls[p] = 3 * p;
        types[p] = MPI_INT;
        wcounts[p] = 1;
        wdispls[p] = (int)(p * sizeof(int));
    }
    MPI_Request r[12];
    int nr = 0;
    OK(MPI_Allreduce_init(s, ar, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Scan_init(s, sc, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Exscan_init(s, ex, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Allgather_init(s, N, MPI_INT, ag, N, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Alltoall_init(a2s, 1, MPI_INT, a2r, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Reduce_scatter_block_init(rsin, rsb, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Reduce_scatter_init(rsin, rs, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Allgatherv_init(s, 1 + rank % 3, MPI_INT, agv, vcounts, vdispls, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Alltoallw_init(w2s, wcounts, wdispls, types, w2r, wcounts, wdispls, types, MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[nr++]));
    /* The arrays were copied at the _init calls. */
    for (int p = 0; p < size; p++) counts[p] = vcounts[p] = wcounts[p] = -7;
    for (int it = 0; it < ROUNDS; it++) {
        for (int i = 0; i < N; i++) s[i] = rank * it + i;
        for (int p = 0; p < size; p++) {
            a2s[p] = 1000 * rank + 10 * p + it;
            w2s[p] = 2000 * rank + 10 * p + it;
            rsin[2 * p] = rank + p + it;
            rsin[2 * p + 1] = it;
        }
        memset(ex, 0, sizeof ex);
        OK(MPI_Startall(nr, r));
        OK(MPI_Waitall(nr, r, MPI_STATUSES_IGNORE));
        for (int i = 0; i < nr; i++) CHECK(r[i] != MPI_REQUEST_NULL);
        int tri = 0;
        for (int p = 0; p < rank; p++) tri += p;
        for (int i = 0; i < N; i++) {
            CHECK(ar[i] == (size - 1) * it + i);
            CHECK(sc[i] == (tri + rank) * it + (rank + 1) * i);
            if (rank > 0) CHECK(ex[i] == tri * it + rank * i);
        }
        for (int p = 0; p < size; p++) {
            for (int i = 0; i < N; i++) CHECK(ag[p * N + i] == p * it + i);
            for (int i = 0; i < 1 + p % 3; i++) CHECK(agv[3 * p + i] == p * it + i);
            CHECK(a2r[p] == 1000 * p + 10 * rank + it);
            CHECK(w2r[p] == 2000 * p + 10 * rank + it);
        }
        int tot = 0;
        for (int p = 0; p < size; p++) tot += p + rank + it;
        CHECK(rsb[0] == tot && rsb[1] == size * it);
        CHECK(rs[0] == tot && rs[1] == size * it);
    }
    for (int i = 0; i < nr; i++) OK(MPI_Request_free(&r[i]));
    free(rsin);
}

/* A persistent send and receive of a derived type freed right after MPI_*_init. */
static void freed_type_p2p(void) {
    if (size < 2 || rank > 1) return;
    MPI_Datatype t;
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    int buf[6];
    MPI_Request r;
    if (rank == 0)
        OK(MPI_Send_init(buf, 1, t, 1, 9, MPI_COMM_WORLD, &r));
    else
        OK(MPI_Recv_init(buf, 1, t, 0, 9, MPI_COMM_WORLD, &r));
    OK(MPI_Type_free(&t));
    for (int it = 0; it < ROUNDS; it++) {
        for (int i = 0; i < 6; i++) buf[i] = rank == 0 ? 10 * it + i : -1;
        OK(MPI_Start(&r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        if (rank == 1)
            for (int i = 0; i < 6; i++) CHECK(buf[i] == (i % 2 ? -1 : 10 * it + i));
    }
    OK(MPI_Request_free(&r));
}

static void neighbors(void) {
    MPI_Comm ring;
    int dims[1] = {size}, periods[1] = {1};
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
    int me, lo, hi;
    OK(MPI_Comm_rank(ring, &me));
    OK(MPI_Cart_shift(ring, 0, 1, &lo, &hi));
    int s[2], g[2], a2[2], a2r[2];
    MPI_Request r[2];
    OK(MPI_Neighbor_allgather_init(s, 1, MPI_INT, g, 1, MPI_INT, ring, MPI_INFO_NULL, &r[0]));
    int cnt[2] = {1, 1};
    MPI_Aint dis[2] = {0, sizeof(int)};
    MPI_Datatype ty[2] = {MPI_INT, MPI_INT};
    OK(MPI_Neighbor_alltoallw_init(a2, cnt, dis, ty, a2r, cnt, dis, ty, ring, MPI_INFO_NULL, &r[1]));
    for (int it = 0; it < ROUNDS; it++) {
        s[0] = 10 * me + it;
        a2[0] = 100 * me + it;     /* towards lo */
        a2[1] = 100 * me + 50 + it; /* towards hi */
        OK(MPI_Startall(2, r));
        OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(g[0] == 10 * lo + it && g[1] == 10 * hi + it);
        /* From lo comes what lo sent towards its hi, and the other way. */
        CHECK(a2r[0] == 100 * lo + 50 + it && a2r[1] == 100 * hi + it);
        /* Nonblocking, overlapped with a blocking alltoallw. */
        MPI_Request q;
        int ig[2] = {-1, -1}, w[2] = {-1, -1};
        OK(MPI_Ineighbor_alltoall(a2, 1, MPI_INT, ig, 1, MPI_INT, ring, &q));
        OK(MPI_Neighbor_alltoallw(a2, cnt, dis, ty, w, cnt, dis, ty, ring));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK(ig[0] == a2r[0] && ig[1] == a2r[1]);
        CHECK(w[0] == a2r[0] && w[1] == a2r[1]);
    }
    OK(MPI_Request_free(&r[0]));
    OK(MPI_Request_free(&r[1]));
    OK(MPI_Comm_free(&ring));
}

/* MPI-4 matches persistent collectives at their _init calls: members may start them in
 * different orders. */
static void any_start_order(void) {
    int v = -1, w = -1;
    MPI_Request r[3];
    OK(MPI_Bcast_init(&v, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
    OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
    OK(MPI_Bcast_init(&w, 1, MPI_INT, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r[2]));
    for (int it = 0; it < ROUNDS; it++) {
        if (rank == 0) v = it;
        if (rank == size - 1) w = 2 * it;
        if (rank % 2) {
            for (int i = 2; i >= 0; i--) OK(MPI_Start(&r[i]));
        } else {
            for (int i = 0; i < 3; i++) OK(MPI_Start(&r[i]));
        }
        OK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
        CHECK(v == it && w == 2 * it);
    }
    for (int i = 0; i < 3; i++) OK(MPI_Request_free(&r[i]));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size <= 64);
    rooted();
    all();
    freed_type_p2p();
    neighbors();
    any_start_order();
    /* A persistent collective on an invalid communicator is an error at _init. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Request bad = MPI_REQUEST_NULL;
    int x;
    CHECK(MPI_Bcast_init(&x, 1, MPI_INT, 0, MPI_COMM_NULL, MPI_INFO_NULL, &bad) != MPI_SUCCESS);
    OK(MPI_Finalize());
    if (rank == 0) printf("pcoll ok\n");
    return 0;
}
