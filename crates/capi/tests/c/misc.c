/* More datatype constructors, packing, statuses, names, split_type, memory, info
 * objects, group algebra, attributes, the nonblocking collectives, and error paths. */
#include "check.h"
#include <string.h>

static void types(int rank) {
    MPI_Datatype t, d, r;
    MPI_Aint lb, ext;
    int sz;
    /* hvector of 2 blocks of 2 ints, 16 bytes apart. */
    OK(MPI_Type_create_hvector(2, 2, 16, MPI_INT, &t));
    OK(MPI_Type_size(t, &sz));
    CHECK(sz == 16);
    OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECK(lb == 0 && ext == 24);
    /* Resized: same data, new bounds; the true extent ignores them. */
    OK(MPI_Type_create_resized(t, -8, 64, &r));
    OK(MPI_Type_get_extent(r, &lb, &ext));
    CHECK(lb == -8 && ext == 64);
    OK(MPI_Type_get_true_extent(r, &lb, &ext));
    CHECK(lb == 0 && ext == 24);
    OK(MPI_Type_dup(MPI_DOUBLE, &d));
    OK(MPI_Type_size(d, &sz));
    CHECK(sz == 8);
    double one = 1; /* a dup of a predefined type is committed */
    OK(MPI_Send(&one, 1, d, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Type_free(&d));
    /* hindexed, indexed_block, hindexed_block. */
    int bl[2] = {1, 2}, di[2] = {3, 0};
    MPI_Aint hd[2] = {12, 0};
    MPI_Datatype h, ib, hb;
    OK(MPI_Type_create_hindexed(2, bl, hd, MPI_INT, &h));
    OK(MPI_Type_create_indexed_block(2, 1, di, MPI_INT, &ib));
    OK(MPI_Type_create_hindexed_block(2, 1, hd, MPI_INT, &hb));
    int src[6] = {0, 1, 2, 3, 4, 5};
    int pos = 0, n;
    char buf[64];
    OK(MPI_Type_commit(&h));
    OK(MPI_Type_commit(&ib));
    OK(MPI_Pack_size(1, h, MPI_COMM_WORLD, &n));
    CHECK(n == 12);
    OK(MPI_Pack(src, 1, h, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    OK(MPI_Pack(src, 1, ib, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 20);
    int got[5] = {0};
    pos = 0;
    OK(MPI_Unpack(buf, 20, &pos, got, 5, MPI_INT, MPI_COMM_WORLD));
    CHECK(got[0] == 3 && got[1] == 0 && got[2] == 1 && got[3] == 3 && got[4] == 0);
    CHECK(MPI_Aint_add(100, 20) == 120 && MPI_Aint_diff(100, 20) == 80);
    /* Get_elements counts basic elements. */
    MPI_Status st;
    int sendv[4] = {7, 8, 9, 10}, recvv[3]; /* the type reaches int 3 */
    OK(MPI_Sendrecv(sendv, 1, h, rank, 1, recvv, 3, MPI_INT, rank, 1, MPI_COMM_WORLD, &st));
    OK(MPI_Get_elements(&st, h, &n));
    CHECK(n == 3);
    OK(MPI_Status_set_elements(&st, MPI_INT, 5));
    OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 5);
    OK(MPI_Type_free(&h));
    OK(MPI_Type_free(&ib));
    OK(MPI_Type_free(&hb));
    OK(MPI_Type_free(&r));
    OK(MPI_Type_free(&t));
    /* Errors. */
    CHECK(MPI_Type_create_hvector(-1, 1, 4, MPI_INT, &t) == MPI_ERR_COUNT);
    CHECK(MPI_Type_dup((MPI_Datatype)0x4343, &t) == MPI_ERR_TYPE);
    pos = 30;
    CHECK(MPI_Pack(src, 1, MPI_INT, buf, 20, &pos, MPI_COMM_WORLD) == MPI_ERR_ARG);
    pos = 18;
    CHECK(MPI_Pack(src, 1, MPI_INT, buf, 20, &pos, MPI_COMM_WORLD) == MPI_ERR_TRUNCATE);
    pos = 0;
    CHECK(MPI_Unpack(buf, 2, &pos, got, 1, MPI_INT, MPI_COMM_WORLD) == MPI_ERR_TRUNCATE);
}

static void statuses_names_info(int rank, int size) {
    MPI_Status st;
    int v, flag;
    OK(MPI_Status_set_source(&st, 3));
    OK(MPI_Status_set_tag(&st, 4));
    OK(MPI_Status_set_error(&st, MPI_ERR_TAG));
    OK(MPI_Status_get_source(&st, &v));
    CHECK(v == 3);
    OK(MPI_Status_get_tag(&st, &v));
    CHECK(v == 4);
    OK(MPI_Status_get_error(&st, &v));
    CHECK(v == MPI_ERR_TAG);
    OK(MPI_Status_set_cancelled(&st, 0));
    CHECK(MPI_Status_get_tag(NULL, &v) == MPI_ERR_ARG);

    /* Request_get_status does not free the request. */
    MPI_Request r;
    int x = rank, y = -1;
    OK(MPI_Irecv(&y, 1, MPI_INT, rank, 2, MPI_COMM_WORLD, &r));
    OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(!flag);
    OK(MPI_Send(&x, 1, MPI_INT, rank, 2, MPI_COMM_WORLD));
    do OK(MPI_Request_get_status(r, &flag, &st)); while (!flag);
    CHECK(st.MPI_TAG == 2 && r != MPI_REQUEST_NULL);
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(y == rank);
    OK(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, MPI_STATUS_IGNORE));
    CHECK(flag);

    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14);
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Comm_get_name(c, name, &len));
    CHECK(len == 0);
    OK(MPI_Comm_set_name(c, "mine"));
    OK(MPI_Comm_get_name(c, name, &len));
    CHECK(strcmp(name, "mine") == 0);
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c));
    OK(MPI_Comm_size(c, &v));
    CHECK(v == size); /* every rank of a local job is on this host */
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &c));
    CHECK(c == MPI_COMM_NULL);

    void *mem;
    OK(MPI_Alloc_mem(1024, MPI_INFO_NULL, &mem));
    memset(mem, 1, 1024);
    OK(MPI_Free_mem(mem));

    MPI_Info info, dup;
    char val[MPI_MAX_INFO_VAL];
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "a", "1"));
    OK(MPI_Info_set(info, "b", "two"));
    OK(MPI_Info_set(info, "a", "one"));
    OK(MPI_Info_get_nkeys(info, &v));
    CHECK(v == 2);
    OK(MPI_Info_get(info, "a", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(flag && strcmp(val, "one") == 0);
    OK(MPI_Info_get_nthkey(info, 1, name));
    CHECK(strcmp(name, "b") == 0);
    OK(MPI_Info_dup(info, &dup));
    OK(MPI_Info_delete(info, "b"));
    len = sizeof val;
    OK(MPI_Info_get_string(dup, "b", &len, val, &flag));
    CHECK(flag && len == 4 && strcmp(val, "two") == 0);
    OK(MPI_Info_get(info, "b", 10, val, &flag));
    CHECK(!flag);
    CHECK(MPI_Info_delete(info, "b") == MPI_ERR_INFO_NOKEY);
    CHECK(MPI_Info_set(info, "", "x") == MPI_ERR_INFO_KEY);
    OK(MPI_Info_free(&info));
    OK(MPI_Info_free(&dup));
    CHECK(info == MPI_INFO_NULL);
    CHECK(MPI_Info_free(&info) == MPI_ERR_INFO);
    CHECK(MPI_Comm_set_name((MPI_Comm)0x4242, "x") == MPI_ERR_COMM);
}

static void groups(int rank, int size) {
    MPI_Group w, evens, odds, u, i, d, rev;
    int r, res, n;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &w));
    int range[1][3] = {{0, size - 1, 2}};
    OK(MPI_Group_range_incl(w, 1, range, &evens));
    OK(MPI_Group_range_excl(w, 1, range, &odds));
    OK(MPI_Group_size(evens, &n));
    CHECK(n == (size + 1) / 2);
    OK(MPI_Group_union(odds, evens, &u));
    OK(MPI_Group_size(u, &n));
    CHECK(n == size);
    OK(MPI_Group_compare(u, w, &res));
    CHECK(res == (size > 1 ? MPI_SIMILAR : MPI_IDENT));
    OK(MPI_Group_intersection(u, evens, &i));
    OK(MPI_Group_compare(i, evens, &res));
    CHECK(res == MPI_IDENT);
    OK(MPI_Group_difference(w, evens, &d));
    OK(MPI_Group_compare(d, odds, &res));
    CHECK(res == MPI_IDENT);
    int zero = 0;
    OK(MPI_Group_excl(w, 1, &zero, &rev));
    OK(MPI_Group_size(rev, &n));
    CHECK(n == size - 1);
    int in[2] = {rank, MPI_PROC_NULL}, out[2];
    OK(MPI_Group_translate_ranks(w, 2, in, evens, out));
    CHECK(out[0] == (rank % 2 ? MPI_UNDEFINED : rank / 2) && out[1] == MPI_PROC_NULL);
    OK(MPI_Group_rank(odds, &r));
    CHECK(r == (rank % 2 ? rank / 2 : MPI_UNDEFINED));
    int bad = size;
    CHECK(MPI_Group_excl(w, 1, &bad, &rev) == MPI_ERR_RANK);
    int badrange[1][3] = {{0, 1, 0}};
    CHECK(MPI_Group_range_incl(w, 1, badrange, &rev) == MPI_ERR_ARG);
    CHECK(MPI_Group_union(w, (MPI_Group)0x4444, &u) == MPI_ERR_GROUP);
    MPI_Group all[] = {w, evens, odds, u, i, d};
    for (int k = 0; k < 6; k++) OK(MPI_Group_free(&all[k]));
}

