/* The kernel's floor for a ping-pong of SIZE bytes between two test hosts (network
 * namespaces joined by veth and a bridge, MTU 1500), the same pattern as osu_like's
 * latency: one side sends SIZE, the other receives all of it into place and sends SIZE
 * back. UDP: segmented sends (UDP_SEGMENT of SEG-byte datagrams, at most 64 KiB a call),
 * coalesced receives (UDP_GRO), busy-polling, no MAC, no protocol, nothing lost or
 * acknowledged; received straight into place, or with BOUNCE=1 in the environment into
 * one 64 KiB buffer and copied into place from there, as phalanx's receive ring does
 * (the kernel's copy into a large destination is the slower one here). TCP: one
 * connection, TCP_NODELAY, busy-polling, received into place.
 * Printed: microseconds per one-way transfer (half a round trip), as osu_like prints.
 *
 * Build: gcc -O2 -o raw_pingpong bench/c/raw_pingpong.c
 * Run:   ip netns exec xns-1 ./raw_pingpong udp server 10.233.77.11 7000 1048576 2000 1472 &
 *        ip netns exec xns-0 ./raw_pingpong udp client 10.233.77.11 7000 1048576 2000 1472
 * (test hosts as `bench/compare.sh` makes them with NETNS=2; run both sides pinned to
 * different cores with taskset, alternating the variants). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

/* Gives up after 10 s without progress: a lost datagram would otherwise hang the run. */
static void check_stall(double since, const char *side) {
  if (now() - since > 10.0) {
    fprintf(stderr, "raw_pingpong %s: no progress for 10 s (a datagram lost?)\n", side);
    exit(2);
  }
}

static struct sockaddr_in peer;
static int seg;

static void udp_send(int s, const char *src, size_t size) {
  size_t per = (65507 / seg) * seg;
  for (size_t o = 0; o < size; o += per) {
    size_t k = size - o < per ? size - o : per;
    while (sendto(s, src + o, k, 0, (void *)&peer, sizeof peer) < 0)
      if (errno != EAGAIN && errno != ENOBUFS) die("sendto");
  }
}

static char bounce[65536];
static int use_bounce;

static void udp_recv(int s, char *dst, size_t size, const char *side) {
  size_t got = 0;
  unsigned long idle = 0;
  double t = now();
  while (got < size) {
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    size_t room = 65536 < size - got ? 65536 : size - got;
    char *to = use_bounce ? bounce : dst + got;
    ssize_t k = recvfrom(s, to, room, MSG_DONTWAIT, (void *)&from, &fl);
    if (k > 0) {
      if (use_bounce) memcpy(dst + got, bounce, k);
      if (!peer.sin_port) peer = from;
      got += k;
      t = now();
    } else if (++idle % 1024 == 0) {
      check_stall(t, side);
    }
  }
}

static void tcp_send(int s, const char *src, size_t size) {
  size_t o = 0;
  while (o < size) {
    ssize_t k = send(s, src + o, size - o, MSG_DONTWAIT);
    if (k > 0) o += k;
    else if (k < 0 && errno != EAGAIN) die("send");
  }
}

static void tcp_recv(int s, char *dst, size_t size, const char *side) {
  size_t got = 0;
  double t = now();
  while (got < size) {
    ssize_t k = recv(s, dst + got, size - got, MSG_DONTWAIT);
    if (k > 0) {
      got += k;
      t = now();
    } else if (k == 0) {
      fprintf(stderr, "raw_pingpong %s: connection closed\n", side);
      exit(2);
    } else {
      check_stall(t, side);
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: raw_pingpong udp|tcp server|client ADDR PORT SIZE ITERS [SEG]\n");
    return 1;
  }
  int udp = !strcmp(argv[1], "udp");
  int server = !strcmp(argv[2], "server");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[4]))};
  inet_pton(AF_INET, argv[3], &a.sin_addr);
  size_t size = strtoul(argv[5], 0, 10);
  int iters = atoi(argv[6]), warm = iters / 10 + 1;
  seg = argc > 7 ? atoi(argv[7]) : 1472;
  use_bounce = getenv("BOUNCE") && atoi(getenv("BOUNCE"));
  char *buf = malloc(size);
  memset(buf, server, size);
  int big = 32 << 20, one = 1, s;
  if (udp) {
    s = socket(AF_INET, SOCK_DGRAM, 0);
    setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, 4);
    setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &big, 4);
    if (setsockopt(s, SOL_UDP, UDP_SEGMENT, &seg, 4)) die("UDP_SEGMENT");
    if (setsockopt(s, SOL_UDP, UDP_GRO, &one, 4)) die("UDP_GRO");
    if (server) {
      if (bind(s, (void *)&a, sizeof a)) die("bind");
    } else {
      peer = a;
    }
  } else if (server) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, 4);
    if (bind(l, (void *)&a, sizeof a) || listen(l, 1)) die("bind");
    s = accept(l, 0, 0);
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, 4);
  } else {
    s = socket(AF_INET, SOCK_STREAM, 0);
    for (int i = 0; connect(s, (void *)&a, sizeof a); i++) {
      if (i > 100) die("connect");
      usleep(20000);
      close(s);
      s = socket(AF_INET, SOCK_STREAM, 0);
    }
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, 4);
  }
  if (udp && !server) usleep(100000); /* the server binds first */
  double t0 = 0;
  for (int i = 0; i < iters + warm; i++) {
    if (i == warm) t0 = now();
    if (server) {
      if (udp) {
        udp_recv(s, buf, size, "server");
        udp_send(s, buf, size);
      } else {
        tcp_recv(s, buf, size, "server");
        tcp_send(s, buf, size);
      }
    } else {
      if (udp) {
        udp_send(s, buf, size);
        udp_recv(s, buf, size, "client");
      } else {
        tcp_send(s, buf, size);
        tcp_recv(s, buf, size, "client");
      }
    }
  }
  if (!server)
    printf("%s %zu %.1f\n", udp ? "udp" : "tcp", size, (now() - t0) / iters / 2 * 1e6);
  return 0;
}
