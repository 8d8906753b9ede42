#include <stdio.h>
#include <sched.h>
#include <time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <fcntl.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
 int l=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a;memset(&a,0,sizeof a);a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);a.sin_port=0;
 bind(l,(void*)&a,sizeof a);listen(l,1);socklen_t al=sizeof a;getsockname(l,(void*)&a,&al);
 int c=socket(AF_INET,SOCK_STREAM,0);connect(c,(void*)&a,sizeof a);int s=accept(l,0,0);
 fcntl(s,F_SETFL,O_NONBLOCK);char buf[4096];int N=1000000;
 double t0=now();for(int i=0;i<N;i++)recv(s,buf,sizeof buf,0);double t1=now();
 printf("recv EAGAIN %.1f ns\n",(t1-t0)/N);
 t0=now();for(int i=0;i<N;i++)recv(s,buf,sizeof buf,MSG_PEEK);t1=now();
 printf("peek EAGAIN %.1f ns\n",(t1-t0)/N);
 t0=now();for(int i=0;i<N;i++)sched_yield();t1=now();
 printf("sched_yield %.1f ns\n",(t1-t0)/N);
 t0=now();for(int i=0;i<N;i++)now();t1=now();
 printf("clock %.1f ns\n",(t1-t0)/N);
}
