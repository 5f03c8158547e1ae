/* The machine's own limits for bench/core_ops.py: what a performance engineer's plain C reaches on this CPU, so that
 * uopir's figures read as a fraction of the hardware, not only of a peer library.
 *
 *   fma:   12 independent chains of 16-float vector FMAs per thread (enough to cover the FMA latency x ports of
 *          current x86 cores), one thread per core: GFLOP/s peak of one core x cores.
 *   read:  a sum over an array with 8 vector accumulators (the memory side of a reduction), GB/s read.
 *   copy:  b[i] = a[i], GB/s read + written (the memory side of an elementwise or row-wise op).
 *   triad: a[i] = b[i] + s * c[i] (STREAM's triad), GB/s of the three arrays.
 * Each figure is the best of `reps` runs, the work split in equal parts over `threads` pthreads (first touch by the
 * thread that later uses a part). Prints one `key=value` line. Build: cc -O3 -march=native -pthread.
 * Run: machine_limits <threads> <floats per array> <reps>
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef float v16 __attribute__((vector_size(64)));
#define CHAINS 12
#define FMA_ITERS 20000000L

enum { FMA, READ, COPY, TRIAD, INIT };

typedef struct {
  int op;
  float *a, *b, *c;
  int64_t n;
  float out;
} job;

static float fma_loop(long iters) {
  v16 acc[CHAINS];
  volatile float seed = 1.0f;
  v16 x = {0}, y = {0};
  for (int j = 0; j < 16; j++) { x[j] = 0.999999f * seed; y[j] = 1e-7f * seed; }
  for (int k = 0; k < CHAINS; k++) acc[k] = x + (float)k * y;
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
    for (int k = 0; k < CHAINS; k++) acc[k] = acc[k] * x + y;
  }
  float s = 0;
  for (int k = 0; k < CHAINS; k++)
    for (int j = 0; j < 16; j++) s += acc[k][j];
  return s;
}

static void *work(void *p) {
  job *w = (job *)p;
  int64_t n = w->n;
  float *restrict a = w->a, *restrict b = w->b, *restrict c = w->c;
  switch (w->op) {
    case FMA: w->out = fma_loop(w->n); break;
    case INIT:
      for (int64_t i = 0; i < n; i++) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 3.0f; }
      break;
    case READ: {
      v16 s[8] = {{0}};
      const v16 *va = (const v16 *)a;
      int64_t m = n / 16;
      for (int64_t i = 0; i + 8 <= m; i += 8)
        for (int k = 0; k < 8; k++) s[k] += va[i + k];
      float t = 0;
      for (int k = 0; k < 8; k++)
        for (int j = 0; j < 16; j++) t += s[k][j];
      w->out = t;
      break;
    }
    case COPY:
      for (int64_t i = 0; i < n; i++) b[i] = a[i];
      break;
    case TRIAD:
      for (int64_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
      break;
  }
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Seconds of one run of op over all threads (each on its own part). */
static double run(int op, int threads, float *a, float *b, float *c, int64_t n, float *sink) {
  pthread_t tid[256];
  job jobs[256];
  int64_t part = (n / threads) & ~(int64_t)127;
  double t0 = now();
  for (int i = 0; i < threads; i++) {
    int64_t off = (int64_t)i * part;
    jobs[i] = (job){op, a + off, b + off, c + off, op == FMA ? FMA_ITERS / 10 : part, 0};
    pthread_create(&tid[i], NULL, work, &jobs[i]);
  }
  for (int i = 0; i < threads; i++) {
    pthread_join(tid[i], NULL);
    *sink += jobs[i].out;
  }
  return now() - t0;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  int64_t n = argc > 2 ? atoll(argv[2]) : (1 << 25);
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  if (threads < 1 || threads > 256 || n < 128 * threads || reps < 1) {
    fprintf(stderr, "usage: machine_limits <threads 1..256> <floats per array> <reps>\n");
    return 2;
  }
  float *a = aligned_alloc(64, n * sizeof(float)), *b = aligned_alloc(64, n * sizeof(float)),
        *c = aligned_alloc(64, n * sizeof(float));
  if (!a || !b || !c) return 1;
  float sink = 0;
  int64_t used = ((n / threads) & ~(int64_t)127) * threads;
  run(INIT, threads, a, b, c, n, &sink);
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  for (int r = 0; r < reps; r++)
    for (int op = FMA; op <= TRIAD; op++) {
      double t = run(op, threads, a, b, c, n, &sink);
      if (t < best[op]) best[op] = t;
    }
  double fma_flops = (double)threads * (FMA_ITERS / 10) * CHAINS * 16 * 2;
  printf("fma_gflops=%.2f read_gbps=%.2f copy_gbps=%.2f triad_gbps=%.2f threads=%d floats=%lld sink=%g\n",
         fma_flops / best[FMA] / 1e9, 4.0 * used / best[READ] / 1e9, 8.0 * used / best[COPY] / 1e9,
         12.0 * used / best[TRIAD] / 1e9, threads, (long long)used, (double)sink);
  free(a);
  free(b);
  free(c);
  return 0;
}
