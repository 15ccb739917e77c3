/* At MPI_THREAD_FUNNELED a thread other than the main one may call MPI_Wtime and the
 * other thread-agnostic functions, and nothing else: its MPI_Comm_rank ends the job with
 * an error naming the call and the thread level. */
#include "check.h"
#include <pthread.h>

static void *other(void *arg) {
    (void)arg;
    int flag = -1, rank = -1;
    CHECK(MPI_Wtime() >= 0.0);
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1);
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 0);
    printf("thread-agnostic calls ok\n");
    fflush(stdout);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); /* ends the job */
    printf("not reached\n");
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    CHECK(provided == MPI_THREAD_FUNNELED);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other, NULL) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    MPI_Finalize();
    return 0;
}
