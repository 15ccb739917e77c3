/* Generalized requests (MPI-4.1 §13.2) at MPI_THREAD_MULTIPLE: completed by another
 * thread while the main one waits; query_fn fills the status MPI_Wait returns (source,
 * tag, error, count through MPI_Status_set_elements) and runs only after
 * MPI_Grequest_complete; free_fn runs exactly once, after query_fn, in the call that
 * completes the request, or in MPI_Request_free / MPI_Grequest_complete, whichever is
 * last; cancel_fn gets the complete flag; Waitall/Waitany/Testall mix generalized and
 * point-to-point requests; callback errors are returned. Prints "grequest ok rank R". */
#include "check.h"
#include <pthread.h>
#include <string.h>
#include <time.h>

struct op {
    int id;
    int queries, frees, cancels, cancel_complete, cancelled;
    int query_err, free_err;
    MPI_Request req;
};

static int query_fn(void *extra, MPI_Status *st) {
    struct op *o = extra;
    o->queries++;
    CHECK(o->frees == 0); /* query_fn comes before free_fn */
    st->MPI_SOURCE = 100 + o->id;
    st->MPI_TAG = 200 + o->id;
    st->MPI_ERROR = MPI_SUCCESS;
    OK(MPI_Status_set_elements(st, MPI_INT, o->id));
    OK(MPI_Status_set_cancelled(st, o->cancelled));
    return o->query_err;
}

static int free_fn(void *extra) {
    struct op *o = extra;
    o->frees++;
    return o->free_err;
}

static int cancel_fn(void *extra, int complete) {
    struct op *o = extra;
    o->cancels++;
    o->cancel_complete = complete;
    if (!complete) o->cancelled = 1;
    return MPI_SUCCESS;
}

static void start(struct op *o, int id) {
    memset(o, 0, sizeof *o);
    o->id = id;
    OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, o, &o->req));
    CHECK(o->req != MPI_REQUEST_NULL);
}

/* Completes o's request after a pause, from another thread. */
static void *completer(void *arg) {
    struct op *o = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    OK(MPI_Grequest_complete(o->req));
    return NULL;
}

static pthread_t later(struct op *o) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, completer, o) == 0);
    return t;
}

static int cls(int e) {
    int c;
    OK(MPI_Error_class(e, &c));
    return c;
}

