/* Shared by the C load generators: a monotonic clock in seconds, and a fatal system error. */
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}
#endif
