#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>
#include <poll.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <arpa/inet.h>
static int cfd, sfd, LEN=48, MODE=0, YIELD=0, EXTRA=-1, EXTRA2=-1;
static void snd(int fd, char*m){ while(send(fd,m,LEN,MSG_DONTWAIT|MSG_NOSIGNAL)<0); }
static void rcv(int fd, char*m, int extra){ int got=0; char big[4096];
  while(got<LEN){
    if(MODE==1){ struct pollfd p[2]={{fd,POLLIN,0},{extra,POLLIN,0}}; int n=poll(p, extra>=0?2:1, 0); if(n<=0){ if(YIELD) sched_yield(); continue;} }
    if(MODE==2 && extra>=0){ recv(extra,big,4096,MSG_DONTWAIT); }
    ssize_t n=recv(fd,big,4096,MSG_DONTWAIT); if(n>0) got+=n; else if(YIELD) sched_yield(); } }
static void *echo(void *a){ char m[64]; for(;;){ rcv(sfd,m,EXTRA2); snd(sfd,m);} }
static double now(){ struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e9+t.tv_nsec; }
static void pair(int l, struct sockaddr_in *a, int *c, int *s){ *c=socket(AF_INET,SOCK_STREAM,0); connect(*c,(void*)a,sizeof *a); *s=accept(l,0,0); int one=1; setsockopt(*c,IPPROTO_TCP,TCP_NODELAY,&one,sizeof one); setsockopt(*s,IPPROTO_TCP,TCP_NODELAY,&one,sizeof one);}
int main(int argc,char**argv){
  MODE=atoi(argv[1]); YIELD=atoi(argv[2]); int two=atoi(argv[3]);
  int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={0}; a.sin_family=AF_INET; a.sin_addr.s_addr=htonl(INADDR_LOOPBACK);
  bind(l,(void*)&a,sizeof a); listen(l,4); socklen_t al=sizeof a; getsockname(l,(void*)&a,&al);
  pair(l,&a,&cfd,&sfd); if(two) pair(l,&a,&EXTRA,&EXTRA2);
  pthread_t t; pthread_create(&t,0,echo,0);
  char m[64]; memset(m,1,64); int N=200000;
  for(int i=0;i<20000;i++){snd(cfd,m);rcv(cfd,m,EXTRA);}
  double s=now(); for(int i=0;i<N;i++){ snd(cfd,m); rcv(cfd,m,EXTRA);} double e=now();
  printf("mode=%d yield=%d two=%d %.0f ns\n", MODE,YIELD,two,(e-s)/N);
  return 0;
}