static int deleted = 0;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
    (void)c;
    (void)k;
    (void)extra;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void *v, void *extra) {
    (void)c;
    (void)k;
    (void)v;
    (*(int *)extra)++;
    return MPI_SUCCESS;
}

static void attributes(int size) {
    int *v, flag, key, dupkey;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v >= 32767);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &v, &flag));
    CHECK(flag && *v == size);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
    CHECK(flag && *v == 0);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &v, &flag));
    CHECK(flag && *v == MPI_PROC_NULL);
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, &deleted));
    OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &dupkey, NULL));
    MPI_Comm c, c2;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Comm_set_attr(c, key, (void *)100));
    OK(MPI_Comm_set_attr(c, dupkey, (void *)7));
    OK(MPI_Comm_set_attr(c, key, (void *)200)); /* replaces: deletes the old value */
    CHECK(deleted == 1);
    OK(MPI_Comm_dup(c, &c2));
    void *got;
    OK(MPI_Comm_get_attr(c2, key, &got, &flag));
    CHECK(flag && got == (void *)201);
    OK(MPI_Comm_get_attr(c2, dupkey, &got, &flag));
    CHECK(flag && got == (void *)7);
    OK(MPI_Comm_delete_attr(c, key));
    CHECK(deleted == 2);
    OK(MPI_Comm_get_attr(c, key, &got, &flag));
    CHECK(!flag);
    OK(MPI_Comm_free(&c2)); /* deletes c2's value */
    CHECK(deleted == 3);
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID);
    OK(MPI_Comm_free_keyval(&dupkey));
    CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, NULL) == MPI_ERR_KEYVAL);
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, 12345, &got, &flag) == MPI_ERR_KEYVAL);
    CHECK(MPI_Comm_free_keyval(&key) == MPI_ERR_KEYVAL);
}

