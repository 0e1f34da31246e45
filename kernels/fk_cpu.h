/* fk_cpu.h: which instruction set the kernels use, and how many threads.
 *
 * fk_isa_detect()  the best path this CPU and OS support (cached after the first call).
 * fk_isa_active()  the path the kernels take: detected, or lowered with fk_isa_force() or the
 *                  environment variable FUSED_ISA=scalar|avx2|avx512bf16|amx (read once).
 * A build may pin the path at compile time with `#define FK_PIN_ISA FK_ISA_AVX512BF16` (or any other
 * value) before including the kernels: fk_isa_active() then is a constant and the dispatch folds away.
 * The generated C does this; it is the caller's job to run such a build only on a CPU that has the ISA.
 * In a pinned build fk_isa_force() still answers whether the CPU has a path, but changes nothing.
 *
 * Threads: fk_set_threads(n) (n <= 0: back to the default). Default: env FUSED_THREADS, else OpenMP's
 * omp_get_max_threads(), else 1 when built without OpenMP. Results are bitwise identical for any count. */
#ifndef FK_CPU_H
#define FK_CPU_H

#include <stdlib.h>
#include <string.h>

#include "fk_common.h"

#if FK_X86 && defined(__GNUC__)
#include <cpuid.h>
#endif

typedef enum { FK_ISA_SCALAR = 0, FK_ISA_AVX2 = 1, FK_ISA_AVX512BF16 = 2, FK_ISA_AMX = 3 } fk_isa;

FK_API const char* fk_isa_name(fk_isa isa) {
  switch (isa) {
    case FK_ISA_SCALAR: return "scalar";
    case FK_ISA_AVX2: return "avx2";
    case FK_ISA_AVX512BF16: return "avx512bf16";
    case FK_ISA_AMX: return "amx";
  }
  return "unknown";
}

#if FK_X86 && defined(__GNUC__)
FK_API uint64_t fk__xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0)); /* xgetbv, no -mxsave needed */
  return ((uint64_t)hi << 32) | lo;
}
#endif

/* Linux gives a process AMX tile state only on request; without it the first tile instruction
 * faults (SIGILL). Returns 1 when tiles may be used. */
FK_API int fk__amx_request_permission(void) {
#if FK_X86 && defined(__linux__) && defined(__GNUC__)
  /* raw syscall: syscall(2) is not declared under -std=c11 without _GNU_SOURCE, which a header
   * cannot define after the user's first include. 158 = SYS_arch_prctl on x86-64. */
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(158L), "D"(0x1023L /* ARCH_REQ_XCOMP_PERM */), "S"(18L /* XFEATURE_XTILEDATA */)
                   : "rcx", "r11", "memory");
  return ret == 0;
#else
  return 0;
#endif
}

FK_API fk_isa fk__isa_probe(void) {
#if FK_X86 && defined(__GNUC__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return FK_ISA_SCALAR;
  const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  if (!osxsave || !avx || !fma || !f16c) return FK_ISA_SCALAR;
  const uint64_t xcr0 = fk__xgetbv0();
  if ((xcr0 & 0x6) != 0x6) return FK_ISA_SCALAR; /* OS saves XMM+YMM */
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return FK_ISA_SCALAR;
  const unsigned ebx7 = b, edx7 = d;
  if (!((ebx7 >> 5) & 1)) return FK_ISA_SCALAR; /* AVX2 */
  fk_isa best = FK_ISA_AVX2;
  const int avx512 = ((ebx7 >> 16) & 1) && ((ebx7 >> 17) & 1) && ((ebx7 >> 30) & 1) && ((ebx7 >> 31) & 1); /* F DQ BW VL */
  unsigned a71 = 0, b71, c71, d71;
  __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71);
  const int bf16 = (a71 >> 5) & 1;
  if (avx512 && bf16 && (xcr0 & 0xe0) == 0xe0) best = FK_ISA_AVX512BF16; /* OS saves opmask+ZMM */
  const int amx = ((edx7 >> 22) & 1) && ((edx7 >> 24) & 1); /* AMX-BF16, AMX-TILE */
  if (best == FK_ISA_AVX512BF16 && amx && (xcr0 & 0x60000) == 0x60000 && fk__amx_request_permission()) best = FK_ISA_AMX;
#ifdef FK_AVX512_EMULATE
  if (best == FK_ISA_AVX2) best = FK_ISA_AVX512BF16; /* test-only: AVX-512 emulated (fk_common.h) */
#endif
#ifdef FK_AMX_EMULATE
  if (best == FK_ISA_AVX512BF16) best = FK_ISA_AMX; /* test-only: tiles are emulated (fk_linear.h) */
#endif
  return best;
#else
  return FK_ISA_SCALAR;
#endif
}

