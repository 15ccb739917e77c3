/* Windows: MPI_Win_allocate_shared with MPI_Win_shared_query and direct loads of the
 * neighbour's part, MPI_Win_create_dynamic with MPI_Win_attach/detach and MPI_Get_address
 * displacements, MPI_Win_get_attr (base, size, displacement unit, flavor, model), the
 * group, name, info and error-handler calls, and window attributes with a delete
 * callback. Runs on any number of ranks. A shared window needs every member on one host
 * reached over shared memory: over UDP its creation fails with MPI_ERR_RMA_SHARED,
 * which this program accepts only when PHALANX_TRANSPORT=udp or PHALANX_FAULTS is set. */
#include "check.h"
#include <string.h>

static int rank, p, deleted;

static int on_delete(MPI_Win win, int keyval, void *value, void *extra) {
    (void)win;
    (void)keyval;
    (void)extra;
    CHECK(*(int *)value == 42);
    deleted++;
    return MPI_SUCCESS;
}

static void attrs_of(MPI_Win win, void *base, MPI_Aint size, int disp_unit, int flavor) {
    void *b = NULL;
    MPI_Aint *s = NULL;
    int *d = NULL, *f = NULL, *m = NULL, flag = 0;
    OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &b, &flag));
    CHECK(flag && b == base);
    OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &s, &flag));
    CHECK(flag && *s == size);
    OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &d, &flag));
    CHECK(flag && *d == disp_unit);
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &f, &flag));
    CHECK(flag && *f == flavor);
    OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &m, &flag));
    CHECK(flag && *m == MPI_WIN_UNIFIED);
}

static void shared(void) {
    MPI_Comm node;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int nr, np;
    OK(MPI_Comm_rank(node, &nr));
    OK(MPI_Comm_size(node, &np));
    OK(MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN));
    MPI_Win sw;
    int *mine = NULL;
    int rc = MPI_Win_allocate_shared((MPI_Aint)(4 * sizeof(int)), sizeof(int), MPI_INFO_NULL,
                                     node, &mine, &sw);
    if (rc != MPI_SUCCESS) {
        CHECK(rc == MPI_ERR_RMA_SHARED && sw == MPI_WIN_NULL);
        CHECK(getenv("PHALANX_FAULTS") != NULL ||
              (getenv("PHALANX_TRANSPORT") && !strcmp(getenv("PHALANX_TRANSPORT"), "udp")));
        printf("rank %d: no shared window over this transport\n", rank);
        OK(MPI_Comm_free(&node));
        return;
    }
    attrs_of(sw, mine, 4 * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_SHARED);
    for (int i = 0; i < 4; i++) mine[i] = nr * 10 + i;
    OK(MPI_Win_sync(sw));
    OK(MPI_Barrier(node));
    OK(MPI_Win_sync(sw));
    int nn = (nr + 1) % np;
    MPI_Aint sz = 0;
    int du = 0;
    int *theirs = NULL;
    OK(MPI_Win_shared_query(sw, nn, &sz, &du, &theirs));
    CHECK(sz == 4 * sizeof(int) && du == sizeof(int) && theirs != NULL);
    for (int i = 0; i < 4; i++) CHECK(theirs[i] == nn * 10 + i);
    /* MPI_PROC_NULL: the part of the lowest rank with memory (rank 0). */
    MPI_Aint szc = 0, duc = 0;
    int *first = NULL, *zero = NULL;
    OK(MPI_Win_shared_query_c(sw, MPI_PROC_NULL, &szc, &duc, &first));
    OK(MPI_Win_shared_query(sw, 0, &sz, &du, &zero));
    CHECK(first == zero && szc == 4 * sizeof(int) && duc == sizeof(int));
    /* One-sided operations on it too, seen by direct loads after the fence. */
    OK(MPI_Win_fence(0, sw));
    int v = 500 + nr;
    OK(MPI_Put(&v, 1, MPI_INT, nn, 3, 1, MPI_INT, sw));
    OK(MPI_Win_fence(0, sw));
    CHECK(mine[3] == 500 + (nr + np - 1) % np);
    CHECK(theirs[3] == 500 + nr);
    OK(MPI_Win_free(&sw));
    OK(MPI_Comm_free(&node));
}