static void nonblocking(int rank, int size) {
    MPI_Request r[7];
    int b = rank == 0 ? 42 : 0, s = rank, sum = 0, g[64], all[64], sc = -1, a2a[64], a2b[64];
    int mine[64];
    for (int i = 0; i < size; i++) {
        mine[i] = i * 10;
        a2a[i] = rank * 100 + i;
    }
    OK(MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Iallreduce(&s, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Igather(&s, 1, MPI_INT, g, 1, MPI_INT, 0, MPI_COMM_WORLD, &r[2]));
    OK(MPI_Iallgather(&s, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &r[3]));
    OK(MPI_Iscatter(mine, 1, MPI_INT, &sc, 1, MPI_INT, 0, MPI_COMM_WORLD, &r[4]));
    OK(MPI_Ialltoall(a2a, 1, MPI_INT, a2b, 1, MPI_INT, MPI_COMM_WORLD, &r[5]));
    int red = -1;
    OK(MPI_Ireduce(&s, &red, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD, &r[6]));
    OK(MPI_Waitall(7, r, MPI_STATUSES_IGNORE));
    CHECK(b == 42 && sum == size * (size - 1) / 2 && sc == rank * 10);
    if (rank == 0) CHECK(red == size - 1);
    for (int i = 0; i < size; i++) {
        CHECK(all[i] == i && a2b[i] == i * 100 + rank);
        if (rank == 0) CHECK(g[i] == i);
    }
    MPI_Comm c;
    MPI_Request q;
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &c, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    OK(MPI_Barrier(c));
    OK(MPI_Comm_free(&c));
    CHECK(MPI_Ibcast(&b, 1, MPI_INT, size, MPI_COMM_WORLD, &q) == MPI_ERR_ROOT);
    CHECK(MPI_Iallreduce(&s, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, NULL) == MPI_ERR_ARG);
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    types(rank);
    statuses_names_info(rank, size);
    groups(rank, size);
    attributes(size);
    nonblocking(rank, size);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("misc ok\n");
    OK(MPI_Finalize());
    return 0;
}
