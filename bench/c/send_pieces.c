/* What a segmented UDP send costs the sender by how its datagrams lie in memory: 1 MiB in
 * 1472-byte segments (UDP_SEGMENT, 44 a call), to a loopback socket with UDP_GRO and a
 * minimal receive buffer, so the kernel copies and queues each call and then drops it
 * (nothing reads; no receiver's work is timed). Best of 5 × 3000 MiB, µs per MiB.
 *   mode 0: one contiguous piece per call (the floor)
 *   mode 1: a header (H bytes), a payload and a 28-byte trailer per segment, as iovecs
 *   mode 2: two pieces per segment (payload, then trailer and the next header)
 *   mode 3: each call's 64 KiB copied into a staging buffer first, then one piece
 *   mode 4: each segment's payload copied into a staging buffer at its place (headers
 *           and trailers around it), then one piece — what phalanx's gathered sends do
 * Build: gcc -O2 -o send_pieces bench/c/send_pieces.c
 * Run:   for m in 0 1 2 3 4; do taskset -c 0 ./send_pieces $m 36; done */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SOL_UDP_ 17
#define UDP_SEGMENT_ 103
#define UDP_GRO_ 104

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: send_pieces MODE [HEADER_BYTES]\n");
    return 1;
  }
  int mode = atoi(argv[1]), h = argc > 2 ? atoi(argv[2]) : 36;
  int seg = 1472, t = 28, p = seg - h - t, iters = 3000;
  size_t M = 1 << 20;
  if (h < 0 || h > 64 || p <= 0) {
    fprintf(stderr, "send_pieces: header bytes 0..64\n");
    return 1;
  }
  int r = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  socklen_t l = sizeof a;
  if (bind(r, (void *)&a, l) || getsockname(r, (void *)&a, &l)) {
    perror("bind");
    return 1;
  }
  int small = 1, one = 1, big = 32 << 20;
  setsockopt(r, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  setsockopt(r, SOL_UDP_, UDP_GRO_, &one, sizeof one); /* no segmentation on arrival */
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (setsockopt(s, SOL_UDP_, UDP_SEGMENT_, &seg, sizeof seg)) {
    perror("UDP_SEGMENT");
    return 1;
  }
  setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
  char *src = malloc(M + 4096);
  memset(src, 1, M + 4096);
  static char hdr[128], trl[128], stage[65536];
  struct iovec v[200];
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    for (int it = 0; it < iters; it++) {
      size_t o = 0;
      while (o < M) {
        int n = 0;
        size_t tot = 0;
        if (mode == 0 || mode == 3) {
          size_t k = M - o < (size_t)(44 * seg) ? M - o : (size_t)(44 * seg);
          char *from = src + o;
          if (mode == 3) {
            memcpy(stage, src + o, k);
            from = stage;
          }
          v[0].iov_base = from;
          v[0].iov_len = k;
          n = 1;
          o += k;
        } else {
          while (o < M && tot + seg <= 65507) {
            size_t k = M - o < (size_t)p ? M - o : (size_t)p;
            if (mode == 1) {
              v[n].iov_base = hdr, v[n++].iov_len = h;
              v[n].iov_base = src + o, v[n++].iov_len = k;
              v[n].iov_base = trl, v[n++].iov_len = t;
            } else if (mode == 2) {
              if (n == 0) v[n].iov_base = hdr, v[n++].iov_len = h;
              v[n].iov_base = src + o, v[n++].iov_len = k;
              v[n].iov_base = trl, v[n++].iov_len = t + h;
            } else {
              memcpy(stage + tot + h, src + o, k);
            }
            o += k;
            tot += h + k + t;
          }
          if (mode == 2) v[n - 1].iov_len = t;
          if (mode == 4) {
            v[0].iov_base = stage;
            v[0].iov_len = tot;
            n = 1;
          }
        }
        struct msghdr m = {.msg_name = &a, .msg_namelen = sizeof a, .msg_iov = v, .msg_iovlen = n};
        sendmsg(s, &m, 0);
      }
    }
    double dt = (now() - t0) / iters * 1e6;
    if (dt < best) best = dt;
  }
  printf("mode %d header %d: %.1f us per MiB (best of 5)\n", mode, h, best);
  return 0;
}
