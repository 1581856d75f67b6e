#include "common/thread.h"

#include <signal.h>
#include <time.h>

int common_thread_start(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                        void *arg) {
  /* The new thread inherits the mask in force when it is created. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = pthread_create(thread, attr, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return r;
}

void common_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}
