/* uopir's launch graph: run a list of compiled host kernels in one native call, parallel ones on a persistent
 * pool of worker threads (uopir.backends.cpu.graph loads it; compiled once by the C backend's compiler into the
 * compile cache).
 *
 * A kernel is `void k(void *buf0, ..., int64_t var0, ..., [int64_t core_id, int64_t core_count])`: every argument
 * is one integer register or stack slot wide, so a kernel is called through a prototype of that many int64_t
 * (pointers and int64_t pass alike on the 64-bit ABIs uopir runs on: x86-64 System V, AArch64). `uopir_call`
 * dispatches on the count, up to UOPIR_MAX_ARGS.
 *
 * The pool: workers are made on first need and live for the process. A job (one parallel kernel split across
 * `cores` shares) is published by bumping a generation counter; workers spin on it (a pause instruction per turn)
 * for a short while after a job (spin_ns: an eager launch's next parallel kernel may follow at once), then sleep on a
 * condition variable. While a graph that holds parallel kernels runs, the pool is kept hot: workers spin up to
 * hot_spin_ns between its jobs (the serial kernels between two parallel ones), and a worker asleep anyway is nudged
 * awake one entry before the graph's next parallel kernel, so its wake-up (tens of microseconds on a busy machine)
 * overlaps the serial kernel instead of delaying the parallel one. Both spins are bounded: an idle pool sleeps.
 * Every thread, the calling one included, claims shares one at a time from a counter tagged with the job (OpenMP's
 * dynamic schedule): when a worker is slow to wake or has no core (a machine busy with other processes) the
 * calling thread runs its share too, instead of waiting for it (an LSTM's 2-share projection took 15 us that way on
 * a loaded 2-core machine, 2 us run alone). The caller then waits for shares still running, spinning briefly
 * (spin_ns, also in a hot graph: on a busy machine the worker it waits for may need its core; spinning 300 us there
 * made ResNet-18 25% slower at load 5) then sleeping. Workers spinning longer than YIELD_AFTER_NS yield their core
 * at each check, and a worker that finds it lost its core while spinning (a machine with more runnable threads than
 * cores) sleeps at once: its spin would take time from them, the caller included. One job runs at a time (two Python threads launching at once take turns on `submit`). After fork
 * the child has no workers: they are made again on its first job. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_getcpu, sched_setaffinity */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define UOPIR_MAX_ARGS 40
#define UOPIR_MAX_WORKERS 255
static _Atomic int64_t spin_ns = 5000;  /* how long a waiting thread spins before it sleeps (uopir_set_spin) */
/* the same while a graph with parallel kernels runs (uopir_set_hot_spin): the serial kernels between two of its
 * parallel ones take up to a few hundred microseconds; a longer gap sleeps, and the next parallel entry nudges */
static _Atomic int64_t hot_spin_ns = 300000;
/* After a parallel job of D ns, waiting workers spin up to min(D / 2, linger_max_ns) (uopir_set_linger) before they
 * sleep, whatever spin_ns says (unless it is 0: sleep at once): a caller that runs long parallel kernels back to back
 * (an eager loop, a TinyJit replay of a one-kernel graph, with ~10-20 us of Python between two) finds its workers
 * awake instead of paying a wake-up, which on a 2-core VM often outlasted half the kernel, so that the calling thread
 * ran both shares itself: a 16M f32 sum read one core's 45-48 GB/s and a 4096x1024 softmax swung 21-44 GB/s between
 * runs. The spin costs at most half the job's own time per job, and yields like any spin past YIELD_AFTER_NS (a
 * worker that kept its core through the linger instead was preempted inside its next share at load 9: the caller
 * then waited a time slice for it, median sum 38 -> 12 GB/s). */
