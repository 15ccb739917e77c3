/* MPI-4 additions: MPI_Isendrecv and MPI_Isendrecv_replace around a ring (predefined and
 * derived datatypes, MPI_PROC_NULL), MPI_Request_get_status_all/any/some (nothing freed,
 * null and inactive requests as MPI defines), communicator hints (MPI_Comm_set_info,
 * get_info, dup_with_info, idup_with_info), MPI_Comm_create_group with two tags,
 * MPI_Comm_create_from_group and MPI_Intercomm_create_from_groups,
 * MPI_Info_get_valuelen, MPI_Buffer_flush/iflush and the per-communicator buffers,
 * handles as integers. Any number of
 * ranks. */
#include "check.h"
#include <string.h>

static int rank, size;

static void sendrecv(void) {
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out[4], in[4];
    MPI_Request r;
    MPI_Status st;
    for (int it = 0; it < 5; it++) {
        for (int i = 0; i < 4; i++) { out[i] = 100 * rank + 10 * it + i; in[i] = -1; }
        OK(MPI_Isendrecv(out, 4, MPI_INT, next, it, in, 4, MPI_INT, prev, it, MPI_COMM_WORLD, &r));
        st.MPI_ERROR = MPI_ERR_DIMS; /* completion calls leave the error field alone */
        OK(MPI_Wait(&r, &st));
        CHECK(st.MPI_ERROR == MPI_ERR_DIMS);
        CHECK(r == MPI_REQUEST_NULL);
        CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == it);
        int n;
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == 4);
        for (int i = 0; i < 4; i++) CHECK(in[i] == 100 * prev + 10 * it + i);
    }
    /* Replace, with a derived type (every other int), completed by MPI_Test polling. */
    MPI_Datatype t;
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    int buf[6];
    for (int i = 0; i < 6; i++) buf[i] = 1000 * rank + i;
    OK(MPI_Isendrecv_replace(buf, 1, t, next, 7, prev, 7, MPI_COMM_WORLD, &r));
    int flag = 0;
    while (!flag) OK(MPI_Test(&r, &flag, &st));
    CHECK(st.MPI_SOURCE == prev);
    for (int i = 0; i < 6; i++) CHECK(buf[i] == (i % 2 ? 1000 * rank + i : 1000 * prev + i));
    OK(MPI_Type_free(&t));
    /* A large one (rendezvous) in place. */
    int big = 1 << 17;
    int *b = malloc(sizeof(int) * big);
    for (int i = 0; i < big; i++) b[i] = rank * 7 + i;
    OK(MPI_Isendrecv_replace(b, big, MPI_INT, next, 8, prev, 8, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < big; i += 997) CHECK(b[i] == prev * 7 + i);
    free(b);
    /* MPI_PROC_NULL on both sides. */
    OK(MPI_Isendrecv(out, 4, MPI_INT, MPI_PROC_NULL, 0, in, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL);
}

static void get_status(void) {
    MPI_Request r[3];
    MPI_Status sts[3];
    int flag = -1, idx = -1, n = -1, ix[3];
    /* No active request. */
    r[0] = MPI_REQUEST_NULL;
    int dummy;
    OK(MPI_Recv_init(&dummy, 1, MPI_INT, 0, 99, MPI_COMM_SELF, &r[1])); /* inactive */
    OK(MPI_Request_get_status_any(2, r, &idx, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1 && idx == MPI_UNDEFINED);
    OK(MPI_Request_get_status_some(2, r, &n, ix, MPI_STATUSES_IGNORE));
    CHECK(n == MPI_UNDEFINED);
    OK(MPI_Request_get_status_all(2, r, &flag, sts));
    CHECK(flag == 1);
    OK(MPI_Request_free(&r[1]));
    /* A receive that cannot complete yet, then one that has. */
    int a = -1, b = -1, v = 5;
    OK(MPI_Irecv(&a, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &r[0]));
    OK(MPI_Irecv(&b, 1, MPI_INT, 0, 2, MPI_COMM_SELF, &r[1]));
    OK(MPI_Request_get_status_any(2, r, &idx, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 0 && idx == MPI_UNDEFINED);
    OK(MPI_Request_get_status_all(2, r, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag == 0);
    OK(MPI_Send(&v, 1, MPI_INT, 0, 2, MPI_COMM_SELF));
    flag = 0;
    while (!flag) OK(MPI_Request_get_status_any(2, r, &idx, &flag, &sts[0]));
    CHECK(idx == 1 && sts[0].MPI_TAG == 2);
    OK(MPI_Request_get_status_some(2, r, &n, ix, sts));
    CHECK(n == 1 && ix[0] == 1 && sts[0].MPI_TAG == 2);
    CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL); /* nothing freed */
    OK(MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_SELF));
    flag = 0;
    while (!flag) OK(MPI_Request_get_status_all(2, r, &flag, sts));
    CHECK(sts[0].MPI_TAG == 1 && sts[1].MPI_TAG == 2);
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(a == 5 && b == 5);
}

static void info(void) {
    MPI_Info in, got;
    OK(MPI_Info_create(&in));
    OK(MPI_Info_set(in, "phalanx_hint", "yes"));
    OK(MPI_Info_set(in, "mpi_assert_no_any_tag", "false"));
    int len = -1, flag = -1;
    OK(MPI_Info_get_valuelen(in, "phalanx_hint", &len, &flag));
    CHECK(flag == 1 && len == 3);
    OK(MPI_Info_get_valuelen(in, "absent", &len, &flag));
    CHECK(flag == 0);
    MPI_Comm d, e;
    OK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, in, &d));
    OK(MPI_Comm_get_info(d, &got));
    int nk = -1;
    OK(MPI_Info_get_nkeys(got, &nk));
    CHECK(nk == 2);
    char val[MPI_MAX_INFO_VAL];
    OK(MPI_Info_get(got, "phalanx_hint", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(flag && strcmp(val, "yes") == 0);
    OK(MPI_Info_free(&got));
    OK(MPI_Info_set(in, "phalanx_hint", "no"));
    OK(MPI_Comm_set_info(d, in));
    OK(MPI_Comm_dup(d, &e)); /* hints travel with a duplicate */
    OK(MPI_Comm_get_info(e, &got));
    OK(MPI_Info_get(got, "phalanx_hint", MPI_MAX_INFO_VAL - 1, val, &flag));
    CHECK(flag && strcmp(val, "no") == 0);
    OK(MPI_Info_free(&got));
    OK(MPI_Comm_free(&e));
    MPI_Request r;
    OK(MPI_Comm_idup_with_info(d, MPI_INFO_NULL, &e, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    OK(MPI_Comm_get_info(e, &got));
    OK(MPI_Info_get_nkeys(got, &nk));
    CHECK(nk == 0);
    OK(MPI_Info_free(&got));
    int x = rank, sum = 0;
    OK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, e));
    CHECK(sum == size * (size - 1) / 2);
    OK(MPI_Comm_free(&e));
    OK(MPI_Comm_free(&d));
    OK(MPI_Info_free(&in));
}

static void create_group(void) {
    MPI_Group world, evens, odds;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int ne = (size + 1) / 2, no = size / 2, re[64], ro[64];
    for (int i = 0; i < ne; i++) re[i] = 2 * i;
    for (int i = 0; i < no; i++) ro[i] = 2 * i + 1;
    OK(MPI_Group_incl(world, ne, re, &evens));
    OK(MPI_Group_incl(world, no, ro, &odds));
    MPI_Comm c1 = MPI_COMM_NULL, c2 = MPI_COMM_NULL;
    MPI_Group mine = rank % 2 ? odds : evens;
    /* Only the group's members call; two communicators from one group, by tag, made in
     * opposite orders on alternate members. */
    if ((rank / 2) % 2) {
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, mine, 11, &c1));
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, mine, 22, &c2));
    } else {
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, mine, 22, &c2));
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, mine, 11, &c1));
    }
    int n1, r1, s1 = 0, s2 = 0, one = 1;
    OK(MPI_Comm_size(c1, &n1));
    OK(MPI_Comm_rank(c1, &r1));
    CHECK(n1 == (rank % 2 ? no : ne) && r1 == rank / 2);
    OK(MPI_Allreduce(&one, &s1, 1, MPI_INT, MPI_SUM, c1));
    int tag2 = rank;
    OK(MPI_Allreduce(&tag2, &s2, 1, MPI_INT, MPI_SUM, c2));
    CHECK(s1 == n1);
    int expect = 0;
    for (int p = rank % 2; p < size; p += 2) expect += p;
    CHECK(s2 == expect);
    /* A caller outside the group gets MPI_COMM_NULL. */
    if (size > 1 && rank == 1) {
        MPI_Comm none;
        MPI_Group zero;
        int z = 0;
        OK(MPI_Group_incl(world, 1, &z, &zero));
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, zero, 5, &none));
        CHECK(none == MPI_COMM_NULL);
        OK(MPI_Group_free(&zero));
    }
    OK(MPI_Comm_free(&c1));
    OK(MPI_Comm_free(&c2));
    /* MPI-4's constructors from groups: a communicator of my parity, then an
     * intercommunicator between the parities (leaders: world ranks 0 and 1). */
    MPI_Comm fg;
    OK(MPI_Comm_create_from_group(mine, "phalanx.parity", MPI_INFO_NULL, MPI_ERRHANDLER_NULL, &fg));
    OK(MPI_Comm_size(fg, &n1));
    CHECK(n1 == (rank % 2 ? no : ne));
    if (size > 1) {
        MPI_Comm x;
        MPI_Group other = rank % 2 ? evens : odds;
        OK(MPI_Intercomm_create_from_groups(mine, 0, other, 0, "phalanx.across", MPI_INFO_NULL,
                                            MPI_ERRORS_RETURN, &x));
        int rs, w = rank, sum = -1;
        OK(MPI_Comm_remote_size(x, &rs));
        CHECK(rs == (rank % 2 ? ne : no));
        OK(MPI_Allreduce(&w, &sum, 1, MPI_INT, MPI_SUM, x));
        int expect2 = 0;
        for (int p = 1 - rank % 2; p < size; p += 2) expect2 += p;
        CHECK(sum == expect2);
        OK(MPI_Comm_free(&x));
    }
    OK(MPI_Comm_free(&fg));
    OK(MPI_Group_free(&evens));
    OK(MPI_Group_free(&odds));
    OK(MPI_Group_free(&world));
}

