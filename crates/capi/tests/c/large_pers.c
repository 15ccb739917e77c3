/* The large-count persistent and neighbour collectives: every *_init_c collective
 * started three times with new data each time (even ranks made theirs with the _init_c
 * form, odd ranks with the int _init form: they match at init), the neighbour _c
 * collectives (blocking, nonblocking, persistent) on a periodic Cartesian ring, and
 * MPI_Type_create_darray_c against MPI_Type_create_darray. Any number of ranks. */
#include "check.h"
#include <string.h>

#define ROUNDS 3
#define NREQ 32

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int odd = rank % 2;
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Info ni = MPI_INFO_NULL;

    /* ---- persistent collectives ---- */
    int ic[8], id[8], iw[8];
    MPI_Count cc[8];
    MPI_Aint ad[8], aw[8];
    MPI_Datatype ts[8];
    for (int r = 0; r < size; r++) {
        ic[r] = 2; cc[r] = 2;
        id[r] = 2 * (size - 1 - r); ad[r] = id[r]; /* reversed blocks */
        iw[r] = (int)(r * sizeof(int)); aw[r] = iw[r];
        ts[r] = MPI_INT;
    }
    int one[8], bc[4], ga[32], sc[2], ag[32], at[32], red[4], all[4], rs[2], rsb[2];
    int sn[4], ex[4], gv[32], sv[2], agv[32], atv[32], atw[8], src[32];
    MPI_Count two = 2, four = 4;
    MPI_Request q[NREQ];
    int nq = 0;