static _Atomic int64_t linger_max_ns = 500000;
static _Atomic int64_t linger_ns;  /* the current linger: set by the submitter after each job */
#define YIELD_AFTER_NS 10000 /* a worker spinning longer yields its core at each check (a busy machine's threads) */
#define CONTENDED_NS 50000   /* a gap this long between two spin checks: the worker lost its core; it sleeps */

typedef struct {
  void *fn;        /* NULL: a copy, args = destination, source, bytes */
  int64_t *args;   /* the kernel's buffer pointers and variable values (core_id/core_count are appended here) */
  int32_t nargs;   /* without core_id/core_count */
  int32_t cores;   /* 0: a serial kernel; n >= 1: a parallel kernel split across n shares */
} uopir_entry;

int uopir_max_args(void) { return UOPIR_MAX_ARGS; }

/* How long waiting threads spin before they sleep, in nanoseconds (0: sleep at once); returns the old value. */
int64_t uopir_set_spin(int64_t ns) { return atomic_exchange(&spin_ns, ns); }

/* How long waiting threads spin while a graph with parallel kernels runs; returns the old value. */
int64_t uopir_set_hot_spin(int64_t ns) { return atomic_exchange(&hot_spin_ns, ns); }

/* The most a worker lingers (spins) after a long parallel job, in nanoseconds (0: no linger); returns the old value. */
int64_t uopir_set_linger(int64_t ns) {
  atomic_store(&linger_ns, 0);
  return atomic_exchange(&linger_max_ns, ns);
}

static int uopir_call(void *fn, const int64_t *a, int n) {
  switch (n) {
    case 0: ((void (*)(void))fn)(); return 0;
    case 1: ((void (*)(int64_t))fn)(a[0]); return 0;
    case 2: ((void (*)(int64_t, int64_t))fn)(a[0], a[1]); return 0;
    case 3: ((void (*)(int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2]); return 0;
    case 4: ((void (*)(int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3]); return 0;
    case 5: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4]); return 0;
    case 6: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5]); return 0;
    case 7: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); return 0;
    case 8: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); return 0;
    case 9: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]); return 0;
    case 10: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]); return 0;
    case 11: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]); return 0;
    case 12: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]); return 0;
    case 13: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12]); return 0;
    case 14: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13]); return 0;
    case 15: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14]); return 0;
    case 16: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]); return 0;
    case 17: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16]); return 0;
    case 18: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17]); return 0;
    case 19: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18]); return 0;
    case 20: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19]); return 0;
    case 21: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20]); return 0;
    case 22: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21]); return 0;
    case 23: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22]); return 0;
    case 24: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23]); return 0;
    case 25: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24]); return 0;
    case 26: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25]); return 0;
    case 27: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26]); return 0;
    case 28: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27]); return 0;
    case 29: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28]); return 0;
    case 30: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29]); return 0;
    case 31: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30]); return 0;
    case 32: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31]); return 0;
    case 33: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32]); return 0;
    case 34: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33]); return 0;
    case 35: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34]); return 0;
    case 36: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35]); return 0;
    case 37: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36]); return 0;
    case 38: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37]); return 0;
    case 39: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38]); return 0;
    case 40: ((void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t))fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35], a[36], a[37], a[38], a[39]); return 0;
    default: return -1;
  }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pthread_mutex_t submit = PTHREAD_MUTEX_INITIALIZER;  /* one job at a time */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;      /* guards sleeping on wake/done */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t generation;
/* The current job's shares: high 32 bits the job's tag (its generation, truncated), low 32 the next unclaimed share.
 * A thread claims a share by a compare-and-swap that also checks the tag, so one that read the job late (the job
 * finished and the next one published meanwhile) claims nothing of the next job with the old job's fields. */
static _Atomic uint64_t claim;
static _Atomic int finished;  /* shares of the current job that have run */
static int nworkers;
/* the job: written by the submitting thread before it publishes the tag, read by a thread before its claim; a read
 * that races a newer job's writes is discarded by the failing claim (fields are atomics for that reason) */