static void flush(void) {
    static char space[1 << 16];
    OK(MPI_Buffer_attach(space, sizeof space));
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int v[100];
    for (int i = 0; i < 100; i++) v[i] = rank + i;
    OK(MPI_Bsend(v, 100, MPI_INT, next, 3, MPI_COMM_WORLD));
    MPI_Request r;
    OK(MPI_Buffer_iflush(&r));
    int in[100];
    OK(MPI_Recv(in, 100, MPI_INT, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in[99] == prev + 99);
    OK(MPI_Bsend(v, 100, MPI_INT, next, 4, MPI_COMM_WORLD));
    OK(MPI_Recv(in, 100, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Buffer_flush());
    void *p;
    int n;
    OK(MPI_Buffer_detach(&p, &n));
    CHECK(p == space && n == (int)sizeof space);
    /* MPI-4.1 per-communicator buffers: a buffered send on the communicator uses its
     * own buffer (none on the process); flushes and detach wait for its messages. */
    static char cspace[1 << 16];
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_attach_buffer(d, cspace, sizeof cspace));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Bsend(v, 1, MPI_INT, next, 5, MPI_COMM_WORLD) == MPI_ERR_BUFFER);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Bsend(v, 100, MPI_INT, next, 6, d));
    OK(MPI_Comm_iflush_buffer(d, &r));
    OK(MPI_Recv(in, 100, MPI_INT, prev, 6, d, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in[5] == prev + 5);
    OK(MPI_Bsend(v, 100, MPI_INT, next, 7, d));
    OK(MPI_Recv(in, 100, MPI_INT, prev, 7, d, MPI_STATUS_IGNORE));
    OK(MPI_Comm_flush_buffer(d));
    MPI_Count cn;
    OK(MPI_Comm_detach_buffer_c(d, &p, &cn));
    CHECK(p == cspace && cn == (MPI_Count)sizeof cspace);
    OK(MPI_Comm_free(&d));
}

