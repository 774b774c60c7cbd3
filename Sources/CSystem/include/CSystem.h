#ifndef CSYSTEM_H
#define CSYSTEM_H
// Linux event APIs that `import Glibc` does not expose. Only <sys/epoll.h> is included here:
// socket headers would redefine types that Glibc's module already owns.
#include <sys/epoll.h>

int csystem_epoll_create(void);
int csystem_eventfd(void);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC.
int csystem_accept(int fd);
/// A non-blocking, close-on-exec stream socket.
int csystem_socket(int domain);
/// stdio's shared globals, reached through functions (Swift 6 refuses the globals themselves).
void csystem_line_buffered_stdout(void);
void csystem_flush_stdout(void);

static const unsigned int CSYSTEM_EPOLLIN = EPOLLIN;
static const unsigned int CSYSTEM_EPOLLOUT = EPOLLOUT;
static const unsigned int CSYSTEM_EPOLLHUP = EPOLLHUP;
static const unsigned int CSYSTEM_EPOLLERR = EPOLLERR;
#endif
