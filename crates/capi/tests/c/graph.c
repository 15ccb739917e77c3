/* Graph and distributed-graph topologies through the C ABI, and the neighbour
 * collectives on them and on Cartesian grids: MPI_Graph_create and its queries,
 * MPI_Graph_map, MPI_Dist_graph_create_adjacent, MPI_Dist_graph_create and their
 * queries, MPI_Topo_test, MPI_Neighbor_allgather(v) and MPI_Neighbor_alltoall(v) with
 * results checked exactly (repeated edges and self-loops appear on 1 and 2 ranks), and
 * the errors of bad graphs. Any rank count. */
#include "check.h"
#include <string.h>

/* GCC takes MPI_UNWEIGHTED, a constant pointer, for an array of size 0. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overread"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define MAXN 64

static int size;

/* A graph as neighbour lists: src[i] (in) and dst[i] (out), deg entries each. */
typedef struct {
    int nin[MAXN], in[MAXN][8];
    int nout[MAXN], out[MAXN][8];
} Graph;

/* The index in s's out-list of the edge that arrives in slot j of i's in-list: the
 * k-th edge s -> i, k counted along i's in-list (messages between a pair keep their
 * order). */
static int sender_slot(const Graph *g, int i, int j) {
    int s = g->in[i][j], k = 0;
    for (int jj = 0; jj < j; jj++)
        if (g->in[i][jj] == s) k++;
    for (int m = 0; m < g->nout[s]; m++)
        if (g->out[s][m] == i && k-- == 0) return m;
    CHECK(0 && "inconsistent test graph");
    return -1;
}

/* Neighbour collectives on communicator comm whose neighbour lists are g's. */
static void neighbor_collectives(MPI_Comm comm, const Graph *g, int me) {
    int nin = g->nin[me], nout = g->nout[me];

    /* allgather: every in-neighbour's rank. */
    int mine = 10 * me + 1, got[8];
    for (int j = 0; j < 8; j++) got[j] = -7;
    OK(MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, comm));
    for (int j = 0; j < nin; j++) CHECK(got[j] == 10 * g->in[me][j] + 1);
    CHECK(got[nin] == -7);

    /* alltoall: block m to out-neighbour m is 100 * sender + m. */
    int sb[8], rb[8];
    for (int m = 0; m < nout; m++) sb[m] = 100 * me + m;
    OK(MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, comm));
    for (int j = 0; j < nin; j++)
        CHECK(rb[j] == 100 * g->in[me][j] + sender_slot(g, me, j));

    /* alltoallv: m + 1 ints to out-neighbour m, 1000 * sender + 10 * m + e. */
    int scount[8], sdisp[8], rcount[8], rdisp[8], sv[64], rv[64], at = 0;
    for (int m = 0; m < nout; m++) {
        scount[m] = m + 1;
        sdisp[m] = at;
        for (int e = 0; e <= m; e++) sv[at++] = 1000 * me + 10 * m + e;
    }
    at = 0;
    for (int j = 0; j < nin; j++) {
        rcount[j] = sender_slot(g, me, j) + 1;
        rdisp[j] = at + 1; /* a gap of one int before each block */
        at += rcount[j] + 1;
    }
    for (int x = 0; x < 64; x++) rv[x] = -9;
    OK(MPI_Neighbor_alltoallv(sv, scount, sdisp, MPI_INT, rv, rcount, rdisp, MPI_INT, comm));
    for (int j = 0; j < nin; j++) {
        int s = g->in[me][j], m = sender_slot(g, me, j);
        CHECK(rv[rdisp[j] - 1] == -9);
        for (int e = 0; e <= m; e++) CHECK(rv[rdisp[j] + e] == 1000 * s + 10 * m + e);
    }

    /* allgatherv: rank + 1 ints from every in-neighbour, a derived (vector) type
     * on the send side. */
    int many[MAXN + 1];
    for (int e = 0; e <= me; e++) many[e] = 7 * me + e;
    MPI_Datatype spread;
    int wide[2 * (MAXN + 1)];
    for (int e = 0; e <= me; e++) wide[2 * e] = many[e];
    OK(MPI_Type_vector(me + 1, 1, 2, MPI_INT, &spread));
    OK(MPI_Type_commit(&spread));
    at = 0;
    for (int j = 0; j < nin; j++) {
        rcount[j] = g->in[me][j] + 1;
        rdisp[j] = at;
        at += rcount[j];
    }
    int *all = malloc(sizeof(int) * (at + 1));
    CHECK(all != NULL);
    OK(MPI_Neighbor_allgatherv(wide, 1, spread, all, rcount, rdisp, MPI_INT, comm));
    for (int j = 0; j < nin; j++)
        for (int e = 0; e < rcount[j]; e++) CHECK(all[rdisp[j] + e] == 7 * g->in[me][j] + e);
    free(all);
    OK(MPI_Type_free(&spread));
}