static void dynamic(void) {
    MPI_Win dw;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &dw));
    attrs_of(dw, NULL, 0, 1, MPI_WIN_FLAVOR_DYNAMIC);
    long *mem = malloc(6 * sizeof(long));
    for (int i = 0; i < 6; i++) mem[i] = -1;
    OK(MPI_Win_attach(dw, mem, 6 * sizeof(long)));
    MPI_Aint addr, *addrs = malloc(p * sizeof(MPI_Aint));
    OK(MPI_Get_address(&mem[1], &addr));
    OK(MPI_Allgather(&addr, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    int next = (rank + 1) % p, prev = (rank + p - 1) % p;
    long v[4] = {rank, rank + 1, rank + 2, rank + 3};
    OK(MPI_Win_fence(0, dw));
    OK(MPI_Put(v, 4, MPI_LONG, next, addrs[next], 4, MPI_LONG, dw));
    OK(MPI_Win_fence(0, dw));
    CHECK(mem[0] == -1 && mem[5] == -1);
    for (int i = 0; i < 4; i++) CHECK(mem[1 + i] == prev + i);
    long back[2] = {0, 0};
    OK(MPI_Get(back, 2, MPI_LONG, prev, MPI_Aint_add(addrs[prev], 2 * sizeof(long)), 2,
               MPI_LONG, dw));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, dw));
    CHECK(back[0] == (prev + p - 1) % p + 2 && back[1] == (prev + p - 1) % p + 3);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_detach(dw, mem));
    OK(MPI_Win_free(&dw));
    free(mem);
    free(addrs);
}

static void inquiry(void) {
    double *base = NULL;
    MPI_Win win;
    OK(MPI_Win_allocate((MPI_Aint)(8 * sizeof(double)), sizeof(double), MPI_INFO_NULL,
                        MPI_COMM_WORLD, &base, &win));
    attrs_of(win, base, 8 * sizeof(double), sizeof(double), MPI_WIN_FLAVOR_ALLOCATE);
    char buf[3];
    MPI_Win cw;
    OK(MPI_Win_create(buf, 3, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &cw));
    attrs_of(cw, buf, 3, 1, MPI_WIN_FLAVOR_CREATE);

    /* Group: the world's members. */
    MPI_Group g, wg;
    int cmp;
    OK(MPI_Win_get_group(win, &g));
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Group_compare(g, wg, &cmp));
    CHECK(cmp == MPI_IDENT);
    OK(MPI_Group_free(&g));
    OK(MPI_Group_free(&wg));

    /* Name. */
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 0 && name[0] == 0);
    OK(MPI_Win_set_name(win, "ring window"));
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 11 && !strcmp(name, "ring window"));

    /* Info: accepted, and an empty one back. */
    MPI_Info info, used;
    int nkeys = -1;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "no_locks", "false"));
    OK(MPI_Win_set_info(win, info));
    OK(MPI_Win_get_info(win, &used));
    OK(MPI_Info_get_nkeys(used, &nkeys));
    CHECK(nkeys == 0);
    OK(MPI_Info_free(&used));
    OK(MPI_Info_free(&info));

    /* Error handlers: fatal by default, then set and read back. */
    MPI_Errhandler eh;
    OK(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    OK(MPI_Win_get_errhandler(win, &eh));
    CHECK(eh == MPI_ERRORS_RETURN);

    /* Attributes of a keyval with a delete callback (run by MPI_Win_free). */
    int kv, flag = 0;
    static int value = 42;
    int *got = NULL;
    OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, on_delete, &kv, NULL));
    OK(MPI_Win_get_attr(win, kv, &got, &flag));
    CHECK(flag == 0);
    OK(MPI_Win_set_attr(win, kv, &value));
    OK(MPI_Win_get_attr(win, kv, &got, &flag));
    CHECK(flag == 1 && got == &value);
    CHECK(MPI_Win_set_attr(win, MPI_WIN_SIZE, &value) == MPI_ERR_KEYVAL);
    OK(MPI_Win_set_attr(cw, kv, &value));
    OK(MPI_Win_delete_attr(cw, kv));
    CHECK(deleted == 1);
    OK(MPI_Win_free(&cw));
    CHECK(deleted == 1);
    OK(MPI_Win_free(&win));
    CHECK(deleted == 2);
    OK(MPI_Win_free_keyval(&kv));
    CHECK(kv == MPI_KEYVAL_INVALID);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    shared();
    dynamic();
    inquiry();
    printf("rma_win ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
