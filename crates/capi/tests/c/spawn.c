/* Intercommunicators and dynamic processes from C: MPI_Comm_spawn(_multiple),
 * MPI_Comm_get_parent, MPI_Intercomm_create/merge, MPI_Comm_test_inter,
 * MPI_Comm_remote_size/group, point-to-point, MPI_Bcast (MPI_ROOT) and MPI_Barrier on
 * intercommunicators, MPI_Comm_dup of one, MPI_Comm_disconnect; and a spawn that cannot
 * start its program fails with MPI_ERR_SPAWN under MPI_ERRORS_RETURN. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void check_merged(MPI_Comm merged, int expect_size) {
    int rank, size, sum = -1;
    OK(MPI_Comm_rank(merged, &rank));
    OK(MPI_Comm_size(merged, &size));
    CHECK(size == expect_size);
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(sum == size * (size - 1) / 2);
}

static int child(MPI_Comm parent, const char *arg) {
    int rank, size, flag = 0, rsize = 0, psize = 0, data[4] = {0, 0, 0, 0};
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    OK(MPI_Comm_test_inter(parent, &flag));
    CHECK(flag == 1);
    OK(MPI_Comm_remote_size(parent, &rsize));
    OK(MPI_Comm_size(parent, &psize));
    CHECK(psize == size);
    if (strcmp(arg, "child") == 0) {
        CHECK(size == 2);
        /* The parents' root broadcasts to us. */
        OK(MPI_Bcast(data, 4, MPI_INT, 0, parent));
        CHECK(data[0] == 11 && data[1] == 22 && data[2] == 33 && data[3] == rsize);
        /* Point-to-point with the parents' rank 0. */
        int v = 100 + rank, back = -1;
        MPI_Status st;
        OK(MPI_Send(&v, 1, MPI_INT, 0, 5, parent));
        OK(MPI_Recv(&back, 1, MPI_INT, 0, 6, parent, &st));
        CHECK(back == 200 + rank && st.MPI_SOURCE == 0 && st.MPI_TAG == 6);
        OK(MPI_Barrier(parent));
        MPI_Comm merged;
        OK(MPI_Intercomm_merge(parent, 1, &merged));
        int mrank;
        OK(MPI_Comm_rank(merged, &mrank));
        CHECK(mrank == rsize + rank);
        check_merged(merged, rsize + size);
        OK(MPI_Comm_free(&merged));
    } else {
        CHECK(size == 3);
        CHECK((strcmp(arg, "first") == 0) == (rank < 2));
        MPI_Comm merged;
        OK(MPI_Intercomm_merge(parent, 1, &merged));
        check_merged(merged, rsize + size);
        OK(MPI_Comm_free(&merged));
    }
    OK(MPI_Comm_disconnect(&parent));
    CHECK(parent == MPI_COMM_NULL);
    printf("child %d of %d (%s): spawn ok\n", rank, size, arg);
    return 0;
}

