/* Shared helpers of phalanx's C ABI tests. */
#ifndef CHECK_H
#define CHECK_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                      \
            exit(3);                                                             \
        }                                                                        \
    } while (0)

#define OK(call) CHECK((call) == MPI_SUCCESS)
#endif
