#ifndef CLIBEDIT_SHIM_H
#define CLIBEDIT_SHIM_H
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700  /* wcwidth */
#endif
#include <stdio.h>
#include <wchar.h>
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
/* Columns a terminal gives a character (-1: not printable), under the current LC_CTYPE. */
static inline int clibedit_wcwidth(unsigned int character) {
    return wcwidth((wchar_t)character);
}
#endif
