/* The second slice: communicators and groups, probes, request sets, scans and the
 * varying-count collectives, with their error paths under MPI_ERRORS_RETURN. */
#include "check.h"
#include <string.h>

static void comms(int rank, int size) {
    /* Split by parity, reversed order by key. */
    MPI_Comm half, none, dup;
    int r, n, res;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
    OK(MPI_Comm_size(half, &n));
    OK(MPI_Comm_rank(half, &r));
    CHECK(n == (size + 1 - rank % 2) / 2);
    int members = 0;
    for (int i = rank % 2; i < size; i += 2) members++;
    CHECK(n == members);
    int above = 0; /* ranks of my parity above me come first */
    for (int i = rank + 2; i < size; i += 2) above++;
    CHECK(r == above);
    int sum = 0;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
    int want = 0;
    for (int i = rank % 2; i < size; i += 2) want += i;
    CHECK(sum == want);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res));
    CHECK(res == MPI_IDENT);
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
    CHECK(res == MPI_CONGRUENT);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, half, &res));
    CHECK(res == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL));
    MPI_Comm rev;
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev));
    OK(MPI_Comm_compare(MPI_COMM_WORLD, rev, &res));
    CHECK(res == (size == 1 ? MPI_CONGRUENT : MPI_SIMILAR));
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none));
    CHECK((rank == 0) == (none == MPI_COMM_NULL));
    if (none != MPI_COMM_NULL) OK(MPI_Comm_free(&none));
    OK(MPI_Comm_free(&rev));
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&half));

    /* Groups: the even ranks, in reverse, then a communicator of them. */
    MPI_Group world, evens;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    OK(MPI_Group_size(world, &n));
    CHECK(n == size);
    OK(MPI_Group_rank(world, &r));
    CHECK(r == rank);
    int ranks[64], k = 0;
    for (int i = size - 1; i >= 0; i--)
        if (i % 2 == 0) ranks[k++] = i;
    OK(MPI_Group_incl(world, k, ranks, &evens));
    OK(MPI_Group_size(evens, &n));
    CHECK(n == k);
    OK(MPI_Group_rank(evens, &r));
    CHECK(rank % 2 ? r == MPI_UNDEFINED : ranks[r] == rank);
    MPI_Comm ec;
    OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &ec));
    CHECK((rank % 2 == 1) == (ec == MPI_COMM_NULL));
    if (ec != MPI_COMM_NULL) {
        OK(MPI_Comm_rank(ec, &r));
        CHECK(ranks[r] == rank);
        OK(MPI_Barrier(ec));
        OK(MPI_Comm_free(&ec));
    }
    OK(MPI_Group_free(&evens));
    CHECK(evens == MPI_GROUP_NULL);
    OK(MPI_Group_free(&world));
}

