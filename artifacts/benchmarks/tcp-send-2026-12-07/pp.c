#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <arpa/inet.h>
static int cfd, sfd, mode, LEN=48;
static void snd(int fd, char*m){ if(mode==0){ while(send(fd,m,LEN,MSG_DONTWAIT|MSG_NOSIGNAL)<0); } else { struct iovec v={m,LEN}; struct msghdr h={0}; h.msg_iov=&v; h.msg_iovlen=1; while(sendmsg(fd,&h,MSG_DONTWAIT|MSG_NOSIGNAL)<0);} }
static void rcv(int fd, char*m){ int got=0; while(got<LEN){ ssize_t n=recv(fd,m+got,LEN-got,MSG_DONTWAIT); if(n>0) got+=n; } }
static void *echo(void *a){ char m[64]; for(;;){ rcv(sfd,m); snd(sfd,m);} }
static double now(){ struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1e9+t.tv_nsec; }
int main(int argc,char**argv){
  mode=atoi(argv[1]);
  int l=socket(AF_INET,SOCK_STREAM,0); struct sockaddr_in a={0}; a.sin_family=AF_INET; a.sin_addr.s_addr=htonl(INADDR_LOOPBACK);
  bind(l,(void*)&a,sizeof a); listen(l,1); socklen_t al=sizeof a; getsockname(l,(void*)&a,&al);
  cfd=socket(AF_INET,SOCK_STREAM,0); connect(cfd,(void*)&a,sizeof a); sfd=accept(l,0,0);
  int one=1; setsockopt(cfd,IPPROTO_TCP,TCP_NODELAY,&one,sizeof one); setsockopt(sfd,IPPROTO_TCP,TCP_NODELAY,&one,sizeof one);
  pthread_t t; pthread_create(&t,0,echo,0);
  char m[64]; memset(m,1,64); int N=200000;
  for(int i=0;i<20000;i++){snd(cfd,m);rcv(cfd,m);}
  double s=now(); for(int i=0;i<N;i++){ snd(cfd,m); rcv(cfd,m);} double e=now();
  printf("%s %.0f ns\n", mode?"sendmsg":"send   ", (e-s)/N);
  return 0;
}
