/* stream_copy: the machine's memory bandwidth, measured as STREAM's "Copy"
 * kernel (c[i] = a[i] over arrays far larger than the caches).
 *
 *   stream_copy [MiB per array, default 256] [threads, default 1] [trials, default 10]
 *
 * How it works: each thread owns an equal slice of two arrays of doubles,
 * first-touched by that thread; all threads copy their slice at once, between
 * two barriers, `trials` times. STREAM reports the best trial; on a shared
 * virtual machine one trial can be timed short (a stalled clock read), so the
 * median trial is printed too and is the figure to quote. The rate counts the
 * bytes read plus the bytes written (16 bytes per element), STREAM's
 * convention. It prints one line:
 *   copy: threads 2 array 256 MiB best 12.345 GB/s median 11.987 GB/s (avg 11.9 GB/s)
 * A collective that moves B bytes of payload through memory cannot beat this
 * rate divided by the bytes of memory traffic it needs per payload byte. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int byValue(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

typedef struct {
  double* a;
  double* c;
  size_t n;
  int trials;
  pthread_barrier_t* start;
  pthread_barrier_t* end;
} Slice;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void* copyLoop(void* arg) {
  Slice* s = (Slice*)arg;
  for (size_t i = 0; i < s->n; ++i) {
    s->a[i] = 1.0;
    s->c[i] = 0.0;
  }                                         /* first touch */
  for (int t = 0; t < s->trials + 1; ++t) { /* one warm-up trial */
    pthread_barrier_wait(s->start);
    double* restrict c = s->c;
    const double* restrict a = s->a;
    for (size_t i = 0; i < s->n; ++i) c[i] = a[i];
    pthread_barrier_wait(s->end);
  }
  return NULL;
}

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  int trials = argc > 3 ? atoi(argv[3]) : 10;
  if (mib == 0 || threads < 1 || trials < 1) {
    fprintf(stderr, "usage: stream_copy [MiB per array] [threads] [trials]\n");
    return 1;
  }
  size_t n = mib * 1024 * 1024 / sizeof(double);
  double* a = aligned_alloc(64, n * sizeof(double));
  double* c = aligned_alloc(64, n * sizeof(double));
  double* times = calloc((size_t)trials, sizeof(double));
  if (!a || !c || !times) {
    fprintf(stderr, "stream_copy: out of memory\n");
    return 1;
  }
  pthread_barrier_t start, end;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&end, NULL, (unsigned)threads + 1);
  Slice* slices = calloc((size_t)threads, sizeof(Slice));
  pthread_t* tids = calloc((size_t)threads, sizeof(pthread_t));
  size_t per = n / (size_t)threads;
  for (int t = 0; t < threads; ++t) {
    Slice s = {a + per * (size_t)t, c + per * (size_t)t, per, trials, &start, &end};
    slices[t] = s;
    pthread_create(&tids[t], NULL, copyLoop, &slices[t]);
  }
  double sum = 0;
  for (int t = 0; t < trials + 1; ++t) {
    pthread_barrier_wait(&start);
    double t0 = now();
    pthread_barrier_wait(&end);
    double dt = now() - t0;
    if (t == 0) continue;
    sum += dt;
    times[t - 1] = dt;
  }
  for (int t = 0; t < threads; ++t) pthread_join(tids[t], NULL);
  double bytes = 2.0 * (double)(per * (size_t)threads) * sizeof(double);
  qsort(times, (size_t)trials, sizeof(double), byValue); /* times[0] is the best trial */
  double median =
      trials % 2 ? times[trials / 2] : 0.5 * (times[trials / 2 - 1] + times[trials / 2]);
  printf("copy: threads %d array %zu MiB best %.3f GB/s median %.3f GB/s (avg %.3f GB/s)\n",
         threads, mib, bytes / times[0] / 1e9, bytes / median / 1e9, bytes / (sum / trials) / 1e9);
  free(a);
  free(c);
  free(slices);
  free(tids);
  free(times);
  return 0;
}
