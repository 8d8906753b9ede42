#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int size = atoi(argv[1]); int mode = atoi(argv[2]); int iters = 2000;
  char *buf = malloc(size); memset(buf, 1, size); char *cbuf = malloc(size); memset(cbuf, 2, size); char *rbuf = malloc(size); memset(rbuf, 3, size);
  int peer = 1 - rank;
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
      if (rank == 0) {
        MPI_Send(mode == 2 ? cbuf : buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
      }
      /* receive */
      if (mode == 2) {
        MPI_Recv(rbuf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (mode == 0) {
        MPI_Recv(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        /* wait until the message has arrived (unexpected), then post */
        int flag = 0; MPI_Status st;
        while (!flag) MPI_Iprobe(peer, 7, MPI_COMM_WORLD, &flag, &st);
        MPI_Request r; MPI_Irecv(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
      if (rank == 1) MPI_Send(mode == 2 ? cbuf : buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
    }
    double t = (MPI_Wtime() - t0) / iters * 1e6;
    if (t < best) best = t;
  }
  if (rank == 0) printf("size %d mode %s: %.1f us per round trip\n", size, mode == 2 ? "constant send buffer" : mode ? "echo, unexpected" : "echo, posted", best);
  MPI_Finalize();
  return 0;
}