/* Handles as integers and back (MPI-5 toint/fromint, the classic c2f/f2c names). */
static void handles(void) {
    CHECK(MPI_Comm_fromint(MPI_Comm_toint(MPI_COMM_WORLD)) == MPI_COMM_WORLD);
    CHECK(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_NULL)) == MPI_COMM_NULL);
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    CHECK(MPI_Comm_fromint(MPI_Comm_toint(d)) == d);
    CHECK(MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE)) == MPI_DOUBLE);
    int x = 0, y;
    MPI_Request r;
    OK(MPI_Irecv(&y, 1, MPI_INT, 0, 77, MPI_COMM_SELF, &r));
    int ri = MPI_Request_c2f(r);
    CHECK(MPI_Request_c2f(r) == ri); /* the same integer each time */
    MPI_Request back = MPI_Request_f2c(ri);
    CHECK(back == r);
    OK(MPI_Send(&x, 1, MPI_INT, 0, 77, MPI_COMM_SELF));
    OK(MPI_Wait(&back, MPI_STATUS_IGNORE));
    MPI_Message m = MPI_MESSAGE_NULL;
    CHECK(MPI_Message_f2c(MPI_Message_c2f(m)) == MPI_MESSAGE_NULL);
    CHECK(MPI_Op_fromint(MPI_Op_toint(MPI_SUM)) == MPI_SUM);
    OK(MPI_Comm_free(&d));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size <= 128);
    sendrecv();
    get_status();
    info();
    create_group();
    flush();
    handles();
    OK(MPI_Finalize());
    if (rank == 0) printf("mpi4 ok\n");
    return 0;
}