static struct { _Atomic(void *) fn; _Atomic(const int64_t *) args; _Atomic int nargs; _Atomic int cores; } job;
static int atfork_set;
static _Atomic int hot;               /* graphs with parallel kernels running now: waiting threads spin longer */
static _Atomic uint64_t nudge;        /* bumped (under mu) to wake sleeping workers ahead of a job */
static _Atomic int sleepers;          /* workers asleep on `wake` (a hint: a nudge is skipped when none are) */
static uint64_t start_generation[UOPIR_MAX_WORKERS];  /* the generation a worker was made in: its first job is next */
static pthread_t worker_threads[UOPIR_MAX_WORKERS];
static int steered_cpu = -1;  /* the cpu the workers were last kept off (under submit) */

/* Keep the workers off the cpu the submitting thread runs on (the rest of the cpus it may run on): a worker the
 * scheduler woke there (it picks the waker's cpu when none is idle, and a worker goes back to the cpu it last ran on)
 * can only run once the submitter's own share is done, and then finds no share left, so that the kernel ran on one
 * core. Measured at load 9 on 2 cores, a 1 ms sum in 2 shares back to back: the worker ran a share in 35 of 120
 * calls, in 26 of them on the caller's cpu after the caller's share. A system call per worker only when the
 * submitter's cpu changes; Linux only, and nothing when the thread may run on one cpu only. */
static void steer_workers(void) {
#ifdef __linux__
  int cpu = sched_getcpu();
  if (cpu < 0 || cpu == steered_cpu) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2 || !CPU_ISSET(cpu, &allowed))
    return;
  CPU_CLR(cpu, &allowed);
  for (int i = 0; i < nworkers; i++) pthread_setaffinity_np(worker_threads[i], sizeof allowed, &allowed);
  steered_cpu = cpu;
#endif
}

static void run_share(void *fn, const int64_t *args, int nargs, int id, int cores) {
  int64_t a[UOPIR_MAX_ARGS];
  memcpy(a, args, sizeof(int64_t) * (size_t)nargs);
  a[nargs] = id;
  a[nargs + 1] = cores;
  uopir_call(fn, a, nargs + 2);
}

/* Claim and run shares of the job tagged `tag` until none is left; returns after the last share it ran. The thread
 * that completes the job's last share wakes the submitter when `wake_submitter` (a worker). */
static void run_claimed(uint32_t tag, int wake_submitter) {
  for (;;) {
    uint64_t c = atomic_load_explicit(&claim, memory_order_acquire);
    if ((uint32_t)(c >> 32) != tag) return;
    void *fn = atomic_load_explicit(&job.fn, memory_order_relaxed);
    const int64_t *args = atomic_load_explicit(&job.args, memory_order_relaxed);
    int nargs = atomic_load_explicit(&job.nargs, memory_order_relaxed);
    int cores = atomic_load_explicit(&job.cores, memory_order_relaxed);
    uint32_t share = (uint32_t)c;
    if (share >= (uint32_t)cores) return;
    if (!atomic_compare_exchange_weak_explicit(&claim, &c, c + 1, memory_order_acq_rel, memory_order_relaxed))
      continue;
    run_share(fn, args, nargs, (int)share, cores);
    if (atomic_fetch_add_explicit(&finished, 1, memory_order_acq_rel) + 1 == cores && wake_submitter) {
      pthread_mutex_lock(&mu);
      pthread_cond_broadcast(&done);
      pthread_mutex_unlock(&mu);
    }
  }
}

/* The linger after the last job (0 when the pool is told to sleep at once: spin_ns 0). */
static int64_t lingering(void) {
  return atomic_load_explicit(&spin_ns, memory_order_relaxed) > 0 ? atomic_load_explicit(&linger_ns, memory_order_relaxed)
                                                                  : 0;
}