/* Two halves of the world (even and odd world ranks) joined by MPI_Intercomm_create. */
static void halves(int rank, int size) {
    if (size < 2) return;
    MPI_Comm half, inter, dup;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    /* Leaders: world ranks 0 and 1 (each its half's rank 0). */
    OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter));
    int flag = 0, lsize, rsize, lrank;
    OK(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag == 1);
    OK(MPI_Comm_test_inter(half, &flag));
    CHECK(flag == 0);
    OK(MPI_Comm_size(inter, &lsize));
    OK(MPI_Comm_remote_size(inter, &rsize));
    OK(MPI_Comm_rank(inter, &lrank));
    CHECK(lsize == (size + 1 - rank % 2) / 2 && lsize + rsize == size && lrank == rank / 2);
    MPI_Group rg;
    int gsize;
    OK(MPI_Comm_remote_group(inter, &rg));
    OK(MPI_Group_size(rg, &gsize));
    CHECK(gsize == rsize);
    OK(MPI_Group_free(&rg));
    /* Every even rank i sends to odd rank i % rsize and so on; each receives what its
     * senders (remote ranks j with j % lsize == lrank) sent. */
    OK(MPI_Comm_dup(inter, &dup));
    int mine = rank * 10, expect = 0, got = 0;
    MPI_Request rq;
    OK(MPI_Isend(&mine, 1, MPI_INT, lrank % rsize, 3, dup, &rq));
    for (int j = 0; j < rsize; j++) {
        if (j % lsize != lrank) continue;
        int v;
        MPI_Status st;
        OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 3, dup, &st));
        /* Remote rank j is world rank 2j (+1 for the odd half). */
        CHECK(v == (2 * st.MPI_SOURCE + (1 - rank % 2)) * 10);
        expect += (2 * j + (1 - rank % 2)) * 10;
        got += v;
    }
    CHECK(got == expect);
    OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    OK(MPI_Barrier(dup));
    MPI_Comm merged;
    OK(MPI_Intercomm_merge(inter, rank % 2, &merged));
    int mrank;
    OK(MPI_Comm_rank(merged, &mrank));
    CHECK(mrank == (rank % 2 == 0 ? rank / 2 : (size + 1) / 2 + rank / 2));
    check_merged(merged, size);
    OK(MPI_Comm_free(&merged));
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&inter));
    OK(MPI_Comm_free(&half));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    MPI_Comm parent;
    OK(MPI_Comm_get_parent(&parent));
    if (parent != MPI_COMM_NULL) {
        CHECK(argc == 2);
        child(parent, argv[1]);
        OK(MPI_Finalize());
        return 0;
    }
    int rank, size;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));

    /* A program that cannot run: MPI_ERR_SPAWN at every member, nothing started. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm none = MPI_COMM_WORLD;
    int rc = MPI_Comm_spawn("/nonexistent/phalanx-spawn-test", MPI_ARGV_NULL, 1, MPI_INFO_NULL,
                            0, MPI_COMM_WORLD, &none, MPI_ERRCODES_IGNORE);
    int cls = -1;
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_SPAWN && none == MPI_COMM_NULL);
    /* Two programs whose second cannot start (an interpreter that does not exist): the
     * first one's processes, already running, are stopped; MPI_ERR_SPAWN again, and the
     * spawns below still work. */
    char bad[64];
    snprintf(bad, sizeof bad, "/tmp/phalanx-spawn-bad-%d.sh", (int)getpid());
    if (rank == 0) {
        FILE *f = fopen(bad, "w");
        CHECK(f != NULL);
        fputs("#!/nonexistent/interpreter\n", f);
        fclose(f);
        CHECK(chmod(bad, 0755) == 0);
    }
    {
        char *cmds2[] = {argv[0], bad};
        char *cargs[] = {"child", NULL};
        char **argvs2[] = {cargs, MPI_ARGV_NULL};
        int counts2[] = {2, 1};
        none = MPI_COMM_WORLD;
        rc = MPI_Comm_spawn_multiple(2, cmds2, argvs2, counts2, NULL, 0, MPI_COMM_WORLD, &none,
                                     MPI_ERRCODES_IGNORE);
        OK(MPI_Error_class(rc, &cls));
        CHECK(cls == MPI_ERR_SPAWN && none == MPI_COMM_NULL);
    }
    if (rank == 0) unlink(bad);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* One program, two processes. */
    char *args[] = {"child", NULL};
    int codes[2] = {-1, -1};
    MPI_Comm inter;
    OK(MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes));
    if (rank == 0) CHECK(codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS);
    int flag = 0, rsize = 0, lsize = 0;
    OK(MPI_Comm_test_inter(inter, &flag));
    OK(MPI_Comm_remote_size(inter, &rsize));
    OK(MPI_Comm_size(inter, &lsize));
    CHECK(flag == 1 && rsize == 2 && lsize == size);
    int data[4] = {11, 22, 33, size};
    OK(MPI_Bcast(data, 4, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
    if (rank == 0) {
        for (int i = 0; i < 2; i++) {
            int v;
            MPI_Status st;
            OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 5, inter, &st));
            CHECK(v == 100 + st.MPI_SOURCE);
            int back = 200 + st.MPI_SOURCE;
            OK(MPI_Send(&back, 1, MPI_INT, st.MPI_SOURCE, 6, inter));
        }
    }
    OK(MPI_Barrier(inter));
    MPI_Comm merged;
    OK(MPI_Intercomm_merge(inter, 0, &merged));
    int mrank;
    OK(MPI_Comm_rank(merged, &mrank));
    CHECK(mrank == rank);
    check_merged(merged, size + 2);
    OK(MPI_Comm_free(&merged));
    OK(MPI_Comm_disconnect(&inter));
    CHECK(inter == MPI_COMM_NULL);

    /* Two programs (here: the same one with different arguments) in one new world. */
    char *cmds[] = {argv[0], argv[0]};
    char *first[] = {"first", NULL}, *second[] = {"second", NULL};
    char **argvs[] = {first, second};
    int counts[] = {2, 1};
    MPI_Info infos[] = {MPI_INFO_NULL, MPI_INFO_NULL};
    OK(MPI_Comm_spawn_multiple(2, cmds, argvs, counts, infos, 0, MPI_COMM_WORLD, &inter,
                               MPI_ERRCODES_IGNORE));
    OK(MPI_Comm_remote_size(inter, &rsize));
    CHECK(rsize == 3);
    OK(MPI_Intercomm_merge(inter, 0, &merged));
    check_merged(merged, size + 3);
    OK(MPI_Comm_free(&merged));
    OK(MPI_Comm_disconnect(&inter));

    halves(rank, size);
    printf("rank %d of %d: spawn ok\n", rank, size);
    OK(MPI_Finalize());
    return 0;
}