#define INIT(intcall, ccall) OK(odd ? (intcall) : (ccall))
    INIT(MPI_Bcast_init(bc, 4, MPI_INT, 0, w, ni, &q[nq]),
         MPI_Bcast_init_c(bc, four, MPI_INT, 0, w, ni, &q[nq])); nq++;
    INIT(MPI_Gather_init(one, 2, MPI_INT, ga, 2, MPI_INT, size - 1, w, ni, &q[nq]),
         MPI_Gather_init_c(one, two, MPI_INT, ga, two, MPI_INT, size - 1, w, ni, &q[nq])); nq++;
    INIT(MPI_Scatter_init(src, 2, MPI_INT, sc, 2, MPI_INT, 0, w, ni, &q[nq]),
         MPI_Scatter_init_c(src, two, MPI_INT, sc, two, MPI_INT, 0, w, ni, &q[nq])); nq++;
    INIT(MPI_Allgather_init(one, 2, MPI_INT, ag, 2, MPI_INT, w, ni, &q[nq]),
         MPI_Allgather_init_c(one, two, MPI_INT, ag, two, MPI_INT, w, ni, &q[nq])); nq++;
    INIT(MPI_Alltoall_init(src, 2, MPI_INT, at, 2, MPI_INT, w, ni, &q[nq]),
         MPI_Alltoall_init_c(src, two, MPI_INT, at, two, MPI_INT, w, ni, &q[nq])); nq++;
    INIT(MPI_Reduce_init(one, red, 4, MPI_INT, MPI_SUM, 0, w, ni, &q[nq]),
         MPI_Reduce_init_c(one, red, four, MPI_INT, MPI_SUM, 0, w, ni, &q[nq])); nq++;
    INIT(MPI_Allreduce_init(one, all, 4, MPI_INT, MPI_MAX, w, ni, &q[nq]),
         MPI_Allreduce_init_c(one, all, four, MPI_INT, MPI_MAX, w, ni, &q[nq])); nq++;
    INIT(MPI_Reduce_scatter_init(src, rs, ic, MPI_INT, MPI_SUM, w, ni, &q[nq]),
         MPI_Reduce_scatter_init_c(src, rs, cc, MPI_INT, MPI_SUM, w, ni, &q[nq])); nq++;
    INIT(MPI_Reduce_scatter_block_init(src, rsb, 2, MPI_INT, MPI_SUM, w, ni, &q[nq]),
         MPI_Reduce_scatter_block_init_c(src, rsb, two, MPI_INT, MPI_SUM, w, ni, &q[nq])); nq++;
    INIT(MPI_Scan_init(one, sn, 4, MPI_INT, MPI_SUM, w, ni, &q[nq]),
         MPI_Scan_init_c(one, sn, four, MPI_INT, MPI_SUM, w, ni, &q[nq])); nq++;
    INIT(MPI_Exscan_init(one, ex, 4, MPI_INT, MPI_SUM, w, ni, &q[nq]),
         MPI_Exscan_init_c(one, ex, four, MPI_INT, MPI_SUM, w, ni, &q[nq])); nq++;
    INIT(MPI_Gatherv_init(one, 2, MPI_INT, gv, ic, id, MPI_INT, 0, w, ni, &q[nq]),
         MPI_Gatherv_init_c(one, two, MPI_INT, gv, cc, ad, MPI_INT, 0, w, ni, &q[nq])); nq++;
    INIT(MPI_Scatterv_init(src, ic, id, MPI_INT, sv, 2, MPI_INT, 0, w, ni, &q[nq]),
         MPI_Scatterv_init_c(src, cc, ad, MPI_INT, sv, two, MPI_INT, 0, w, ni, &q[nq])); nq++;
    INIT(MPI_Allgatherv_init(one, 2, MPI_INT, agv, ic, id, MPI_INT, w, ni, &q[nq]),
         MPI_Allgatherv_init_c(one, two, MPI_INT, agv, cc, ad, MPI_INT, w, ni, &q[nq])); nq++;
    INIT(MPI_Alltoallv_init(src, ic, id, MPI_INT, atv, ic, id, MPI_INT, w, ni, &q[nq]),
         MPI_Alltoallv_init_c(src, cc, ad, MPI_INT, atv, cc, ad, MPI_INT, w, ni, &q[nq])); nq++;
    int ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    MPI_Count conesc[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    INIT(MPI_Alltoallw_init(src, ones, iw, ts, atw, ones, iw, ts, w, ni, &q[nq]),
         MPI_Alltoallw_init_c(src, conesc, aw, ts, atw, conesc, aw, ts, w, ni, &q[nq])); nq++;
    /* the arrays were copied at init */
    for (int r = 0; r < size; r++) { ic[r] = -1; cc[r] = -1; id[r] = -99; ad[r] = -99; }
    for (int k = 0; k < ROUNDS; k++) {
        int base = 1000 * k;
        for (int i = 0; i < 4; i++) {
            bc[i] = rank == 0 ? base + i : -1;
            one[i] = base + rank + i;
        }
        for (int i = 0; i < 2 * size; i++) src[i] = base + 10 * rank + i;
        OK(MPI_Startall(nq, q));
        OK(MPI_Waitall(nq, q, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 4; i++) CHECK(bc[i] == base + i);
        if (rank == size - 1)
            for (int r = 0; r < size; r++) CHECK(ga[2 * r] == base + r && ga[2 * r + 1] == base + r + 1);
        CHECK(sc[0] == base + 2 * rank && sc[1] == base + 2 * rank + 1);
        for (int r = 0; r < size; r++) CHECK(ag[2 * r] == base + r);
        for (int r = 0; r < size; r++)
            CHECK(at[2 * r] == base + 10 * r + 2 * rank && at[2 * r + 1] == base + 10 * r + 2 * rank + 1);
        if (rank == 0)
            for (int i = 0; i < 4; i++) CHECK(red[i] == size * (base + i) + size * (size - 1) / 2);
        for (int i = 0; i < 4; i++) CHECK(all[i] == base + size - 1 + i);
        for (int i = 0; i < 2; i++) {
            int v = size * (base + 2 * rank + i) + 10 * size * (size - 1) / 2;
            CHECK(rs[i] == v && rsb[i] == v);
        }
        for (int i = 0; i < 4; i++) CHECK(sn[i] == (rank + 1) * (base + i) + rank * (rank + 1) / 2);
        if (rank > 0)
            for (int i = 0; i < 4; i++) CHECK(ex[i] == rank * (base + i) + (rank - 1) * rank / 2);
        for (int r = 0; r < size; r++) {
            int at_r = 2 * (size - 1 - r);
            if (rank == 0) CHECK(gv[at_r] == base + r && gv[at_r + 1] == base + r + 1);
            CHECK(agv[at_r] == base + r && agv[at_r + 1] == base + r + 1);
            int mine = 2 * (size - 1 - rank);
            CHECK(atv[at_r] == base + 10 * r + mine && atv[at_r + 1] == base + 10 * r + mine + 1);
            CHECK(atw[r] == base + 10 * r + rank);
        }
        int mine = 2 * (size - 1 - rank);
        CHECK(sv[0] == base + mine && sv[1] == base + mine + 1);
    }
    for (int i = 0; i < nq; i++) OK(MPI_Request_free(&q[i]));

    /* ---- neighbour collectives on a periodic ring ---- */
    MPI_Comm ring;
    int dims[1] = {size}, periods[1] = {1};
    OK(MPI_Cart_create(w, 1, dims, periods, 0, &ring));
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int s2[2] = {rank, -rank}, r4[4];
    /* allgather: block 0 from the left, block 1 from the right */
    if (odd) OK(MPI_Neighbor_allgather(s2, 2, MPI_INT, r4, 2, MPI_INT, ring));
    else OK(MPI_Neighbor_allgather_c(s2, 2, MPI_INT, r4, 2, MPI_INT, ring));
    CHECK(r4[0] == left && r4[1] == -left && r4[2] == right && r4[3] == -right);
    /* alltoall: block 0 to the left, block 1 to the right */
    int t2[2] = {100 * rank, 100 * rank + 1}, u2[2];
    if (odd) OK(MPI_Neighbor_alltoall(t2, 1, MPI_INT, u2, 1, MPI_INT, ring));
    else OK(MPI_Neighbor_alltoall_c(t2, 1, MPI_INT, u2, 1, MPI_INT, ring));
    CHECK(u2[0] == 100 * left + 1 && u2[1] == 100 * right);
    /* allgatherv: two from each, the left's block at 2, the right's at 0 */
    int nvc[2] = {2, 2}, nvd[2] = {2, 0};
    MPI_Count nvcc[2] = {2, 2};
    MPI_Aint nvda[2] = {2, 0};
    if (odd) OK(MPI_Neighbor_allgatherv(s2, 2, MPI_INT, r4, nvc, nvd, MPI_INT, ring));
    else OK(MPI_Neighbor_allgatherv_c(s2, 2, MPI_INT, r4, nvcc, nvda, MPI_INT, ring));
    CHECK(r4[2] == left && r4[3] == -left && r4[0] == right && r4[1] == -right);
    /* alltoallv: 1 to the left, 2 to the right; 2 from the left at 1, 1 from the right at 0 */
    int t3[3] = {10 * rank, 10 * rank + 1, 10 * rank + 2}, u3[3];
    int avs[2] = {1, 2}, avsd[2] = {0, 1}, avr[2] = {2, 1}, avrd[2] = {1, 0};
    MPI_Count cavs[2] = {1, 2}, cavr[2] = {2, 1};
    MPI_Aint aavsd[2] = {0, 1}, aavrd[2] = {1, 0};
    if (odd) OK(MPI_Neighbor_alltoallv(t3, avs, avsd, MPI_INT, u3, avr, avrd, MPI_INT, ring));
    else OK(MPI_Neighbor_alltoallv_c(t3, cavs, aavsd, MPI_INT, u3, cavr, aavrd, MPI_INT, ring));
    CHECK(u3[1] == 10 * left + 1 && u3[2] == 10 * left + 2 && u3[0] == 10 * right);
    /* alltoallw: an int each way, byte displacements swapped on receipt */
    int wc[2] = {1, 1};
    MPI_Count wcc[2] = {1, 1};
    MPI_Aint wsd[2] = {0, sizeof(int)}, wrd[2] = {sizeof(int), 0};
    MPI_Datatype wt[2] = {MPI_INT, MPI_INT};
    if (odd) OK(MPI_Neighbor_alltoallw(t2, wc, wsd, wt, u2, wc, wrd, wt, ring));
    else OK(MPI_Neighbor_alltoallw_c(t2, wcc, wsd, wt, u2, wcc, wrd, wt, ring));
    CHECK(u2[1] == 100 * left + 1 && u2[0] == 100 * right);

    /* nonblocking neighbour _c forms, all started first (even ranks; odd: int forms) */
    int nr4[4], nu2[2], nr4v[4], nu3[3], nw2[2];
    MPI_Request nqr[5];
    if (odd) {
        OK(MPI_Ineighbor_allgather(s2, 2, MPI_INT, nr4, 2, MPI_INT, ring, &nqr[0]));
        OK(MPI_Ineighbor_alltoall(t2, 1, MPI_INT, nu2, 1, MPI_INT, ring, &nqr[1]));
        OK(MPI_Ineighbor_allgatherv(s2, 2, MPI_INT, nr4v, nvc, nvd, MPI_INT, ring, &nqr[2]));
        OK(MPI_Ineighbor_alltoallv(t3, avs, avsd, MPI_INT, nu3, avr, avrd, MPI_INT, ring, &nqr[3]));
        OK(MPI_Ineighbor_alltoallw(t2, wc, wsd, wt, nw2, wc, wrd, wt, ring, &nqr[4]));
    } else {
        OK(MPI_Ineighbor_allgather_c(s2, 2, MPI_INT, nr4, 2, MPI_INT, ring, &nqr[0]));
        OK(MPI_Ineighbor_alltoall_c(t2, 1, MPI_INT, nu2, 1, MPI_INT, ring, &nqr[1]));
        OK(MPI_Ineighbor_allgatherv_c(s2, 2, MPI_INT, nr4v, nvcc, nvda, MPI_INT, ring, &nqr[2]));
        OK(MPI_Ineighbor_alltoallv_c(t3, cavs, aavsd, MPI_INT, nu3, cavr, aavrd, MPI_INT, ring, &nqr[3]));
        OK(MPI_Ineighbor_alltoallw_c(t2, wcc, wsd, wt, nw2, wcc, wrd, wt, ring, &nqr[4]));
    }
    OK(MPI_Waitall(5, nqr, MPI_STATUSES_IGNORE));
    CHECK(nr4[0] == left && nr4[2] == right);
    CHECK(nu2[0] == 100 * left + 1 && nu2[1] == 100 * right);
    CHECK(nr4v[2] == left && nr4v[0] == right);
    CHECK(nu3[1] == 10 * left + 1 && nu3[2] == 10 * left + 2 && nu3[0] == 10 * right);
    CHECK(nw2[1] == 100 * left + 1 && nw2[0] == 100 * right);

    /* persistent neighbour _c forms, started several times */
    int pr4[4], pu2[2], pr4v[4], pu3[3], pw2[2];
    MPI_Request pq[5];
    if (odd) {
        OK(MPI_Neighbor_allgather_init(s2, 2, MPI_INT, pr4, 2, MPI_INT, ring, ni, &pq[0]));
        OK(MPI_Neighbor_alltoall_init(t2, 1, MPI_INT, pu2, 1, MPI_INT, ring, ni, &pq[1]));
        OK(MPI_Neighbor_allgatherv_init(s2, 2, MPI_INT, pr4v, nvc, nvd, MPI_INT, ring, ni, &pq[2]));
        OK(MPI_Neighbor_alltoallv_init(t3, avs, avsd, MPI_INT, pu3, avr, avrd, MPI_INT, ring, ni, &pq[3]));
        OK(MPI_Neighbor_alltoallw_init(t2, wc, wsd, wt, pw2, wc, wrd, wt, ring, ni, &pq[4]));
    } else {
        OK(MPI_Neighbor_allgather_init_c(s2, 2, MPI_INT, pr4, 2, MPI_INT, ring, ni, &pq[0]));
        OK(MPI_Neighbor_alltoall_init_c(t2, 1, MPI_INT, pu2, 1, MPI_INT, ring, ni, &pq[1]));
        OK(MPI_Neighbor_allgatherv_init_c(s2, 2, MPI_INT, pr4v, nvcc, nvda, MPI_INT, ring, ni, &pq[2]));
        OK(MPI_Neighbor_alltoallv_init_c(t3, cavs, aavsd, MPI_INT, pu3, cavr, aavrd, MPI_INT, ring, ni, &pq[3]));
        OK(MPI_Neighbor_alltoallw_init_c(t2, wcc, wsd, wt, pw2, wcc, wrd, wt, ring, ni, &pq[4]));
    }
    for (int k = 0; k < ROUNDS; k++) {
        int b = 1000 * k;
        s2[0] = b + rank; s2[1] = b - rank;
        t2[0] = b + 100 * rank; t2[1] = b + 100 * rank + 1;
        for (int i = 0; i < 3; i++) t3[i] = b + 10 * rank + i;
        OK(MPI_Startall(5, pq));
        OK(MPI_Waitall(5, pq, MPI_STATUSES_IGNORE));
        CHECK(pr4[0] == b + left && pr4[1] == b - left && pr4[2] == b + right);
        CHECK(pu2[0] == b + 100 * left + 1 && pu2[1] == b + 100 * right);
        CHECK(pr4v[2] == b + left && pr4v[0] == b + right);
        CHECK(pu3[1] == b + 10 * left + 1 && pu3[2] == b + 10 * left + 2 && pu3[0] == b + 10 * right);
        CHECK(pw2[1] == b + 100 * left + 1 && pw2[0] == b + 100 * right);
    }
    for (int i = 0; i < 5; i++) OK(MPI_Request_free(&pq[i]));
    OK(MPI_Comm_free(&ring));

    /* ---- MPI_Type_create_darray_c: the same type as the int form ---- */
    int gi[2] = {8, 6}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, ps[2] = {size, 1};
    MPI_Count gc[2] = {8, 6};
    MPI_Datatype d1, d2;
    OK(MPI_Type_create_darray(size, rank, 2, gi, dist, darg, ps, MPI_ORDER_C, MPI_INT, &d1));
    OK(MPI_Type_create_darray_c(size, rank, 2, gc, dist, darg, ps, MPI_ORDER_C, MPI_INT, &d2));
    OK(MPI_Type_commit(&d1));
    OK(MPI_Type_commit(&d2));
    MPI_Count s1, sz2, lb1, lb2, e1, e2;
    OK(MPI_Type_size_c(d1, &s1));
    OK(MPI_Type_size_c(d2, &sz2));
    OK(MPI_Type_get_extent_c(d1, &lb1, &e1));
    OK(MPI_Type_get_extent_c(d2, &lb2, &e2));
    CHECK(s1 == sz2 && lb1 == lb2 && e1 == e2 && e1 == 48 * (MPI_Count)sizeof(int));
    int g[48];
    for (int i = 0; i < 48; i++) g[i] = i;
    char p1[256], p2[256];
    int pos1 = 0, pos2 = 0;
    OK(MPI_Pack(g, 1, d1, p1, sizeof p1, &pos1, w));
    OK(MPI_Pack(g, 1, d2, p2, sizeof p2, &pos2, w));
    CHECK(pos1 == pos2 && pos1 == (int)s1 && memcmp(p1, p2, (size_t)pos1) == 0);
    OK(MPI_Type_free(&d1));
    OK(MPI_Type_free(&d2));

    OK(MPI_Barrier(w));
    if (rank == 0) printf("large pers ok\n");
    OK(MPI_Finalize());
    return 0;
}
