#ifndef CLIBEDIT_SHIM_H
#define CLIBEDIT_SHIM_H
#include <stdio.h>
#include <editline/readline.h>

/* libedit's and stdio's globals, set through functions: Swift 6 refuses to touch shared
   mutable C globals directly. */
typedef char **clibedit_completer(const char *text, int start, int end);
static inline void clibedit_set_completer(clibedit_completer *completer) {
    rl_attempted_completion_function = completer;
}
static inline void clibedit_line_buffered_stdout(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
}
static inline void clibedit_flush_stdout(void) {
    fflush(stdout);
}
#endif