int main(int argc, char **argv) {
    int provided, rank, size, flag, n;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    MPI_Status st;

    /* Incomplete: Test and Request_get_status say so without calling query_fn. */
    struct op a;
    start(&a, 5);
    MPI_Request keep = a.req;
    OK(MPI_Test(&a.req, &flag, &st));
    CHECK(!flag && a.req == keep);
    OK(MPI_Request_get_status(a.req, &flag, &st));
    CHECK(!flag && a.queries == 0);
    /* Completed by another thread while MPI_Wait waits. */
    pthread_t t = later(&a);
    st.MPI_ERROR = MPI_SUCCESS; /* MPI_Wait leaves the error field alone */
    OK(MPI_Wait(&a.req, &st));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(a.req == MPI_REQUEST_NULL);
    CHECK(st.MPI_SOURCE == 105 && st.MPI_TAG == 205 && st.MPI_ERROR == MPI_SUCCESS);
    OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(n == 5);
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag);
    CHECK(a.queries >= 1 && a.frees == 1 && a.cancels == 0);

    /* MPI_STATUS_IGNORE: query_fn still runs (on a status of MPI's), then free_fn. */
    start(&a, 1);
    OK(MPI_Grequest_complete(a.req));
    OK(MPI_Request_get_status(a.req, &flag, &st)); /* looks, does not free */
    CHECK(flag && st.MPI_TAG == 201 && a.frees == 0);
    OK(MPI_Wait(&a.req, MPI_STATUS_IGNORE));
    CHECK(a.req == MPI_REQUEST_NULL && a.queries >= 2 && a.frees == 1);

    /* Cancel before and after completion. */
    start(&a, 2);
    OK(MPI_Cancel(&a.req));
    CHECK(a.cancels == 1 && a.cancel_complete == 0);
    OK(MPI_Grequest_complete(a.req));
    OK(MPI_Cancel(&a.req));
    CHECK(a.cancels == 2 && a.cancel_complete == 1);
    OK(MPI_Wait(&a.req, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag && a.frees == 1);

    /* Request_free before completion: free_fn at MPI_Grequest_complete, no query. */
    start(&a, 3);
    MPI_Request h = a.req;
    OK(MPI_Request_free(&a.req));
    CHECK(a.req == MPI_REQUEST_NULL && a.frees == 0);
    OK(MPI_Grequest_complete(h));
    CHECK(a.frees == 1 && a.queries == 0);
    /* ... and after: free_fn in MPI_Request_free. */
    start(&a, 3);
    OK(MPI_Grequest_complete(a.req));
    OK(MPI_Request_free(&a.req));
    CHECK(a.req == MPI_REQUEST_NULL && a.frees == 1 && a.queries == 0);

    /* Waitall: a generalized request completed by a thread, beside a receive and a send. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size, in = -1, outv = rank;
    struct op g;
    start(&g, 4);
    MPI_Request rs[3];
    rs[1] = g.req;
    OK(MPI_Irecv(&in, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Isend(&outv, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &rs[2]));
    t = later(&g);
    MPI_Status sts[3];
    OK(MPI_Waitall(3, rs, sts));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(rs[0] == MPI_REQUEST_NULL && rs[1] == MPI_REQUEST_NULL && rs[2] == MPI_REQUEST_NULL);
    CHECK(in == left && sts[0].MPI_SOURCE == left && sts[0].MPI_TAG == 9);
    CHECK(sts[1].MPI_SOURCE == 104 && sts[1].MPI_TAG == 204 && g.frees == 1);
    OK(MPI_Get_count(&sts[1], MPI_INT, &n));
    CHECK(n == 4);

    /* Testall false leaves a completed grequest alone (no free_fn); Waitany takes it. */
    struct op b, c;
    start(&b, 6);
    start(&c, 7);
    MPI_Request two[2] = {b.req, c.req};
    OK(MPI_Grequest_complete(c.req));
    OK(MPI_Testall(2, two, &flag, MPI_STATUSES_IGNORE));
    CHECK(!flag && b.frees == 0 && c.frees == 0 && two[1] == c.req);
    int idx;
    OK(MPI_Waitany(2, two, &idx, &st));
    CHECK(idx == 1 && two[1] == MPI_REQUEST_NULL && st.MPI_TAG == 207 && c.frees == 1);
    t = later(&b);
    OK(MPI_Waitany(2, two, &idx, &st));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(idx == 0 && st.MPI_SOURCE == 106 && b.frees == 1);
    OK(MPI_Waitany(2, two, &idx, &st));
    CHECK(idx == MPI_UNDEFINED);
    /* Testany / Testsome. */
    start(&b, 8);
    OK(MPI_Testany(1, &b.req, &idx, &flag, &st));
    CHECK(!flag && b.queries == 0);
    OK(MPI_Grequest_complete(b.req));
    int outc, idxs[1];
    OK(MPI_Testsome(1, &b.req, &outc, idxs, &st));
    CHECK(outc == 1 && idxs[0] == 0 && st.MPI_TAG == 208 && b.frees == 1);

    /* Errors under MPI_ERRORS_RETURN. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    start(&a, 1);
    a.free_err = MPI_ERR_OTHER;
    OK(MPI_Grequest_complete(a.req));
    CHECK(cls(MPI_Grequest_complete(a.req)) == MPI_ERR_REQUEST); /* twice */
    CHECK(cls(MPI_Wait(&a.req, &st)) == MPI_ERR_OTHER);       /* free_fn's error */
    CHECK(a.req == MPI_REQUEST_NULL && a.frees == 1);
    start(&a, 1);
    a.query_err = MPI_ERR_ARG;
    OK(MPI_Grequest_complete(a.req));
    CHECK(cls(MPI_Wait(&a.req, &st)) == MPI_ERR_ARG); /* query_fn's error: stays */
    CHECK(a.req != MPI_REQUEST_NULL && a.frees == 0);
    OK(MPI_Request_free(&a.req));
    CHECK(a.req == MPI_REQUEST_NULL && a.frees == 1);
    CHECK(cls(MPI_Grequest_complete(a.req)) == MPI_ERR_REQUEST);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    printf("grequest ok rank %d\n", rank);
    return 0;
}
