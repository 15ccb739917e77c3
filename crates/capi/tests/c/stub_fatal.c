/* An unimplemented function under the default handler ends the job, naming the call. */
#include "check.h"

int main(int argc, char **argv) {
    MPI_Request r;
    OK(MPI_Init(&argc, &argv));
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    printf("still alive after a stub\n");
    return 0;
}
