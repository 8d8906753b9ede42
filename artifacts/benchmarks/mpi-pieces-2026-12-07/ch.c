#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc,char**argv){
  MPI_Init(&argc,&argv); int r; MPI_Comm_rank(MPI_COMM_WORLD,&r);
  size_t size=atol(argv[1]); int iters=200;
  char *buf=malloc(size); memset(buf,1,size);
  int ks[]={1,2,4,8,16,32};
  for(int rep=0;rep<3;rep++) for(int ki=0;ki<6;ki++){ int k=ks[ki]; size_t c=size/k; MPI_Request q[64];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0=MPI_Wtime();
    for(int i=0;i<iters;i++){
      if(r==0){ for(int j=0;j<k;j++) MPI_Irecv(buf+j*c,c,MPI_BYTE,1,j,MPI_COMM_WORLD,&q[j]);
                for(int j=0;j<k;j++) MPI_Isend(buf+j*c,c,MPI_BYTE,1,j,MPI_COMM_WORLD,&q[k+j]);
                int done=0; while(!done) MPI_Testall(2*k,q,&done,MPI_STATUSES_IGNORE); }
      else { for(int j=0;j<k;j++) MPI_Irecv(buf+j*c,c,MPI_BYTE,0,j,MPI_COMM_WORLD,&q[j]);
             int done=0; while(!done) MPI_Testall(k,q,&done,MPI_STATUSES_IGNORE);
             for(int j=0;j<k;j++) MPI_Isend(buf+j*c,c,MPI_BYTE,0,j,MPI_COMM_WORLD,&q[j]);
             done=0; while(!done) MPI_Testall(k,q,&done,MPI_STATUSES_IGNORE); }
    }
    double t=(MPI_Wtime()-t0)/iters*1e6;
    if(r==0) printf("size %zu chunks %2d: %.1f us\n",size,k,t);
  }
  MPI_Finalize();
}
