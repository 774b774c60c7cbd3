#ifndef CLIBEDIT_SHIM_H
#define CLIBEDIT_SHIM_H
#include <stdio.h>
#include <wchar.h>
/* POSIX's wcwidth, declared here: defining _XOPEN_SOURCE to get it would make glibc's headers
   differ from the ones Swift's Glibc module saw (ucontext_t and friends), a module conflict. */
extern int wcwidth(wchar_t character);
#include <editline/readline.h>

/* libedit's and stdio's globals, set through functions: Swift 6 refuses to touch shared
   mutable C globals directly. */
typedef char **clibedit_completer(const char *text, int start, int end);
static inline void clibedit_set_completer(clibedit_completer *completer) {
    rl_attempted_completion_function = completer;
}
/* The line being edited (for completion by position); "" when none. */
static inline const char *clibedit_line_buffer(void) { return rl_line_buffer ? rl_line_buffer : ""; }
static inline void clibedit_line_buffered_stdout(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
}
/* Piped output: one write per 64 KiB, not per line; the CLI flushes whenever it would wait for
   the server, so what arrived is out at once all the same. */
static inline void clibedit_block_buffered_stdout(void) {
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
}
static inline void clibedit_flush_stdout(void) {
    fflush(stdout);
}
/* Ctrl-C in the shell: noted, never fatal. The handler only sets a flag (async-signal-safe);
   the shell takes it after readline or a command returns. No SA_RESTART, so a read that waits
   returns and the flag is seen. */
#include <signal.h>
#include <string.h>
static volatile sig_atomic_t clibedit_interrupted = 0;
static void clibedit_on_sigint(int signal) { (void)signal; clibedit_interrupted = 1; }
static inline void clibedit_catch_sigint(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = clibedit_on_sigint;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    /* A parent may have started us with SIGINT blocked (the mask is inherited across exec). */
    sigset_t interrupt;
    sigemptyset(&interrupt);
    sigaddset(&interrupt, SIGINT);
    sigprocmask(SIG_UNBLOCK, &interrupt, NULL);
}
/* Whether a Ctrl-C came, leaving it to be taken. */
static inline int clibedit_peek_sigint(void) { return clibedit_interrupted; }
static inline int clibedit_take_sigint(void) {
    int was = clibedit_interrupted;
    clibedit_interrupted = 0;
    return was;
}
/* Columns a terminal gives a character (-1: not printable), under the current LC_CTYPE. */
static inline int clibedit_wcwidth(unsigned int character) {
    return wcwidth((wchar_t)character);
}
#endif