static void p2p(int rank, int size) {
    MPI_Status st;
    int flag, v, n;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    /* Probe then receive, any source, specific tag. */
    int msg[3] = {rank, rank * 2, rank * 3};
    OK(MPI_Send(msg, 3, MPI_INT, right, 11, MPI_COMM_WORLD));
    OK(MPI_Probe(MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 11);
    OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 3);
    flag = 0;
    OK(MPI_Iprobe(left, 11, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag && st.MPI_SOURCE == left);
    OK(MPI_Iprobe(left, 12, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag);
    OK(MPI_Iprobe(MPI_PROC_NULL, 12, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag && st.MPI_SOURCE == MPI_PROC_NULL);
    int got[3];
    OK(MPI_Recv(got, 3, MPI_INT, left, 11, MPI_COMM_WORLD, &st));
    CHECK(got[0] == left && got[2] == left * 3);

    /* Ssend in a pattern that is safe under synchronous semantics. */
    if (size > 1 && rank < 2) {
        v = 77;
        if (rank == 0) OK(MPI_Ssend(&v, 1, MPI_INT, 1, 13, MPI_COMM_WORLD));
        else {
            OK(MPI_Recv(&v, 1, MPI_INT, 0, 13, MPI_COMM_WORLD, &st));
            CHECK(v == 77);
        }
    }

    /* Sendrecv_replace around the ring. */
    v = rank;
    OK(MPI_Sendrecv_replace(&v, 1, MPI_INT, right, 5, left, 5, MPI_COMM_WORLD, &st));
    CHECK(v == left && st.MPI_SOURCE == left);

    /* Request sets. */
    MPI_Request rq[4];
    int in[2] = {-1, -1}, outv[2] = {rank, rank + 100};
    OK(MPI_Irecv(&in[0], 1, MPI_INT, left, 21, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Irecv(&in[1], 1, MPI_INT, left, 22, MPI_COMM_WORLD, &rq[1]));
    OK(MPI_Issend(&outv[0], 1, MPI_INT, right, 21, MPI_COMM_WORLD, &rq[2]));
    OK(MPI_Isend(&outv[1], 1, MPI_INT, right, 22, MPI_COMM_WORLD, &rq[3]));
    int done = 0, idx, outcount, indices[4];
    MPI_Status sts[4];
    while (done < 4) {
        OK(MPI_Waitsome(4, rq, &outcount, indices, sts));
        CHECK(outcount >= 1);
        done += outcount;
    }
    OK(MPI_Waitsome(4, rq, &outcount, indices, sts));
    CHECK(outcount == MPI_UNDEFINED);
    CHECK(in[0] == left && in[1] == left + 100);
    OK(MPI_Waitany(4, rq, &idx, &st));
    CHECK(idx == MPI_UNDEFINED);
    OK(MPI_Testany(4, rq, &idx, &flag, &st));
    CHECK(flag && idx == MPI_UNDEFINED);

    OK(MPI_Irecv(&in[0], 1, MPI_INT, left, 31, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Testall(1, rq, &flag, sts));
    CHECK(!flag && rq[0] != MPI_REQUEST_NULL);
    OK(MPI_Testany(1, rq, &idx, &flag, &st));
    CHECK(!flag);
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* nobody has sent tag 31 yet */
    OK(MPI_Send(&outv[1], 1, MPI_INT, right, 31, MPI_COMM_WORLD));
    OK(MPI_Waitany(1, rq, &idx, &st));
    CHECK(idx == 0 && rq[0] == MPI_REQUEST_NULL && in[0] == left + 100);
    OK(MPI_Irecv(&in[0], 1, MPI_INT, left, 32, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Irecv(&in[1], 1, MPI_INT, left, 33, MPI_COMM_WORLD, &rq[1]));
    OK(MPI_Send(&outv[0], 1, MPI_INT, right, 32, MPI_COMM_WORLD));
    OK(MPI_Send(&outv[0], 1, MPI_INT, right, 33, MPI_COMM_WORLD));
    do {
        OK(MPI_Testall(2, rq, &flag, sts));
    } while (!flag);
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL);
    CHECK(sts[1].MPI_TAG == 33 && in[1] == left);

    /* Request_free of a send in flight; Cancel of a completed request. */
    static int freed = 7;
    OK(MPI_Isend(&freed, 1, MPI_INT, right, 41, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Request_free(&rq[0]));
    CHECK(rq[0] == MPI_REQUEST_NULL);
    OK(MPI_Recv(&v, 1, MPI_INT, left, 41, MPI_COMM_WORLD, &st));
    CHECK(v == 7);
    OK(MPI_Isend(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Cancel(&rq[0]));
    OK(MPI_Wait(&rq[0], &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag);
    OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void colls(int rank, int size) {
    int v = rank + 1, s = -1, e = -42;
    OK(MPI_Scan(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(s == (rank + 1) * (rank + 2) / 2);
    OK(MPI_Exscan(&v, &e, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(rank == 0 ? e == -42 : e == rank * (rank + 1) / 2);
    double d = rank + 1.0;
    OK(MPI_Scan(MPI_IN_PLACE, &d, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(d == rank + 1.0);

    int in[2 * 64], out[2];
    for (int i = 0; i < 2 * size; i++) in[i] = i * (rank + 1);
    OK(MPI_Reduce_scatter_block(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    int tri = size * (size + 1) / 2;
    CHECK(out[0] == 2 * rank * tri && out[1] == (2 * rank + 1) * tri);

    /* Rank i contributes i+1 ints, gathered with a gap of one between blocks. */
    int counts[64], displs[64], total = 0;
    for (int i = 0; i < size; i++) {
        counts[i] = i + 1;
        displs[i] = total;
        total += i + 2;
    }
    int mine[64], all[64 * 66];
    for (int i = 0; i <= rank; i++) mine[i] = 1000 * rank + i;
    for (int i = 0; i < total; i++) all[i] = -1;
    int root = size - 1;
    OK(MPI_Gatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int i = 0; i < size; i++) {
            for (int j = 0; j <= i; j++) CHECK(all[displs[i] + j] == 1000 * i + j);
            CHECK(all[displs[i] + i + 1] == -1);
        }
    for (int i = 0; i < total; i++) all[i] = -1;
    OK(MPI_Allgatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) {
        for (int j = 0; j <= i; j++) CHECK(all[displs[i] + j] == 1000 * i + j);
        CHECK(all[displs[i] + i + 1] == -1);
    }
    int back[64];
    OK(MPI_Scatterv(all, counts, displs, MPI_INT, back, rank + 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int i = 0; i <= rank; i++) CHECK(back[i] == 1000 * rank + i);

    /* Alltoallv: rank r sends r+1 copies of (100 r + d) to d. */
    int sc[64], sd[64], rc[64], rd[64], sbuf[64 * 65], rbuf[64 * 65], so = 0, ro = 0;
    for (int d2 = 0; d2 < size; d2++) {
        sc[d2] = rank + 1;
        sd[d2] = so;
        for (int j = 0; j <= rank; j++) sbuf[so + j] = 100 * rank + d2;
        so += rank + 1;
        rc[d2] = d2 + 1;
        rd[d2] = ro;
        ro += d2 + 1;
    }
    OK(MPI_Alltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, MPI_COMM_WORLD));
    for (int s2 = 0; s2 < size; s2++)
        for (int j = 0; j <= s2; j++) CHECK(rbuf[rd[s2] + j] == 100 * s2 + rank);

    /* MPI_IN_PLACE: the root's (everyone's) own block is already in the receive buffer. */
    for (int i = 0; i < total; i++) all[i] = -1;
    for (int j = 0; j <= rank; j++) all[displs[rank] + j] = 1000 * rank + j;
    if (rank == root)
        OK(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT, all, counts, displs, MPI_INT, root,
                       MPI_COMM_WORLD));
    else
        OK(MPI_Gatherv(mine, rank + 1, MPI_INT, NULL, NULL, NULL, MPI_INT, root,
                       MPI_COMM_WORLD));
    if (rank == root)
        for (int i = 0; i < size; i++) {
            for (int j = 0; j <= i; j++) CHECK(all[displs[i] + j] == 1000 * i + j);
            CHECK(all[displs[i] + i + 1] == -1);
        }
    for (int i = 0; i < total; i++) all[i] = -1;
    for (int j = 0; j <= rank; j++) all[displs[rank] + j] = 1000 * rank + j;
    OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) {
        for (int j = 0; j <= i; j++) CHECK(all[displs[i] + j] == 1000 * i + j);
        CHECK(all[displs[i] + i + 1] == -1);
    }
    for (int i = 0; i <= rank; i++) back[i] = -5;
    OK(MPI_Scatterv(all, counts, displs, MPI_INT, rank == 0 ? MPI_IN_PLACE : back, rank + 1,
                    MPI_INT, 0, MPI_COMM_WORLD));
    if (rank != 0)
        for (int i = 0; i <= rank; i++) CHECK(back[i] == 1000 * rank + i);
    /* In-place all-to-all of different counts: rank r holds min(r, d) + 1 values for d. */
    int ic[64], id[64], ibuf[64 * 65], io = 0;
    for (int d2 = 0; d2 < size; d2++) {
        ic[d2] = (rank < d2 ? rank : d2) + 1;
        id[d2] = io;
        for (int j = 0; j < ic[d2]; j++) ibuf[io + j] = 100 * rank + d2;
        io += ic[d2];
    }
    OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_INT, ibuf, ic, id, MPI_INT, MPI_COMM_WORLD));
    for (int s2 = 0; s2 < size; s2++)
        for (int j = 0; j < ic[s2]; j++) CHECK(ibuf[id[s2] + j] == 100 * s2 + rank);
    /* Negative displacements: the receive buffer's address lies after the blocks. */
    int neg[64], *end = all + total;
    for (int i = 0; i < size; i++) neg[i] = displs[i] - total;
    for (int i = 0; i < total; i++) all[i] = -1;
    OK(MPI_Allgatherv(mine, rank + 1, MPI_INT, end, counts, neg, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++) {
        for (int j = 0; j <= i; j++) CHECK(all[displs[i] + j] == 1000 * i + j);
        CHECK(all[displs[i] + i + 1] == -1);
    }
}

/* Send and receive data interleaved in one array (allowed: no send block overlaps a
 * receive block), a layout spanning more than 2^31 bytes ("big"), and an overlap
 * (MPI_ERR_BUFFER). */
static void layouts(int rank, int size, int big) {
    int buf[2 * 64], sc[64], sd[64], rc[64], rd[64];
    for (int j = 0; j < size; j++) {
        sc[j] = rc[j] = 1;
        sd[j] = 2 * j;
        rd[j] = 2 * j + 1;
        buf[2 * j] = 100 * rank + j;
        buf[2 * j + 1] = -1;
    }
    OK(MPI_Alltoallv(buf, sc, sd, MPI_INT, buf, rc, rd, MPI_INT, MPI_COMM_WORLD));
    for (int j = 0; j < size; j++) CHECK(buf[2 * j + 1] == 100 * j + rank && buf[2 * j] == 100 * rank + j);
    /* Gatherv whose send value sits in the gap after the root's receive blocks. */
    int all[64 + 1], counts[64], displs[64], root = 0;
    for (int j = 0; j < size; j++) {
        counts[j] = 1;
        displs[j] = j;
        all[j] = -1;
    }
    all[size] = 7000 + rank;
    OK(MPI_Gatherv(&all[size], 1, MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int j = 0; j < size; j++) CHECK(all[j] == 7000 + j);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    for (int j = 0; j < size; j++) rd[j] = 2 * j; /* receive blocks on the send blocks */
    CHECK(MPI_Alltoallv(buf, sc, sd, MPI_INT, buf, rc, rd, MPI_INT, MPI_COMM_WORLD) ==
          MPI_ERR_BUFFER);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (!big) return;
    /* One double per member, 2^28 doubles (2 GiB) apart: the pages between are never
     * touched. */
    long stride = 1L << 28;
    double *huge = malloc((size_t)(stride * (size - 1) + 1) * sizeof(double));
    CHECK(huge != NULL);
    for (int j = 0; j < size; j++) {
        counts[j] = 1;
        displs[j] = (int)(stride * j);
    }
    double mine = rank + 0.5;
    OK(MPI_Allgatherv(&mine, 1, MPI_DOUBLE, huge, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD));
    for (int j = 0; j < size; j++) CHECK(huge[stride * j] == j + 0.5);
    free(huge);
}

static void errors(int rank, int size) {
    MPI_Comm c;
    MPI_Group g, w;
    MPI_Status st;
    MPI_Request rq;
    int v = 0, flag, idx;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Comm_split(MPI_COMM_NULL, 0, 0, &c) == MPI_ERR_COMM);
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, -5, 0, &c) == MPI_ERR_ARG);
    CHECK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_NULL, &v) == MPI_ERR_COMM);
    CHECK(MPI_Group_size((MPI_Group)0x4242, &v) == MPI_ERR_GROUP);
    OK(MPI_Comm_group(MPI_COMM_WORLD, &w));
    int bad[2] = {0, size};
    CHECK(MPI_Group_incl(w, 2, bad, &g) == MPI_ERR_RANK);
    int twice[2] = {0, 0};
    if (size > 1) CHECK(MPI_Group_incl(w, 2, twice, &g) == MPI_ERR_RANK);
    OK(MPI_Group_incl(w, 0, bad, &g));
    CHECK(g == MPI_GROUP_EMPTY);
    OK(MPI_Group_size(g, &v));
    CHECK(v == 0);
    OK(MPI_Group_free(&w));
    CHECK(MPI_Group_free(&w) == MPI_ERR_GROUP);
    CHECK(MPI_Probe(size, 0, MPI_COMM_WORLD, &st) == MPI_ERR_RANK);
    CHECK(MPI_Iprobe(0, -7, MPI_COMM_WORLD, &flag, &st) == MPI_ERR_TAG);
    CHECK(MPI_Ssend(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD) == MPI_ERR_RANK);
    CHECK(MPI_Sendrecv_replace(&v, -1, MPI_INT, 0, 0, 0, 0, MPI_COMM_WORLD, &st) ==
          MPI_ERR_COUNT);
    rq = (MPI_Request)0x777;
    CHECK(MPI_Waitany(1, &rq, &idx, &st) == MPI_ERR_REQUEST);
    CHECK(MPI_Testall(1, &rq, &flag, &st) == MPI_ERR_REQUEST);
    CHECK(MPI_Request_free(&rq) == MPI_ERR_REQUEST);
    rq = MPI_REQUEST_NULL;
    CHECK(MPI_Cancel(&rq) == MPI_ERR_REQUEST);
    CHECK(MPI_Test_cancelled(NULL, &flag) == MPI_ERR_ARG);
    /* A receive that has not matched is cancelled (tests/c/mprobe.c has more). */
    OK(MPI_Irecv(&v, 1, MPI_INT, rank, 99, MPI_COMM_WORLD, &rq));
    OK(MPI_Cancel(&rq));
    OK(MPI_Wait(&rq, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag);
    CHECK(MPI_Scan(&v, &flag, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD) == MPI_ERR_OP);
    CHECK(MPI_Exscan(&v, &flag, 1, MPI_2INT, MPI_SUM, MPI_COMM_WORLD) == MPI_ERR_OP);
    int counts[64] = {0}, displs[64] = {0};
    counts[0] = -1;
    CHECK(MPI_Gatherv(&v, 0, MPI_INT, &flag, counts, displs, MPI_INT, size, MPI_COMM_WORLD) ==
          MPI_ERR_ROOT);
    CHECK(MPI_Allgatherv(&v, 0, MPI_INT, &flag, counts, displs, MPI_INT, MPI_COMM_WORLD) ==
          MPI_ERR_COUNT);

    CHECK(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_TAG) == MPI_SUCCESS);
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL);
    CHECK(MPI_Errhandler_free(&eh) == MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    comms(rank, size);
    p2p(rank, size);
    colls(rank, size);
    layouts(rank, size, argc > 1 && strcmp(argv[1], "big") == 0);
    errors(rank, size);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (argc > 1 && strcmp(argv[1], "truncate") == 0) {
        /* The last member sends 4000 ints where the root's block holds 1000: the root
         * reports the truncation (fatal by default) instead of hanging. */
        static int big[4000], all[4000 * 64];
        int counts[64], displs[64];
        for (int j = 0; j < size; j++) {
            counts[j] = 1000;
            displs[j] = 1000 * j;
        }
        MPI_Gatherv(big, rank == size - 1 ? 4000 : 1000, MPI_INT, all, counts, displs, MPI_INT,
                    0, MPI_COMM_WORLD);
    }
    if (argc > 1 && strcmp(argv[1], "call_errhandler") == 0)
        MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_TAG);
    OK(MPI_Finalize());
    if (rank == 0) printf("more ok\n");
    return 0;
}
