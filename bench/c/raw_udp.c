/* The kernel's floor for a 1 MiB one-way transfer over loopback UDP: 64 KiB (argv[1]) datagrams,
 * busy-polling, the receiver copying each into place, a 1-byte reply; no MAC, no protocol.
 * Against bench/c/raw_tcp.c it bounds what a UDP transport can reach next to TCP here.
 * Build: gcc -O2 -o raw_udp bench/c/raw_udp.c && ./raw_udp 65000 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <sched.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
int main(int argc,char**argv){
  int D=argc>1?atoi(argv[1]):65000; size_t M=1<<20; int iters=2000;
  int a=socket(AF_INET,SOCK_DGRAM,0), b=socket(AF_INET,SOCK_DGRAM,0);
  int big=32<<20; setsockopt(a,SOL_SOCKET,SO_RCVBUFFORCE,&big,4);setsockopt(b,SOL_SOCKET,SO_RCVBUFFORCE,&big,4);
  setsockopt(a,SOL_SOCKET,SO_SNDBUFFORCE,&big,4);setsockopt(b,SOL_SOCKET,SO_SNDBUFFORCE,&big,4);
  struct sockaddr_in sa={.sin_family=AF_INET,.sin_addr.s_addr=htonl(0x7f000001)}; socklen_t l=sizeof sa;
  bind(a,(void*)&sa,l); struct sockaddr_in aa; getsockname(a,(void*)&aa,&l);
  bind(b,(void*)&sa,l); struct sockaddr_in ba; l=sizeof ba; getsockname(b,(void*)&ba,&l);
  char *src=malloc(M), *dst=malloc(M); memset(src,1,M); memset(dst,0,M);
  char *rb=malloc(65536);
  int n=(M+D-1)/D;
  if(fork()==0){ pin(1);
    for(int it=0;it<iters;it++){ size_t got=0; while(got<M){ ssize_t k=recv(b,rb,65536,MSG_DONTWAIT); if(k>0){memcpy(dst+got,rb,k); got+=k;}}
      sendto(b,rb,1,0,(void*)&aa,sizeof aa);}
    exit(0);}
  pin(0); double t0=now();
  for(int it=0;it<iters;it++){ for(int i=0;i<n;i++){ size_t o=(size_t)i*D; size_t k=M-o<D?M-o:D; sendto(a,src+o,k,0,(void*)&ba,sizeof ba);} while(recv(a,rb,65536,MSG_DONTWAIT)<=0);}
  double t=now()-t0; wait(NULL);
  printf("udp dgram %d: %.1f us per MiB (one-way + tiny ack)\n",D,t/iters*1e6);
}
