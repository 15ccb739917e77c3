#define _DEFAULT_SOURCE
/* Rendezvous sends that leave from the send buffer (zero-copy over UDP): the data
 * arrives right, a send completes only when it may (its buffer is then reusable at once),
 * and a freed request's buffer may be unmapped once the receiver has the message — even
 * while the sender's window still holds datagrams of it (loss makes it retransmit them):
 * with three ranks the news comes through rank 2, so it carries no acknowledgement of
 * rank 0's datagrams to rank 1. Two or three ranks; run with PHALANX_TRANSPORT=udp, with
 * and without PHALANX_FAULTS.
 *
 * Usage: zerocopy [rounds] */
#include "check.h"
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LEN (1 << 20)

static unsigned char fill(int round, size_t i) {
    return (unsigned char)(i * 131 + (size_t)round * 7 + (i >> 12));
}

static void expect(const unsigned char *b, size_t len, int round) {
    for (size_t i = 0; i < len; i++) {
        if (b[i] != fill(round, i)) {
            fprintf(stderr, "round %d: byte %zu is %u, not %u\n", round, i, b[i],
                    fill(round, i));
            exit(3);
        }
    }
}

int main(int argc, char **argv) {
    int rank, size, rounds = argc > 1 ? atoi(argv[1]) : 6;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size == 2 || size == 3);
    int news = size - 1;              /* who tells rank 0 that rank 1 has the message */
    int tell = size == 3 ? 2 : 0;     /* whom rank 1 tells */
    unsigned char *buf = malloc(LEN), *other = malloc(LEN);
    MPI_Datatype kb;
    OK(MPI_Type_contiguous(1024, MPI_BYTE, &kb));
    OK(MPI_Type_commit(&kb));
    CHECK(buf && other);
    int ack = 0;
    for (int round = 0; round < rounds; round++) {
        /* 1. Blocking sends one way, back to back: each returns with its buffer
         * reusable, so it is overwritten with the next round's bytes at once. */
        if (rank == 2) {
            /* only the relay of step 3 */
        } else if (rank == 0) {
            for (int k = 0; k < 4; k++) {
                for (size_t i = 0; i < LEN; i++) buf[i] = fill(round * 4 + k, i);
                OK(MPI_Send(buf, LEN, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
                memset(buf, 0xee, LEN);
            }
        } else {
            for (int k = 0; k < 4; k++) {
                OK(MPI_Recv(buf, LEN, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                expect(buf, LEN, round * 4 + k);
            }
        }
        /* 2. One buffer in two concurrent sends, and odd lengths (a last datagram
         * shorter than the others). */
        size_t odd = LEN - 1 - (size_t)round * 977;
        if (rank == 2) {
            /* only the relay of step 3 */
        } else if (rank == 0) {
            for (size_t i = 0; i < LEN; i++) buf[i] = fill(round, i);
            MPI_Request r[2];
            OK(MPI_Isend(buf, LEN, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &r[0]));
            OK(MPI_Isend(buf, (int)odd, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &r[1]));
            OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        } else {
            MPI_Status st;
            int count;
            OK(MPI_Recv(other, LEN, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK((size_t)count == odd);
            expect(other, odd, round);
            OK(MPI_Recv(buf, LEN, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            expect(buf, LEN, round);
        }
        /* 3. Freed requests: the buffer is unmapped as soon as the receiver says it has
         * the message, without waiting for anything else: a plain send, an active
         * persistent send, a send of a derived (contiguous) type, each freed at once
         * (before the receiver's clear-to-send) and late (the clear-to-send has come:
         * the data is in the window). */
        static const int kinds[6] = {0, 0, 1, 2, 1, 2}; /* plain, persistent, derived */
        static const int lates[6] = {0, 1, 1, 1, 0, 0};
        for (int how = 0; how < 6; how++) {
            int late = lates[how], tag = 20 + 2 * how, reply = 21 + 2 * how;
            if (rank == 0) {
                unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                CHECK(m != MAP_FAILED);
                for (size_t i = 0; i < LEN; i++) m[i] = fill(round + 100 + how, i);
                MPI_Request r;
                if (kinds[how] == 1) {
                    OK(MPI_Send_init(m, LEN, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &r));
                    OK(MPI_Start(&r));
                } else if (kinds[how] == 2) {
                    OK(MPI_Isend(m, LEN / 1024, kb, 1, tag, MPI_COMM_WORLD, &r));
                } else {
                    OK(MPI_Isend(m, LEN, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &r));
                }
                if (late) {
                    /* Rank 1 sends a note once its receive is posted. */
                    int posted = 0, flag = 0;
                    MPI_Request p;
                    OK(MPI_Irecv(&posted, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, &p));
                    while (!flag) OK(MPI_Test(&p, &flag, MPI_STATUS_IGNORE));
                    for (int i = 0; i < 100 && !flag; i++) {
                        OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
                        usleep(20);
                    }
                    flag = 0;
                    OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
                }
                if (r != MPI_REQUEST_NULL) OK(MPI_Request_free(&r));
                CHECK(r == MPI_REQUEST_NULL);
                OK(MPI_Recv(&ack, 1, MPI_INT, news, reply, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
                CHECK(ack == round);
                CHECK(munmap(m, LEN) == 0);
            } else if (rank == 1) {
                MPI_Request q;
                /* Late: the message announced first, so that the clear-to-send leaves
                 * with the receive and before the note (one ordered stream to rank 0). */
                if (late) OK(MPI_Probe(0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                OK(MPI_Irecv(buf, LEN, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &q));
                if (late) OK(MPI_Send(&round, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
                OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
                expect(buf, LEN, round + 100 + how);
                ack = round;
                OK(MPI_Send(&ack, 1, MPI_INT, tell, reply, MPI_COMM_WORLD));
            } else {
                OK(MPI_Recv(&ack, 1, MPI_INT, 1, reply, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                OK(MPI_Send(&ack, 1, MPI_INT, 0, reply, MPI_COMM_WORLD));
            }
        }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Type_free(&kb));
    free(buf);
    free(other);
    if (rank == 0) printf("zerocopy ok\n");
    OK(MPI_Finalize());
    return 0;
}
