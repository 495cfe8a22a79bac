/* fabric_mpi_check: an MPI job whose data must cross an emulated fabric.
 *
 * How it works: every rank fills a buffer of COUNT int32 with values that
 * depend on (rank, index, iteration), all-reduces it (MPI_SUM) ITERS times
 * and compares every element with the sum it computes itself, so a wrong or
 * lost byte is caught. Rank 0 prints one line "fabric_mpi_check: OK ..." or
 * the first mismatch; the exit status is 0 only when every rank matched.
 * `fabric_test.py mpi` runs it through `fabric mpirun` and checks with the
 * tc counters that the bytes went over the fabric links, not the management
 * bridge.
 *
 * Usage: fabric_mpi_check [COUNT [ITERS]]   (default 262144 elements, 4 iterations)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The value rank r contributes at index i in iteration it (small, so sums never overflow). */
static int32_t valueOf(int r, long i, int it) {
  return (int32_t)((r * 7 + i * 13 + it * 5) % 1021);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long count = argc > 1 ? atol(argv[1]) : 262144;
  int iters = argc > 2 ? atoi(argv[2]) : 4;
  if (count <= 0 || iters <= 0) {
    if (rank == 0) fprintf(stderr, "fabric_mpi_check: COUNT and ITERS must be > 0\n");
    MPI_Finalize();
    return 2;
  }
  int32_t* in = malloc(sizeof(int32_t) * (size_t)count);
  int32_t* out = malloc(sizeof(int32_t) * (size_t)count);
  if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 2);
  long bad = 0, firstBad = -1;
  for (int it = 0; it < iters; ++it) {
    for (long i = 0; i < count; ++i) in[i] = valueOf(rank, i, it);
    MPI_Allreduce(in, out, (int)count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    for (long i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int r = 0; r < size; ++r) want += valueOf(r, i, it);
      if (out[i] != want && bad++ == 0) firstBad = i;
    }
  }
  long totalBad = 0;
  MPI_Reduce(&bad, &totalBad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (bad)
    fprintf(stderr, "fabric_mpi_check: rank %d: %ld wrong values, first at index %ld\n", rank, bad,
            firstBad);
  if (rank == 0 && totalBad == 0)
    printf("fabric_mpi_check: OK %d all-reduces of %ld bytes on %d ranks\n", iters,
           count * (long)sizeof(int32_t), size);
  free(in);
  free(out);
  MPI_Finalize();
  return totalBad || bad ? 1 : 0;
}