static void graph_topology(int rank) {
    /* A ring as an undirected graph: node i's neighbours are i-1 and i+1 (on 1 and 2
     * ranks, self-loops and repeated edges). */
    int index[MAXN], edges[2 * MAXN];
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + size - 1) % size;
        edges[2 * i + 1] = (i + 1) % size;
    }
    MPI_Comm g;
    OK(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 1, &g));
    CHECK(g != MPI_COMM_NULL);
    int status, nn, ne, grank;
    OK(MPI_Topo_test(g, &status));
    CHECK(status == MPI_GRAPH);
    OK(MPI_Comm_rank(g, &grank));
    CHECK(grank == rank);
    OK(MPI_Graphdims_get(g, &nn, &ne));
    CHECK(nn == size && ne == 2 * size);
    int ix[MAXN], es[2 * MAXN];
    OK(MPI_Graph_get(g, size, 2 * size, ix, es));
    CHECK(memcmp(ix, index, sizeof(int) * size) == 0);
    CHECK(memcmp(es, edges, sizeof(int) * 2 * size) == 0);
    Graph ring;
    for (int i = 0; i < size; i++) {
        int cnt, nb[2];
        OK(MPI_Graph_neighbors_count(g, i, &cnt));
        CHECK(cnt == 2);
        OK(MPI_Graph_neighbors(g, i, 2, nb));
        CHECK(nb[0] == edges[2 * i] && nb[1] == edges[2 * i + 1]);
        ring.nin[i] = ring.nout[i] = 2;
        for (int k = 0; k < 2; k++) ring.in[i][k] = ring.out[i][k] = nb[k];
    }
    neighbor_collectives(g, &ring, rank);

    /* A duplicate keeps the graph. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(g, &dup));
    OK(MPI_Topo_test(dup, &status));
    CHECK(status == MPI_GRAPH);
    OK(MPI_Graphdims_get(dup, &nn, &ne));
    CHECK(nn == size && ne == 2 * size);
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&g));

    /* Fewer nodes than ranks: the last rank is left out; a chain 0 - 1 - ... */
    int n = size > 1 ? size - 1 : 1;
    for (int i = 0; i < n; i++) index[i] = (i > 0) + (i < n - 1) + (i ? index[i - 1] : 0);
    int e = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0) edges[e++] = i - 1;
        if (i < n - 1) edges[e++] = i + 1;
    }
    OK(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g));
    CHECK((rank < n) == (g != MPI_COMM_NULL));
    int newrank;
    OK(MPI_Graph_map(MPI_COMM_WORLD, n, index, edges, &newrank));
    CHECK(newrank == (rank < n ? rank : MPI_UNDEFINED));
    if (g != MPI_COMM_NULL) {
        Graph chain;
        for (int i = 0; i < n; i++) {
            OK(MPI_Graph_neighbors_count(g, i, &chain.nin[i]));
            OK(MPI_Graph_neighbors(g, i, 8, chain.in[i]));
            chain.nout[i] = chain.nin[i];
            memcpy(chain.out[i], chain.in[i], sizeof chain.in[i]);
        }
        CHECK(chain.nin[0] == (n > 1));
        neighbor_collectives(g, &chain, rank);
        OK(MPI_Comm_free(&g));
    }
}