/* How long a waiting thread spins before it sleeps: longer while a graph with parallel kernels runs, or lingering. */
static int64_t spin_limit(void) {
  int64_t limit = atomic_load_explicit(&hot, memory_order_relaxed) ? atomic_load_explicit(&hot_spin_ns, memory_order_relaxed)
                                                                   : atomic_load_explicit(&spin_ns, memory_order_relaxed);
  int64_t linger = lingering();
  return linger > limit ? linger : limit;
}

static void *worker(void *arg) {
  int index = (int)(intptr_t)arg;
  uint64_t seen = start_generation[index];  /* not a load: the job that made it may already be published */
  for (;;) {
    int64_t t0 = now_ns(), last = t0;
    uint64_t nudged = atomic_load(&nudge);
    int spins = 0;
    while (atomic_load_explicit(&generation, memory_order_acquire) == seen) {
      cpu_relax();
      if ((++spins & 255) != 0) continue;
      int64_t now = now_ns();
      /* off its core between two checks (a few us apart), or a yield that let another thread run: the machine
       * has more runnable threads than cores, and spinning would take time from them (our own caller too) */
      int contended = now - last > CONTENDED_NS;
      if (now - t0 > YIELD_AFTER_NS) {
        sched_yield();
        int64_t after = now_ns();
        contended |= after - now > CONTENDED_NS;
        now = after;
      }
      last = now;
      if (contended || now - t0 > spin_limit()) {
        pthread_mutex_lock(&mu);
        atomic_fetch_add(&sleepers, 1);
        while (atomic_load(&generation) == seen && atomic_load(&nudge) == nudged) pthread_cond_wait(&wake, &mu);
        atomic_fetch_sub(&sleepers, 1);
        pthread_mutex_unlock(&mu);
        t0 = last = now_ns();  /* nudged (or a job): spin again, a job is on its way */
        nudged = atomic_load(&nudge);
      }
    }
    seen = atomic_load(&generation);
    run_claimed((uint32_t)seen, 1);
  }
  return 0;
}

/* The pool's state, for tests and the profiler: out = workers made, workers asleep, graphs keeping the pool hot,
 * the current linger (ns). */
void uopir_pool_state(int64_t *out) {
  out[0] = nworkers;
  out[1] = atomic_load(&sleepers);
  out[2] = atomic_load(&hot);
  out[3] = atomic_load(&linger_ns);
}

/* Wake sleeping workers to spin: a parallel kernel comes next. */
static void prewake(void) {
  if (atomic_load(&sleepers) == 0) return;
  pthread_mutex_lock(&mu);
  atomic_fetch_add(&nudge, 1);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&mu);
}

static void after_fork_child(void) {
  pthread_mutex_init(&submit, 0);
  pthread_mutex_init(&mu, 0);
  pthread_cond_init(&wake, 0);
  pthread_cond_init(&done, 0);
  nworkers = 0;
  steered_cpu = -1;
  atomic_store(&hot, 0);
  atomic_store(&sleepers, 0);
}

/* Workers for `want` of them (under submit); fewer when threads cannot be made. */
static int grow(int want) {
  if (want > UOPIR_MAX_WORKERS) want = UOPIR_MAX_WORKERS;
  if (!atfork_set) {
    pthread_atfork(0, 0, after_fork_child);
    atfork_set = 1;
  }
  while (nworkers < want) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    start_generation[nworkers] = atomic_load(&generation);
    int rc = pthread_create(&t, &attr, worker, (void *)(intptr_t)nworkers);
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    worker_threads[nworkers++] = t;
    steered_cpu = -1;  /* the new worker may run anywhere yet */
  }
  return nworkers;
}

/* Run one parallel kernel split across `cores` shares; the calling thread claims shares with the workers (share 0
 * first). Returns -1 when the kernel has too many arguments. */
