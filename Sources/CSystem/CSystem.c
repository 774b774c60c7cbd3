#define _GNU_SOURCE
#include "CSystem.h"
#include <stddef.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

int csystem_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
int csystem_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
int csystem_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }
int csystem_socket(int domain) { return socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }
void csystem_line_buffered_stdout(void) { setvbuf(stdout, NULL, _IOLBF, 0); }
void csystem_flush_stdout(void) { fflush(stdout); }