static void dist_graph_topology(int rank) {
    /* Directed: i -> i+1 and i -> i+2, weighted 1 and 2. */
    Graph d;
    for (int i = 0; i < size; i++) {
        d.nout[i] = d.nin[i] = 2;
        d.out[i][0] = (i + 1) % size;
        d.out[i][1] = (i + 2) % size;
        d.in[i][0] = (i + size - 1) % size;
        d.in[i][1] = (i + 2 * size - 2) % size;
    }
    int w[2] = {1, 2};
    MPI_Comm dg;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, d.in[rank], w, 2, d.out[rank], w,
                                      MPI_INFO_NULL, 0, &dg));
    int status, indeg, outdeg, weighted;
    OK(MPI_Topo_test(dg, &status));
    CHECK(status == MPI_DIST_GRAPH);
    OK(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
    CHECK(indeg == 2 && outdeg == 2 && weighted == 1);
    int s[2], sw[2], t[2], tw[2];
    OK(MPI_Dist_graph_neighbors(dg, 2, s, sw, 2, t, tw));
    CHECK(s[0] == d.in[rank][0] && s[1] == d.in[rank][1] && sw[0] == 1 && sw[1] == 2);
    CHECK(t[0] == d.out[rank][0] && t[1] == d.out[rank][1] && tw[0] == 1 && tw[1] == 2);
    neighbor_collectives(dg, &d, rank);
    OK(MPI_Comm_free(&dg));

    /* A star into rank 0, unweighted; the side without edges may say
     * MPI_WEIGHTS_EMPTY. */
    if (size <= 8) {
        Graph star;
        for (int i = 0; i < size; i++) {
            star.nin[i] = i == 0 ? size - 1 : 0;
            star.nout[i] = i == 0 ? 0 : 1;
            star.out[i][0] = 0;
            if (i > 0) star.in[0][i - 1] = i;
        }
        OK(MPI_Dist_graph_create_adjacent(
            MPI_COMM_WORLD, star.nin[rank], star.in[rank],
            rank == 0 ? MPI_UNWEIGHTED : MPI_WEIGHTS_EMPTY, star.nout[rank], star.out[rank],
            rank == 0 ? MPI_WEIGHTS_EMPTY : MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg));
        OK(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
        CHECK(indeg == star.nin[rank] && outdeg == star.nout[rank] && weighted == 0);
        neighbor_collectives(dg, &star, rank);
        OK(MPI_Comm_free(&dg));
    }

    /* The general form: rank 0 gives every i -> i+1, each rank adds its own i -> i+3;
     * unweighted. */
    int srcs[MAXN + 1], degs[MAXN + 1], dsts[MAXN + 1], k = 0;
    if (rank == 0)
        for (int i = 0; i < size; i++, k++) {
            srcs[k] = i;
            degs[k] = 1;
            dsts[k] = (i + 1) % size;
        }
    srcs[k] = rank;
    degs[k] = 1;
    dsts[k++] = (rank + 3) % size;
    OK(MPI_Dist_graph_create(MPI_COMM_WORLD, k, srcs, degs, dsts, MPI_UNWEIGHTED,
                             MPI_INFO_NULL, 1, &dg));
    OK(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
    CHECK(indeg == 2 && outdeg == 2 && weighted == 0);
    Graph gen;
    for (int i = 0; i < size; i++) {
        /* The order is the library's; every rank reads its own lists and the test
         * checks them as sets, then the collectives against them. */
        gen.nin[i] = gen.nout[i] = 2;
    }
    OK(MPI_Dist_graph_neighbors(dg, 2, gen.in[rank], MPI_UNWEIGHTED, 2, gen.out[rank],
                                MPI_UNWEIGHTED));
    int a = gen.out[rank][0], b = gen.out[rank][1];
    CHECK((a == (rank + 1) % size && b == (rank + 3) % size) ||
          (b == (rank + 1) % size && a == (rank + 3) % size));
    a = gen.in[rank][0];
    b = gen.in[rank][1];
    int p1 = (rank + size - 1) % size, p3 = (rank + 3 * size - 3) % size;
    CHECK((a == p1 && b == p3) || (a == p3 && b == p1));
    /* Everyone's lists, for the expected values. */
    int lists[4 * MAXN], my[4] = {gen.in[rank][0], gen.in[rank][1], gen.out[rank][0],
                                   gen.out[rank][1]};
    OK(MPI_Allgather(my, 4, MPI_INT, lists, 4, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < size; i++)
        for (int x = 0; x < 2; x++) {
            gen.in[i][x] = lists[4 * i + x];
            gen.out[i][x] = lists[4 * i + 2 + x];
        }
    neighbor_collectives(dg, &gen, rank);
    OK(MPI_Comm_free(&dg));
}

static void cartesian_neighbors(int rank) {
    /* A 2-d grid, open in its first dimension, and a periodic ring of all ranks (on 1
     * and 2 ranks both neighbours are the same rank). */
    int dims[2] = {0, 0}, periods[2] = {0, 1};
    OK(MPI_Dims_create(size, 2, dims));
    for (int shape = 0; shape < 2; shape++) {
        int nd = shape == 0 ? 2 : 1;
        int ring[1] = {size}, periodic[1] = {1};
        MPI_Comm cart;
        OK(MPI_Cart_create(MPI_COMM_WORLD, nd, shape == 0 ? dims : ring,
                           shape == 0 ? periods : periodic, 0, &cart));
        int nb[4], sb[4], rb[4], all[4];
        for (int dd = 0; dd < nd; dd++)
            OK(MPI_Cart_shift(cart, dd, 1, &nb[2 * dd], &nb[2 * dd + 1]));
        for (int k = 0; k < 2 * nd; k++) {
            sb[k] = 10 * rank + k;
            rb[k] = all[k] = -1;
        }
        OK(MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, cart));
        int mine = rank;
        OK(MPI_Neighbor_allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, cart));
        for (int k = 0; k < 2 * nd; k++) {
            if (nb[k] == MPI_PROC_NULL) {
                CHECK(rb[k] == -1 && all[k] == -1); /* left untouched */
            } else {
                /* What the -1 neighbour sent towards +1 lands in the -1 block. */
                CHECK(rb[k] == 10 * nb[k] + (k ^ 1));
                CHECK(all[k] == nb[k]);
            }
        }
        OK(MPI_Comm_free(&cart));
    }
}

static void errors(int rank) {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int cls, e, x;
    int index[1] = {1}, edges[1] = {size}; /* an edge to a node that is not there */
    MPI_Comm none = MPI_COMM_WORLD;
    e = MPI_Graph_create(MPI_COMM_WORLD, 1, index, edges, 0, &none);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_TOPOLOGY && none == MPI_COMM_NULL);
    int down[2] = {2, 1}, two[2] = {0, 0};
    if (size >= 2) {
        e = MPI_Graph_create(MPI_COMM_WORLD, 2, down, two, 0, &none);
        OK(MPI_Error_class(e, &cls));
        CHECK(cls == MPI_ERR_TOPOLOGY); /* index decreases */
    }
    e = MPI_Graph_create(MPI_COMM_WORLD, size + 1, index, edges, 0, &none);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_ARG);
    e = MPI_Graphdims_get(MPI_COMM_WORLD, &x, &x);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_TOPOLOGY);
    e = MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &x, &x, &x);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_TOPOLOGY);
    e = MPI_Neighbor_allgather(&rank, 1, MPI_INT, &x, 1, MPI_INT, MPI_COMM_WORLD);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_TOPOLOGY);
    int bad[1] = {size};
    e = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, bad, MPI_UNWEIGHTED, 0, bad,
                                       MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &none);
    OK(MPI_Error_class(e, &cls));
    CHECK(cls == MPI_ERR_RANK && none == MPI_COMM_NULL);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    int rank;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size <= MAXN);
    graph_topology(rank);
    dist_graph_topology(rank);
    cartesian_neighbors(rank);
    errors(rank);
    if (rank == 0) printf("graph ok\n");
    OK(MPI_Finalize());
    return 0;
}
