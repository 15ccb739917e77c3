/* One TCP connection over loopback, 1 MiB one way and a 1-byte reply, busy-polling: the
 * kernel's floor next to bench/c/raw_udp.c. Build: gcc -O2 -o raw_tcp bench/c/raw_tcp.c */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <time.h>
#include <sched.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
int main(){ size_t M=1<<20; int iters=2000;
  int ls=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in sa={.sin_family=AF_INET,.sin_addr.s_addr=htonl(0x7f000001)}; socklen_t l=sizeof sa;
  bind(ls,(void*)&sa,l); getsockname(ls,(void*)&sa,&l); listen(ls,1);
  char *src=malloc(M),*dst=malloc(M); memset(src,1,M);
  if(fork()==0){pin(1); int c=socket(AF_INET,SOCK_STREAM,0); connect(c,(void*)&sa,sizeof sa); int one=1; setsockopt(c,IPPROTO_TCP,TCP_NODELAY,&one,4);
    for(int it=0;it<iters;it++){size_t got=0; while(got<M){ssize_t k=recv(c,dst+got,M-got,MSG_DONTWAIT); if(k>0) got+=k;} send(c,dst,1,0);} exit(0);}
  pin(0); int c=accept(ls,0,0); int one=1; setsockopt(c,IPPROTO_TCP,TCP_NODELAY,&one,4); char x;
  double t0=now(); for(int it=0;it<iters;it++){ size_t s=0; while(s<M){ssize_t k=send(c,src+s,M-s,MSG_DONTWAIT); if(k>0) s+=k;} while(recv(c,&x,1,MSG_DONTWAIT)<=0);} 
  printf("tcp: %.1f us per MiB\n",(now()-t0)/iters*1e6); wait(NULL);}