int uopir_parallel(void *fn, const int64_t *args, int nargs, int cores) {
  if (nargs + 2 > UOPIR_MAX_ARGS) return -1;
  if (cores <= 1) {
    run_share(fn, args, nargs, 0, 1);
    return 0;
  }
  pthread_mutex_lock(&submit);
  int have = grow(cores - 1);
  if (have < cores - 1) {  /* no threads to be had: run every share here, in turn */
    for (int i = 0; i < cores; i++) run_share(fn, args, nargs, i, cores);
    pthread_mutex_unlock(&submit);
    return 0;
  }
  atomic_store_explicit(&job.fn, fn, memory_order_relaxed);
  atomic_store_explicit(&job.args, args, memory_order_relaxed);
  atomic_store_explicit(&job.nargs, nargs, memory_order_relaxed);
  atomic_store_explicit(&job.cores, cores, memory_order_relaxed);
  atomic_store_explicit(&finished, 0, memory_order_relaxed);
  steer_workers();
  pthread_mutex_lock(&mu);
  uint64_t gen = atomic_load_explicit(&generation, memory_order_relaxed) + 1;
  atomic_store_explicit(&claim, (uint64_t)(uint32_t)gen << 32, memory_order_release);  /* the job's fields first */
  atomic_store_explicit(&generation, gen, memory_order_release);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&mu);
  int64_t started = now_ns();
  run_claimed((uint32_t)gen, 0);
  int64_t t0 = now_ns();
  int spins = 0;
  while (atomic_load_explicit(&finished, memory_order_acquire) < cores) {  /* shares a worker claimed, still running */
    cpu_relax();
    if ((++spins & 255) == 0 && now_ns() - t0 > atomic_load_explicit(&spin_ns, memory_order_relaxed)) {
      pthread_mutex_lock(&mu);
      while (atomic_load(&finished) < cores) pthread_cond_wait(&done, &mu);
      pthread_mutex_unlock(&mu);
    }
  }
  int64_t linger = (now_ns() - started) / 2, most = atomic_load_explicit(&linger_max_ns, memory_order_relaxed);
  atomic_store_explicit(&linger_ns, linger < most ? linger : most, memory_order_relaxed);
  pthread_mutex_unlock(&submit);
  return 0;
}

/* Run entries[0..n-1] in order; while it runs, a graph with parallel kernels keeps the pool hot. With `ns` (not
 * NULL), ns[i] += the nanoseconds entry i took, timed as the replay runs it (the profiler's view: a kernel timed
 * alone would find the pool asleep). Returns the index of the first entry that could not be called (too many
 * arguments) and runs nothing from it on, else -1. */
int64_t uopir_run_graph_timed(int64_t n, const uopir_entry *entries, int64_t *ns) {
  int parallel = 0;
  for (int64_t i = 0; i < n && !parallel; i++) parallel = entries[i].fn && entries[i].cores > 1;
  if (parallel) {
    atomic_fetch_add(&hot, 1);
    prewake();
  }
  int64_t bad = -1;
  int64_t t0 = ns ? now_ns() : 0;
  for (int64_t i = 0; i < n; i++) {
    const uopir_entry *e = &entries[i];
    if (parallel && i + 1 < n && e->cores <= 1 && entries[i + 1].fn && entries[i + 1].cores > 1) prewake();
    if (!e->fn) {  /* a copy between buffers: args = dst, src, bytes */
      memcpy((void *)(intptr_t)e->args[0], (const void *)(intptr_t)e->args[1], (size_t)e->args[2]);
    } else if (e->cores ? uopir_parallel(e->fn, e->args, e->nargs, e->cores) : uopir_call(e->fn, e->args, e->nargs)) {
      bad = i;
      break;
    }
    if (ns) {
      int64_t t1 = now_ns();
      ns[i] += t1 - t0;
      t0 = t1;
    }
  }
  if (parallel) atomic_fetch_sub(&hot, 1);
  return bad;
}

int64_t uopir_run_graph(int64_t n, const uopir_entry *entries) { return uopir_run_graph_timed(n, entries, 0); }