/* State lives in function-local statics (one object per program in C++, per translation unit in C),
 * read and written with relaxed atomics: the values are idempotent, so a race only repeats work. */
FK_STATE_API int* fk__isa_state(void) {
  static int s[2] = {-1, -1}; /* [0] detected, [1] active */
  return s;
}

FK_API fk_isa fk_isa_detect(void) {
  int* s = fk__isa_state();
  int v = __atomic_load_n(&s[0], __ATOMIC_RELAXED);
  if (v < 0) {
    v = (int)fk__isa_probe();
    __atomic_store_n(&s[0], v, __ATOMIC_RELAXED);
  }
  return (fk_isa)v;
}

FK_API fk_isa fk__isa_from_name(const char* n, fk_isa fallback) {
  if (!n) return fallback;
  if (!strcmp(n, "scalar")) return FK_ISA_SCALAR;
  if (!strcmp(n, "avx2")) return FK_ISA_AVX2;
  if (!strcmp(n, "avx512bf16") || !strcmp(n, "avx512")) return FK_ISA_AVX512BF16;
  if (!strcmp(n, "amx")) return FK_ISA_AMX;
  return fallback;
}

/* Returns 1 and switches every kernel to `isa`, or returns 0 (nothing changes) when the CPU lacks it. */
FK_API int fk_isa_force(fk_isa isa) {
  if ((int)isa < 0 || isa > fk_isa_detect()) return 0;
  __atomic_store_n(&fk__isa_state()[1], (int)isa, __ATOMIC_RELAXED);
  return 1;
}

FK_API fk_isa fk_isa_active(void) {
#ifdef FK_PIN_ISA
  return (fk_isa)(FK_PIN_ISA);
#else
  int v = __atomic_load_n(&fk__isa_state()[1], __ATOMIC_RELAXED);
  if (v < 0) {
    const fk_isa det = fk_isa_detect();
    fk_isa want = fk__isa_from_name(getenv("FUSED_ISA"), det);
    if (want > det) want = det; /* asking for more than the CPU has: use what it has */
    v = (int)want;
    __atomic_store_n(&fk__isa_state()[1], v, __ATOMIC_RELAXED);
  }
  return (fk_isa)v;
#endif
}

FK_STATE_API int* fk__threads_state(void) {
  static int n[2] = {0, 0}; /* [0] set by fk_set_threads (0: not set), [1] the default once computed */
  return n;
}

FK_API void fk_set_threads(int n) { __atomic_store_n(&fk__threads_state()[0], n > 0 ? n : 0, __ATOMIC_RELAXED); }

/* Called by every kernel: the environment is read once, not per call. */
FK_API int fk_get_threads(void) {
  int* s = fk__threads_state();
  const int n = __atomic_load_n(&s[0], __ATOMIC_RELAXED);
  if (n > 0) return n;
  int d = __atomic_load_n(&s[1], __ATOMIC_RELAXED);
  if (d <= 0) {
    const char* e = getenv("FUSED_THREADS");
#ifdef _OPENMP
    d = e && atoi(e) > 0 ? atoi(e) : omp_get_max_threads();
#else
    d = e && atoi(e) > 0 ? atoi(e) : 1;
#endif
    __atomic_store_n(&s[1], d, __ATOMIC_RELAXED);
  }
  return d;
}

/* The least work (flops or bytes, as fk__threads_for counts it) worth a fork: a fork and join of
 * libgomp threads (two futex syscalls) costs as long as one thread takes to read a few hundred KB from
 * its caches, so a small model's GEMVs (the default model's [256 x 768], cached) run faster on one
 * thread than on two. */
#define FK_PARALLEL_MIN_WORK 262144

FK_STATE_API long long* fk__parallel_min_work_state(void) {
  static long long w = FK_PARALLEL_MIN_WORK;
  return &w;
}

/* TEST-ONLY: tests of thread-count independence set 0 so that their small shapes fork too. */
FK_API void fk__set_parallel_min_work(long long work) { __atomic_store_n(fk__parallel_min_work_state(), work, __ATOMIC_RELAXED); }
FK_API long long fk__parallel_min_work(void) { return __atomic_load_n(fk__parallel_min_work_state(), __ATOMIC_RELAXED); }

/* Threads worth using for `units` independent work items of `cost` flops/bytes each: small problems run
 * on the calling thread, the others on every thread, even with fewer units than threads (the idle ones
 * only wait at the end of the region). Never a team size in between: libgomp ends the pool threads
 * that a smaller team leaves out and creates new ones for the next larger team, which halved
 * Qwen2-0.5B's prefill GEMMs on 16 threads (docs/PERFORMANCE.md). Never changes results. */
FK_API int fk__threads_for(size_t units, double cost) {
  if (units < 2 || (double)units * cost < (double)fk__parallel_min_work()) return 1;
  return fk_get_threads();
}

#endif /* FK_CPU_H */
