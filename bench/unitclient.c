/* One unit of work as a user's program sends it: the lines on stdin pipelined to recordsd
 * (written while the replies are read, so neither side's buffer stalls), every status read,
 * then SAVE. Prints "<seconds for the lines> <seconds for SAVE>" and exits 1 on an error reply
 * or a SAVE that does not answer the expected prefix.
 *
 *   unitclient PORT EXPECTED < lines
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static int fd;
static char in[1 << 16];
static size_t inLength, inStart;

/* The next reply line (without its newline), reading more as needed. */
static char *readLine(void) {
    static char line[1 << 16];
    size_t length = 0;
    for (;;) {
        if (inStart == inLength) {
            ssize_t n = read(fd, in, sizeof in);
            if (n == 0) { fprintf(stderr, "unitclient: connection closed\n"); exit(1); }
            if (n < 0) { if (errno == EINTR) continue; die("read"); }
            inStart = 0;
            inLength = (size_t)n;
        }
        char c = in[inStart++];
        if (c == '\n') { line[length] = 0; return line; }
        if (length + 1 < sizeof line) line[length++] = c;
    }
}

/* Reads until `count` status lines are read; exits on an error reply. */
static void readStatuses(long count, const char *expected) {
    while (count > 0) {
        char *line = readLine();
        if (line[0] == '-') { fprintf(stderr, "unitclient: %s\n", line); exit(1); }
        if (line[0] != '+') continue;
        if (--count == 0 && expected && strncmp(line, expected, strlen(expected)) != 0) {
            fprintf(stderr, "unitclient: expected '%s', got '%s'\n", expected, line);
            exit(1);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: unitclient PORT EXPECTED < lines\n"); return 2; }
    size_t capacity = 1 << 20, length = 0;
    char *payload = malloc(capacity);
    for (size_t n; (n = fread(payload + length, 1, capacity - length, stdin)) > 0;) {
        length += n;
        if (length == capacity) payload = realloc(payload, capacity *= 2);
    }
    long lines = 0;
    for (size_t i = 0; i < length; i++) lines += payload[i] == '\n';

    fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    readLine(); /* the banner */

    double start = now();
    size_t sent = 0;
    long statuses = 0;
    while (sent < length || statuses < lines) {
        struct pollfd p = {.fd = fd, .events = POLLIN | (sent < length ? POLLOUT : 0)};
        if (inStart < inLength) p.revents = POLLIN; /* replies already read in */
        else if (poll(&p, 1, -1) < 0) { if (errno == EINTR) continue; die("poll"); }
        if ((p.revents & POLLOUT) && sent < length) {
            ssize_t n = send(fd, payload + sent, length - sent < 65536 ? length - sent : 65536, MSG_DONTWAIT);
            if (n > 0) sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR) die("send");
        }
        if (p.revents & POLLIN) {
            readStatuses(1, NULL);
            statuses++;
        }
    }
    double edited = now();
    if (write(fd, "SAVE\n", 5) != 5) die("write");
    readStatuses(1, argv[2]);
    double saved = now();
    printf("%.6f %.6f\n", edited - start, saved - edited);
    return 0;
}
