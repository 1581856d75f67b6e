/* Threads the library starts for its own work (pool, packing, extraction,
 * parallel removal, stdin feeders). Internal to the library. */
#ifndef SANDMAN_COMMON_THREAD_H
#define SANDMAN_COMMON_THREAD_H

#include <pthread.h>

/* pthread_create with every signal blocked in the new thread: a library
 * must not take the application's signals (SIGINT, SIGTERM, SIGCHLD...),
 * which then reach only the application's own threads. attr may be NULL.
 * Returns pthread_create's result. */
int common_thread_start(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                        void *arg);

/* Sleeps ms milliseconds (a poll's pause; a signal may end it early). */
void common_sleep_ms(long ms);

#endif
