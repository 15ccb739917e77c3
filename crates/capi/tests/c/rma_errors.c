/* Errors of one-sided calls. Without arguments: under MPI_ERRORS_RETURN on the window,
 * each wrong call returns its class and the window goes on working (a put beyond the
 * window MPI_ERR_RMA_RANGE, outside an epoch MPI_ERR_RMA_SYNC, bad displacement, rank,
 * operation, lock type, assertion; freeing inside a lock epoch), a user handler made by
 * MPI_Win_create_errhandler gets the window and the class, calls on MPI_WIN_NULL go to
 * the world's handler. With "fatal": a put outside an epoch under the default handler
 * ends the job. Runs on any number of ranks. */
#include "check.h"
#include <string.h>

static MPI_Win seen_win = MPI_WIN_NULL;
static int seen_code, calls;

static void handler(MPI_Win *win, int *code, ...) {
    seen_win = *win;
    seen_code = *code;
    calls++;
}

static void mysum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)in;
    (void)inout;
    (void)len;
    (void)dt;
}

int main(int argc, char **argv) {
    int rank, p;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    int next = (rank + 1) % p;
    int mem[4] = {0, 0, 0, 0}, v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    MPI_Win win;
    OK(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    if (argc > 1 && !strcmp(argv[1], "fatal")) {
        MPI_Put(v, 1, MPI_INT, next, 0, 1, MPI_INT, win);
        printf("still alive after a put outside an epoch\n");
        return 0;
    }
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK(MPI_Put(v, 1, MPI_INT, next, 0, 1, MPI_INT, win) == MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_unlock(next, win) == MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_complete(win) == MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_wait(win) == MPI_ERR_RMA_SYNC);

    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    /* Beyond the window: 4 ints at displacement 1, or 1 at displacement 4. */
    CHECK(MPI_Put(v, 4, MPI_INT, next, 1, 4, MPI_INT, win) == MPI_ERR_RMA_RANGE);
    CHECK(MPI_Put(v, 1, MPI_INT, next, 4, 1, MPI_INT, win) == MPI_ERR_RMA_RANGE);
    CHECK(MPI_Get(v, 1, MPI_INT, next, 4, 1, MPI_INT, win) == MPI_ERR_RMA_RANGE);
    CHECK(MPI_Put(v, 1, MPI_INT, next, -1, 1, MPI_INT, win) == MPI_ERR_DISP);
    CHECK(MPI_Put(v, 1, MPI_INT, p, 0, 1, MPI_INT, win) == MPI_ERR_RANK);
    CHECK(MPI_Put(v, -1, MPI_INT, next, 0, 1, MPI_INT, win) == MPI_ERR_COUNT);
    CHECK(MPI_Put(v, 2, MPI_INT, next, 0, 1, MPI_INT, win) == MPI_ERR_TYPE);
    CHECK(MPI_Put(v, 1, MPI_DATATYPE_NULL, next, 0, 1, MPI_INT, win) == MPI_ERR_TYPE);
    /* Operations: user-defined, undefined on the type, MINLOC, NO_OP without a fetch. */
    MPI_Op user;
    OK(MPI_Op_create(mysum, 1, &user));
    CHECK(MPI_Accumulate(v, 1, MPI_INT, next, 0, 1, MPI_INT, user, win) == MPI_ERR_OP);
    double d = 1.0;
    CHECK(MPI_Accumulate(&d, 1, MPI_DOUBLE, next, 0, 1, MPI_DOUBLE, MPI_BAND, win) ==
          MPI_ERR_OP);
    CHECK(MPI_Accumulate(v, 1, MPI_2INT, next, 0, 1, MPI_2INT, MPI_MAXLOC, win) == MPI_ERR_OP);
    CHECK(MPI_Accumulate(v, 1, MPI_INT, next, 0, 1, MPI_INT, MPI_NO_OP, win) == MPI_ERR_OP);
    CHECK(MPI_Accumulate(v, 1, MPI_INT, next, 0, 1, MPI_INT, MPI_OP_NULL, win) == MPI_ERR_OP);
    CHECK(MPI_Accumulate(&d, 1, MPI_DOUBLE, next, 0, 2, MPI_INT, MPI_SUM, win) ==
          MPI_ERR_TYPE);
    int res = -1;
    CHECK(MPI_Fetch_and_op(v, &res, MPI_INT, next, 0, user, win) == MPI_ERR_OP);
    OK(MPI_Op_free(&user));
    /* The window still works: a good put in the same epoch. */
    OK(MPI_Put(&v[7], 1, MPI_INT, next, 3, 1, MPI_INT, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(mem[3] == 8 && mem[0] == 0);

    /* Locks: bad type and assertion; freeing inside a lock epoch leaves the window. */
    CHECK(MPI_Win_lock(999, next, 0, win) == MPI_ERR_LOCKTYPE);
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, next, 3, win) == MPI_ERR_ASSERT);
    CHECK(MPI_Win_fence(1, win) == MPI_ERR_ASSERT);
    OK(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win) == MPI_ERR_RMA_SYNC);
    MPI_Win keep = win;
    CHECK(MPI_Win_free(&win) == MPI_ERR_RMA_SYNC);
    CHECK(win == keep);
    OK(MPI_Get(&res, 1, MPI_INT, next, 3, 1, MPI_INT, win));
    OK(MPI_Win_unlock(next, win));
    CHECK(res == 8);

    /* A user handler gets the window and the class, and the call returns it. */
    MPI_Errhandler eh;
    OK(MPI_Win_create_errhandler(handler, &eh));
    OK(MPI_Win_set_errhandler(win, eh));
    CHECK(MPI_Put(v, 1, MPI_INT, next, 0, 1, MPI_INT, win) == MPI_ERR_RMA_SYNC);
    CHECK(calls == 1 && seen_win == win && seen_code == MPI_ERR_RMA_SYNC);
    OK(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK(calls == 2 && seen_code == MPI_ERR_OTHER);
    OK(MPI_Errhandler_free(&eh));

    /* Calls on no window raise on MPI_COMM_WORLD's handler. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Win_fence(0, MPI_WIN_NULL) == MPI_ERR_WIN);
    MPI_Win none = MPI_WIN_NULL;
    CHECK(MPI_Win_free(&none) == MPI_ERR_WIN);
    /* Creating calls check their arguments on every rank before communicating. */
    MPI_Win bad = (MPI_Win)0x777;
    CHECK(MPI_Win_create(mem, sizeof mem, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &bad) ==
          MPI_ERR_DISP);
    CHECK(bad == MPI_WIN_NULL);
    CHECK(MPI_Win_create(mem, -4, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &bad) == MPI_ERR_SIZE);
    CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_NULL, &bad) == MPI_ERR_COMM);
    /* Attaching to a window that is not dynamic is a flavor error. */
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK(MPI_Win_attach(win, v, sizeof v) == MPI_ERR_RMA_FLAVOR);
    MPI_Aint sz;
    int du;
    void *b;
    CHECK(MPI_Win_shared_query(win, 0, &sz, &du, &b) == MPI_ERR_RMA_FLAVOR);
    OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL);
    printf("rma_errors ok rank %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
