/* A native backtrace where a process dies of SIGSEGV (or SIGBUS): built as a shared
   object and preloaded, it prints the faulting address and each frame's object and offset
   (dladdr) to stderr, then lets the signal kill the process as before. Python's faulthandler
   prints the Python frames first and then calls this handler.

     gcc -shared -fPIC -O1 -o /tmp/segv_backtrace.so dev/segv_backtrace.c -ldl
     LD_PRELOAD=/tmp/segv_backtrace.so python3 -X faulthandler script.py

   Used on the GPU host for the crash under CUPTI (BENCHMARKS.md, seventeenth session). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void report(int sig, siginfo_t *info, void *context) {
  (void)context;
  void *frames[64];
  int n = backtrace(frames, 64);
  fprintf(stderr, "segv_backtrace: signal %d at address %p, %d frames\n", sig, info->si_addr, n);
  for (int i = 0; i < n; i++) {
    Dl_info d;
    if (dladdr(frames[i], &d) && d.dli_fname) {
      fprintf(stderr, "  #%-2d %p %s+0x%lx (%s)\n", i, frames[i], d.dli_fname,
              (unsigned long)((char *)frames[i] - (char *)d.dli_fbase),
              d.dli_sname ? d.dli_sname : "?");
    } else {
      fprintf(stderr, "  #%-2d %p\n", i, frames[i]);
    }
  }
  fflush(stderr);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = report;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGSEGV, &action, NULL);
  sigaction(SIGBUS, &action, NULL);
}
