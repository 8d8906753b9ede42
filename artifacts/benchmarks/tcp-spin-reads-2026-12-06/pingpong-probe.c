#define _GNU_SOURCE
#include <sys/socket.h>
#include <sys/epoll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <errno.h>
static int LEN=8, EP=0, EXTRA=0, SPINPOLL=0, N=200000;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static void pair(int*a,int*b){int l=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in s={.sin_family=AF_INET,.sin_addr.s_addr=htonl(INADDR_LOOPBACK)};bind(l,(void*)&s,sizeof s);socklen_t sl=sizeof s;getsockname(l,(void*)&s,&sl);listen(l,1);*a=socket(AF_INET,SOCK_STREAM,0);connect(*a,(void*)&s,sizeof s);*b=accept(l,0,0);close(l);int one=1;setsockopt(*a,IPPROTO_TCP,TCP_NODELAY,&one,4);setsockopt(*b,IPPROTO_TCP,TCP_NODELAY,&one,4);fcntl(*a,F_SETFL,O_NONBLOCK);fcntl(*b,F_SETFL,O_NONBLOCK);}
struct side{int s, idle, ep; int idles[8];};
static void recv_all(struct side*x,char*b){int got=0;for(;;){
  if(SPINPOLL==1){struct pollfd p={.fd=x->ep,.events=POLLIN};struct timespec z={0,0};if(ppoll(&p,1,&z,NULL)<1){sched_yield();continue;}}
  if(SPINPOLL==2){struct epoll_event o[4];if(epoll_wait(x->ep,o,4,0)<1){sched_yield();continue;}}
  if(SPINPOLL==3){struct epoll_event o[4];if(epoll_wait(x->ep,o,4,0)<1){continue;}}
  if(SPINPOLL==4){struct pollfd p={.fd=x->ep,.events=POLLIN};struct timespec z={0,0};if(ppoll(&p,1,&z,NULL)<1){continue;}}
  if(SPINPOLL==5){struct epoll_event o[4];if(epoll_wait(x->ep,o,4,0)<1){__builtin_ia32_pause();continue;} }
  for(int k=0;k<EXTRA;k++) recv(x->idles[k],b,65536,MSG_DONTWAIT);
  int r=recv(x->s,b+got,65536,MSG_DONTWAIT); if(r>0){got+=r; if(got>=LEN) return;} else if(SPINPOLL==6) sched_yield(); }}
static void* server(void*p){struct side*x=p;char b[70000];for(;;){recv_all(x,b);send(x->s,b,LEN,MSG_DONTWAIT|MSG_NOSIGNAL);}}
static struct side mk(int s,int idle){struct side x={s,idle,-1};for(int k=0;k<8;k++){int a,b;pair(&a,&b);x.idles[k]=a;}if(EP||SPINPOLL){x.ep=epoll_create1(0);struct epoll_event e={.events=EPOLLIN};epoll_ctl(x.ep,EPOLL_CTL_ADD,s,&e);epoll_ctl(x.ep,EPOLL_CTL_ADD,idle,&e);}return x;}
int main(int c,char**v){LEN=atoi(v[1]);EP=atoi(v[2]);EXTRA=atoi(v[3]);SPINPOLL=atoi(v[4]);
int a,b,ia,ib;pair(&a,&b);pair(&ia,&ib);struct side cs=mk(a,ia),ss=mk(b,ib);pthread_t t;pthread_create(&t,0,server,&ss);
char buf[70000]={0};for(int i=0;i<20000;i++){send(a,buf,LEN,MSG_DONTWAIT|MSG_NOSIGNAL);recv_all(&cs,buf);}
double t0=now();for(int i=0;i<N;i++){send(a,buf,LEN,MSG_DONTWAIT|MSG_NOSIGNAL);recv_all(&cs,buf);}printf("len=%d ep=%d extra=%d spinpoll=%d: %.2f us\n",LEN,EP,EXTRA,SPINPOLL,(now()-t0)/N/1000);return 0;}
