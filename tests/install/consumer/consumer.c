/* consumer.c - a program outside grove's tree, built against an installed
 * grove (find_package(grove) or pkg-config). Two processes (the parent is
 * rank 0, a forked child rank 1) all-reduce a vector and check every value;
 * exit 0 and one line "consumer: ok ..." when all is right. */
#define _POSIX_C_SOURCE 200809L
#include <grove/grove.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kCount = 1000 };

static int run_rank(int rank, groveUniqueId id) {
  groveComm_t comm;
  groveResult_t r = groveCommInitRank(&comm, 2, id, rank);
  if (r != groveSuccess) {
    fprintf(stderr, "consumer: rank %d: init failed: %s\n", rank, groveGetErrorString(r));
    return 1;
  }
  float* buf = malloc(kCount * sizeof(float));
  for (int i = 0; i < kCount; ++i) buf[i] = (float)(i + rank);
  r = groveAllReduce(buf, buf, kCount, groveFloat32, groveSum, comm, NULL);
  int bad = 0;
  for (int i = 0; r == groveSuccess && i < kCount; ++i) bad += buf[i] != (float)(2 * i + 1);
  if (r != groveSuccess || bad)
    fprintf(stderr, "consumer: rank %d: all-reduce %s, %d wrong values: %s\n", rank,
            r == groveSuccess ? "returned" : "failed", bad, groveGetLastError(comm));
  free(buf);
  groveCommDestroy(comm);
  return r != groveSuccess || bad;
}

int main(void) {
  /* Fork first, then let rank 0 make the id (it starts grove's bootstrap
   * root, a thread, which a forked child must not inherit) and hand it to
   * rank 1 through a pipe. */
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid_t child = fork();
  if (child < 0) return 1;
  groveUniqueId id;
  if (child == 0) {
    close(fds[1]);
    ssize_t got = read(fds[0], &id, sizeof id);
    _exit(got == (ssize_t)sizeof id ? run_rank(1, id) : 1);
  }
  close(fds[0]);
  int version = 0;
  int failed = groveGetVersion(&version) != groveSuccess || groveGetUniqueId(&id) != groveSuccess;
  if (failed) fprintf(stderr, "consumer: cannot get grove's version or a unique id\n");
  failed = failed || write(fds[1], &id, sizeof id) != (ssize_t)sizeof id;
  close(fds[1]);
  if (!failed) failed = run_rank(0, id);
  int status = 0;
  waitpid(child, &status, 0);
  failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (!failed) printf("consumer: ok (grove %d, 2 ranks, %d floats all-reduced)\n", version, kCount);
  return failed;
}
