/* The remaining large-count (_c) collectives, results checked, even ranks calling the
 * _c form and odd ranks the int form of the same operation (they share one path and
 * match): the blocking v-collectives, Alltoallw, the reduce-scatters, scans,
 * Reduce_local_c and user operations from Op_create_c (a non-commutative one, folded
 * in rank order, used by int and _c reductions alike); every nonblocking collective;
 * 64-bit displacements (MPI_BOTTOM with absolute addresses in Allgatherv_c); a
 * contiguous type of large count through Allgatherv_c with MPI_Count counts; a count
 * past INT_MAX where the core's partitions take int (MPI_ERR_COUNT, not truncated).
 * Any number of ranks. */
#include "check.h"
#include <string.h>

#define N 64

/* inout = in * 10 + inout, elementwise on int: not commutative. */
static void digits_c(void *in, void *io, MPI_Count *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = io;
    for (MPI_Count i = 0; i < *len; i++) b[i] = a[i] * 10 + b[i];
}

static void sum_int(void *in, void *io, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = io;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

/* The rank-order fold of rank values 0..k with digits_c: sum r * 10^(k - r). */
static int digits_upto(int k) {
    int v = 0;
    for (int r = 0; r <= k; r++) v = v * 10 + r;
    return v;
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int odd = rank % 2; /* odd ranks call the int forms */
    MPI_Comm w = MPI_COMM_WORLD;
    int a[N], b[N * 8];
    int ic[16], id[16], ic2[16], id2[16];
    MPI_Count cc[16], cc2[16];
    MPI_Aint ad[16], ad2[16];

    /* Gatherv / Scatterv: member r has r + 1 elements, stored reversed at the root. */
    for (int root = 0; root < size; root++) {
        int off = 0;
        for (int r = size - 1; r >= 0; r--) {
            ic[r] = r + 1; id[r] = off; cc[r] = r + 1; ad[r] = off;
            off += r + 1;
        }
        for (int i = 0; i < N; i++) a[i] = 100 * rank + i;
        memset(b, 0, sizeof b);
        if (odd) OK(MPI_Gatherv(a, rank + 1, MPI_INT, b, ic, id, MPI_INT, root, w));
        else OK(MPI_Gatherv_c(a, rank + 1, MPI_INT, b, cc, ad, MPI_INT, root, w));
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i <= r; i++) CHECK(b[id[r] + i] == 100 * r + i);

        for (int i = 0; i < off; i++) b[i] = 1000 * root + i;
        memset(a, 0, sizeof a);
        if (odd) OK(MPI_Scatterv(b, ic, id, MPI_INT, a, rank + 1, MPI_INT, root, w));
        else OK(MPI_Scatterv_c(b, cc, ad, MPI_INT, a, rank + 1, MPI_INT, root, w));
        for (int i = 0; i <= rank; i++) CHECK(a[i] == 1000 * root + id[rank] + i);
    }

    /* Allgatherv: in order, and in place. */
    int off = 0;
    for (int r = 0; r < size; r++) {
        ic[r] = 2 * r + 1; id[r] = off; cc[r] = ic[r]; ad[r] = off;
        off += ic[r] + 1; /* a gap between blocks */
    }
    for (int i = 0; i < N; i++) a[i] = 10 * rank + i;
    memset(b, 0, sizeof b);
    if (odd) OK(MPI_Allgatherv(a, 2 * rank + 1, MPI_INT, b, ic, id, MPI_INT, w));
    else OK(MPI_Allgatherv_c(a, 2 * rank + 1, MPI_INT, b, cc, ad, MPI_INT, w));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < ic[r]; i++) CHECK(b[id[r] + i] == 10 * r + i);
    memset(b, 0, sizeof b);
    for (int i = 0; i < ic[rank]; i++) b[id[rank] + i] = -rank - i;
    if (odd) OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_INT, b, ic, id, MPI_INT, w));
    else OK(MPI_Allgatherv_c(MPI_IN_PLACE, 0, MPI_INT, b, cc, ad, MPI_INT, w));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < ic[r]; i++) CHECK(b[id[r] + i] == -r - i);

    /* Alltoallv: rank s sends s + r + 1 elements to r. */
    int so = 0, ro = 0;
    for (int r = 0; r < size; r++) {
        ic[r] = rank + r + 1; id[r] = so; cc[r] = ic[r]; ad[r] = so; so += ic[r];
        ic2[r] = r + rank + 1; id2[r] = ro; cc2[r] = ic2[r]; ad2[r] = ro; ro += ic2[r];
    }
    for (int i = 0; i < so; i++) a[i] = 1000 * rank + i;
    memset(b, 0, sizeof b);
    if (odd) OK(MPI_Alltoallv(a, ic, id, MPI_INT, b, ic2, id2, MPI_INT, w));
    else OK(MPI_Alltoallv_c(a, cc, ad, MPI_INT, b, cc2, ad2, MPI_INT, w));
    for (int r = 0; r < size; r++) {
        int sent_at = 0; /* where r's block for me starts in r's send buffer */
        for (int q = 0; q < rank; q++) sent_at += r + q + 1;
        for (int i = 0; i < ic2[r]; i++) CHECK(b[id2[r] + i] == 1000 * r + sent_at + i);
    }

    /* Alltoallw: one int to every rank, byte displacements; a double back. */
    MPI_Datatype ts[16], ts2[16];
    for (int r = 0; r < size; r++) {
        ic[r] = 1; id[r] = (int)(r * sizeof(int)); cc[r] = 1; ad[r] = id[r];
        ic2[r] = 1; id2[r] = (int)(r * sizeof(int)); cc2[r] = 1; ad2[r] = id2[r];
        ts[r] = MPI_INT; ts2[r] = MPI_INT;
        a[r] = 100 * rank + r;
    }
    memset(b, 0, sizeof b);
    if (odd) OK(MPI_Alltoallw(a, ic, id, ts, b, ic2, id2, ts2, w));
    else OK(MPI_Alltoallw_c(a, cc, ad, ts, b, cc2, ad2, ts2, w));
    for (int r = 0; r < size; r++) CHECK(b[r] == 100 * r + rank);

    /* User operations: digits_c (MPI_User_function_c, not commutative) and sum_int. */
    MPI_Op digits, sum;
    OK(MPI_Op_create_c(digits_c, 0, &digits));
    OK(MPI_Op_create(sum_int, 1, &sum));
    int commute = 1;
    OK(MPI_Op_commutative(digits, &commute));
    CHECK(commute == 0);
    for (int i = 0; i < 4; i++) a[i] = rank;
    if (odd) OK(MPI_Allreduce(a, b, 4, MPI_INT, digits, w));
    else OK(MPI_Allreduce_c(a, b, 4, MPI_INT, digits, w));
    for (int i = 0; i < 4; i++) CHECK(b[i] == digits_upto(size - 1));
    if (odd) OK(MPI_Scan(a, b, 4, MPI_INT, digits, w));
    else OK(MPI_Scan_c(a, b, 4, MPI_INT, digits, w));
    for (int i = 0; i < 4; i++) CHECK(b[i] == digits_upto(rank));
    b[0] = -7;
    if (odd) OK(MPI_Exscan(a, b, 4, MPI_INT, digits, w));
    else OK(MPI_Exscan_c(a, b, 4, MPI_INT, digits, w));
    if (rank > 0)
        for (int i = 0; i < 4; i++) CHECK(b[i] == digits_upto(rank - 1));
    /* The core's Scan/Exscan (MPI_SUM on MPI_INT), mixed forms. */
    for (int i = 0; i < 4; i++) a[i] = rank + i;
    if (odd) OK(MPI_Scan(a, b, 4, MPI_INT, MPI_SUM, w));
    else OK(MPI_Scan_c(a, b, 4, MPI_INT, MPI_SUM, w));
    for (int i = 0; i < 4; i++) CHECK(b[i] == rank * (rank + 1) / 2 + (rank + 1) * i);
    if (odd) OK(MPI_Exscan(a, b, 4, MPI_INT, MPI_SUM, w));
    else OK(MPI_Exscan_c(a, b, 4, MPI_INT, MPI_SUM, w));
    if (rank > 0)
        for (int i = 0; i < 4; i++) CHECK(b[i] == (rank - 1) * rank / 2 + rank * i);

    /* Reduce_local_c with both kinds of user function and a predefined operation. */
    int x[3] = {1, 2, 3}, y[3] = {4, 5, 6};
    OK(MPI_Reduce_local_c(x, y, 3, MPI_INT, digits));
    CHECK(y[0] == 14 && y[1] == 25 && y[2] == 36);
    OK(MPI_Reduce_local_c(x, y, 3, MPI_INT, sum));
    CHECK(y[0] == 15 && y[1] == 27 && y[2] == 39);
    OK(MPI_Reduce_local(x, y, 3, MPI_INT, digits));
    CHECK(y[0] == 25 && y[1] == 47 && y[2] == 69);
    OK(MPI_Reduce_local_c(x, y, 3, MPI_INT, MPI_MAX));
    CHECK(y[0] == 25 && y[2] == 69);

    /* Reduce-scatters: member r gets r + 1 elements (the v form), 2 (the block form). */
    int tot = 0;
    for (int r = 0; r < size; r++) { ic[r] = r + 1; cc[r] = r + 1; tot += r + 1; }
    for (int i = 0; i < tot; i++) a[i] = rank + i;
    memset(b, 0, sizeof b);
    if (odd) OK(MPI_Reduce_scatter(a, b, ic, MPI_INT, MPI_SUM, w));
    else OK(MPI_Reduce_scatter_c(a, b, cc, MPI_INT, MPI_SUM, w));
    int first = rank * (rank + 1) / 2;
    for (int i = 0; i <= rank; i++) CHECK(b[i] == size * (size - 1) / 2 + size * (first + i));
    for (int i = 0; i < tot; i++) a[i] = rank;
    if (odd) OK(MPI_Reduce_scatter(a, b, ic, MPI_INT, digits, w));
    else OK(MPI_Reduce_scatter_c(a, b, cc, MPI_INT, digits, w));
    for (int i = 0; i <= rank; i++) CHECK(b[i] == digits_upto(size - 1));
    for (int i = 0; i < 2 * size; i++) a[i] = rank * i;
    if (odd) OK(MPI_Reduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, w));
    else OK(MPI_Reduce_scatter_block_c(a, b, 2, MPI_INT, MPI_SUM, w));
    for (int i = 0; i < 2; i++) CHECK(b[i] == size * (size - 1) / 2 * (2 * rank + i));
    if (odd) OK(MPI_Reduce_scatter_block(a, b, 2, MPI_INT, sum, w));
    else OK(MPI_Reduce_scatter_block_c(a, b, 2, MPI_INT, sum, w));
    for (int i = 0; i < 2; i++) CHECK(b[i] == size * (size - 1) / 2 * (2 * rank + i));

    /* Nonblocking forms, all started before any is waited for. */
    MPI_Request q[16];
    int nq = 0;
    int bc[4], ga[N], sc[4], ag[N], at[N], ar[4], al[4], sn[4], ex[4], rsb[2], rs[8];
    int gv[N], sv[8], agv[N], atv[N], atw[16];
    int src4[4] = {rank, rank + 1, rank + 2, rank + 3}, all[N], allv[N];
    for (int i = 0; i < 4 * size; i++) all[i] = 10 * rank + i;
    for (int i = 0; i < 4; i++) bc[i] = rank == 0 ? 77 + i : 0;
    if (odd) OK(MPI_Ibcast(bc, 4, MPI_INT, 0, w, &q[nq++]));
    else OK(MPI_Ibcast_c(bc, 4, MPI_INT, 0, w, &q[nq++]));
    if (odd) OK(MPI_Igather(src4, 2, MPI_INT, ga, 2, MPI_INT, 0, w, &q[nq++]));
    else OK(MPI_Igather_c(src4, 2, MPI_INT, ga, 2, MPI_INT, 0, w, &q[nq++]));
    if (odd) OK(MPI_Iscatter(all, 1, MPI_INT, sc, 1, MPI_INT, size - 1, w, &q[nq++]));
    else OK(MPI_Iscatter_c(all, 1, MPI_INT, sc, 1, MPI_INT, size - 1, w, &q[nq++]));
    if (odd) OK(MPI_Iallgather(src4, 3, MPI_INT, ag, 3, MPI_INT, w, &q[nq++]));
    else OK(MPI_Iallgather_c(src4, 3, MPI_INT, ag, 3, MPI_INT, w, &q[nq++]));
    if (odd) OK(MPI_Ialltoall(all, 2, MPI_INT, at, 2, MPI_INT, w, &q[nq++]));
    else OK(MPI_Ialltoall_c(all, 2, MPI_INT, at, 2, MPI_INT, w, &q[nq++]));
    if (odd) OK(MPI_Ireduce(src4, ar, 4, MPI_INT, MPI_SUM, 0, w, &q[nq++]));
    else OK(MPI_Ireduce_c(src4, ar, 4, MPI_INT, MPI_SUM, 0, w, &q[nq++]));
    if (odd) OK(MPI_Iallreduce(src4, al, 4, MPI_INT, digits, w, &q[nq++]));
    else OK(MPI_Iallreduce_c(src4, al, 4, MPI_INT, digits, w, &q[nq++]));
    if (odd) OK(MPI_Iscan(src4, sn, 4, MPI_INT, MPI_SUM, w, &q[nq++]));
    else OK(MPI_Iscan_c(src4, sn, 4, MPI_INT, MPI_SUM, w, &q[nq++]));
    if (odd) OK(MPI_Iexscan(src4, ex, 4, MPI_INT, MPI_SUM, w, &q[nq++]));
    else OK(MPI_Iexscan_c(src4, ex, 4, MPI_INT, MPI_SUM, w, &q[nq++]));
    if (odd) OK(MPI_Ireduce_scatter_block(all, rsb, 2, MPI_INT, MPI_SUM, w, &q[nq++]));
    else OK(MPI_Ireduce_scatter_block_c(all, rsb, 2, MPI_INT, MPI_SUM, w, &q[nq++]));
    /* v-forms: every member 2 elements, reversed blocks */
    for (int r = 0; r < size; r++) {
        ic[r] = 2; id[r] = 2 * (size - 1 - r); cc[r] = 2; ad[r] = id[r];
    }
    if (odd) OK(MPI_Ireduce_scatter(all, rs, ic, MPI_INT, MPI_SUM, w, &q[nq++]));
    else OK(MPI_Ireduce_scatter_c(all, rs, cc, MPI_INT, MPI_SUM, w, &q[nq++]));
    if (odd) OK(MPI_Igatherv(src4, 2, MPI_INT, gv, ic, id, MPI_INT, 0, w, &q[nq++]));
    else OK(MPI_Igatherv_c(src4, 2, MPI_INT, gv, cc, ad, MPI_INT, 0, w, &q[nq++]));
    if (odd) OK(MPI_Iscatterv(all, ic, id, MPI_INT, sv, 2, MPI_INT, 0, w, &q[nq++]));
    else OK(MPI_Iscatterv_c(all, cc, ad, MPI_INT, sv, 2, MPI_INT, 0, w, &q[nq++]));
    if (odd) OK(MPI_Iallgatherv(src4, 2, MPI_INT, agv, ic, id, MPI_INT, w, &q[nq++]));
    else OK(MPI_Iallgatherv_c(src4, 2, MPI_INT, agv, cc, ad, MPI_INT, w, &q[nq++]));
    if (odd) OK(MPI_Ialltoallv(all, ic, id, MPI_INT, atv, ic, id, MPI_INT, w, &q[nq++]));
    else OK(MPI_Ialltoallv_c(all, cc, ad, MPI_INT, atv, cc, ad, MPI_INT, w, &q[nq++]));
    for (int r = 0; r < size; r++) {
        ic2[r] = 1; id2[r] = (int)(r * sizeof(int)); cc2[r] = 1; ad2[r] = id2[r];
        ts[r] = MPI_INT;
    }
    if (odd) OK(MPI_Ialltoallw(all, ic2, id2, ts, atw, ic2, id2, ts, w, &q[nq++]));
    else OK(MPI_Ialltoallw_c(all, cc2, ad2, ts, atw, cc2, ad2, ts, w, &q[nq++]));
    OK(MPI_Waitall(nq, q, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(bc[i] == 77 + i);
    if (rank == 0)
        for (int r = 0; r < size; r++) CHECK(ga[2 * r] == r && ga[2 * r + 1] == r + 1);
    CHECK(sc[0] == 10 * (size - 1) + rank);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 3; i++) CHECK(ag[3 * r + i] == r + i);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 2; i++) CHECK(at[2 * r + i] == 10 * r + 2 * rank + i);
    if (rank == 0)
        for (int i = 0; i < 4; i++) CHECK(ar[i] == size * (size - 1) / 2 + size * i);
    /* digits of (r + i) over r in rank order */
    for (int i = 0; i < 4; i++) {
        int v = 0;
        for (int r = 0; r < size; r++) v = v * 10 + r + i;
        CHECK(al[i] == v);
    }
    for (int i = 0; i < 4; i++) CHECK(sn[i] == rank * (rank + 1) / 2 + (rank + 1) * i);
    if (rank > 0)
        for (int i = 0; i < 4; i++) CHECK(ex[i] == (rank - 1) * rank / 2 + rank * i);
    for (int i = 0; i < 2; i++)
        CHECK(rsb[i] == 10 * size * (size - 1) / 2 + size * (2 * rank + i));
    for (int i = 0; i < 2; i++)
        CHECK(rs[i] == 10 * size * (size - 1) / 2 + size * (2 * rank + i));
    if (rank == 0)
        for (int r = 0; r < size; r++)
            CHECK(gv[id[r]] == r && gv[id[r] + 1] == r + 1);
    CHECK(sv[0] == id[rank] && sv[1] == id[rank] + 1); /* root 0's all[] */
    for (int r = 0; r < size; r++) CHECK(agv[id[r]] == r && agv[id[r] + 1] == r + 1);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 2; i++) CHECK(atv[id[r] + i] == 10 * r + id[rank] + i);
    for (int r = 0; r < size; r++) CHECK(atw[r] == 10 * r + rank);

    /* 64-bit displacements: MPI_BOTTOM and absolute addresses (past any int). */
    MPI_Aint addr[16];
    for (int r = 0; r < size; r++) {
        OK(MPI_Get_address(&allv[3 * r], &addr[r]));
        cc[r] = 3 * sizeof(int);
    }
    CHECK(addr[0] > (MPI_Aint)0x7fffffff || addr[0] < 0 || sizeof(void *) == 4);
    int mine3[3] = {rank, 2 * rank, 3 * rank};
    OK(MPI_Allgatherv_c(mine3, 3 * sizeof(int), MPI_BYTE, MPI_BOTTOM, cc, addr, MPI_BYTE, w));
    for (int r = 0; r < size; r++)
        CHECK(allv[3 * r] == r && allv[3 * r + 1] == 2 * r && allv[3 * r + 2] == 3 * r);

    /* A contiguous type of large count (built by Type_contiguous_c), MPI_Count counts. */
    MPI_Count big = (MPI_Count)1 << 18; /* ints per element: 1 MiB */
    MPI_Datatype chunk;
    OK(MPI_Type_contiguous_c(big, MPI_INT, &chunk));
    OK(MPI_Type_commit(&chunk));
    MPI_Count csz;
    OK(MPI_Type_size_c(chunk, &csz));
    CHECK(csz == big * (MPI_Count)sizeof(int));
    int *cs = malloc((size_t)csz), *cr = malloc((size_t)csz * size);
    CHECK(cs && cr);
    for (MPI_Count i = 0; i < big; i++) cs[i] = (int)(rank ^ i);
    for (int r = 0; r < size; r++) { cc[r] = 1; ad[r] = size - 1 - r; }
    OK(MPI_Allgatherv_c(cs, 1, chunk, cr, cc, ad, chunk, w));
    for (int r = 0; r < size; r++)
        for (MPI_Count i = 0; i < big; i += 4099)
            CHECK(cr[(size - 1 - r) * big + i] == (int)(r ^ i));
    free(cs);
    free(cr);
    OK(MPI_Type_free(&chunk));

    /* Where the core's partitions count in int: a count past INT_MAX is MPI_ERR_COUNT. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_Count huge = (MPI_Count)1 << 31;
    MPI_Aint zero = 0;
    int cls, e = MPI_Allgatherv_c(MPI_IN_PLACE, 0, MPI_BYTE, b, &huge, &zero, MPI_BYTE,
                                  MPI_COMM_SELF);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);
    MPI_Count neg = -1;
    e = MPI_Gatherv_c(a, 1, MPI_INT, b, &neg, &zero, MPI_INT, 0, MPI_COMM_SELF);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_COUNT);

    OK(MPI_Op_free(&digits));
    OK(MPI_Op_free(&sum));
    OK(MPI_Barrier(w));
    if (rank == 0) printf("large more ok\n");
    OK(MPI_Finalize());
    return 0;
}
