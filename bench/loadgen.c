/* A load generator for the recordsd line protocol, shaped like pgbench so the two compare fairly:
 * C, a few threads (-j), each driving its share of the clients (-c) through epoll, for -T seconds.
 * Every client pipelines the same lines, reads one status line per line sent, checks that the
 * last status starts with the expected prefix, and repeats.  Prints "<rounds> <seconds> <per_s>".
 *
 *   loadgen -p PORT -c CLIENTS -j THREADS -T SECONDS -e EXPECTED [-r REPEAT] LINE...
 *   (each line may contain %d, replaced by the client's number; -r sends the lines REPEAT
 *   times a round, for long pipelines)
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

typedef struct {
    int fd;
    char payload[1 << 16];
    size_t payloadLength;
    char line[4096]; /* the current reply line, up to its first 4,095 bytes */
    size_t lineLength;
    int lineStart;   /* at the beginning of a line */
    int statuses;    /* status lines read in this round */
    int banner;      /* banner line still to read */
} Client;

static int port, clientCount = 1, threadCount = 1, lineCount, repeat = 1;
static double seconds = 5;
static const char *expected = "+OK";
static char **lines;
static double deadline;

static void sendPayload(Client *c) {
    size_t sent = 0;
    while (sent < c->payloadLength) { /* small payloads: the socket buffer takes them whole */
        ssize_t n = write(c->fd, c->payload + sent, c->payloadLength - sent);
        if (n < 0 && errno != EINTR && errno != EAGAIN) die("write");
        if (n > 0) sent += (size_t)n;
    }
}

/* One reply line is complete; returns 1 when the client's round is done. */
static int finishLine(Client *c) {
    c->line[c->lineLength] = 0;
    c->lineLength = 0;
    if (c->banner) {
        c->banner = 0;
        return 1;
    }
    int status = c->line[0] == '+' || c->line[0] == '-';
    if (!status) return 0;
    if (c->line[0] == '-') {
        fprintf(stderr, "loadgen: error reply: %s\n", c->line);
        exit(1);
    }
    if (++c->statuses < lineCount * repeat) return 0;
    if (strncmp(c->line, expected, strlen(expected)) != 0) {
        fprintf(stderr, "loadgen: expected '%s', got '%s'\n", expected, c->line);
        exit(1);
    }
    c->statuses = 0;
    return 1;
}

static void *run(void *arg) {
    long index = (long)arg;
    long rounds = 0;
    int mine = clientCount / threadCount + (index < clientCount % threadCount);
    int first = (int)(index * (clientCount / threadCount) + (index < clientCount % threadCount ? index : clientCount % threadCount));
    Client *clients = calloc((size_t)mine, sizeof(Client));
    int epoll = epoll_create1(0);
    if (epoll < 0) die("epoll_create1");
    for (int i = 0; i < mine; i++) {
        Client *c = &clients[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(0x7f000001)};
        if (connect(c->fd, (struct sockaddr *)&address, sizeof address) < 0) die("connect");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        for (int r = 0; r < repeat; r++) {
            for (int l = 0; l < lineCount; l++) {
                int n = snprintf(c->payload + c->payloadLength, sizeof c->payload - c->payloadLength, lines[l], first + i);
                if (n < 0 || c->payloadLength + (size_t)n + 1 >= sizeof c->payload) {
                    fprintf(stderr, "loadgen: the lines of a round pass %zu bytes\n", sizeof c->payload);
                    exit(2);
                }
                c->payloadLength += (size_t)n;
                c->payload[c->payloadLength++] = '\n';
            }
        }
        c->banner = 1;
        c->lineStart = 1;
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(epoll, EPOLL_CTL_ADD, c->fd, &event) < 0) die("epoll_ctl");
    }
    char buffer[65536];
    struct epoll_event events[256];
    int open = mine;
    while (open > 0) {
        int ready = epoll_wait(epoll, events, 256, 1000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) die("epoll_wait");
        int late = now() >= deadline;
        for (int e = 0; e < ready; e++) {
            Client *c = events[e].data.ptr;
            ssize_t n = read(c->fd, buffer, sizeof buffer);
            if (n <= 0) {
                fprintf(stderr, "loadgen: server closed a connection\n");
                exit(1);
            }
            for (ssize_t b = 0; b < n; b++) {
                if (buffer[b] != '\n') {
                    if (c->lineLength < sizeof c->line - 1) c->line[c->lineLength++] = buffer[b];
                    continue;
                }
                int wasBanner = c->banner;
                if (!finishLine(c)) continue;
                if (!wasBanner) rounds++;
                if (late) {
                    close(c->fd);
                    open--;
                    break;
                }
                sendPayload(c);
            }
        }
    }
    free(clients);
    close(epoll);
    return (void *)rounds;
}

int main(int argc, char **argv) {
    int option;
    while ((option = getopt(argc, argv, "p:c:j:T:e:r:")) != -1) {
        switch (option) {
        case 'p': port = atoi(optarg); break;
        case 'c': clientCount = atoi(optarg); break;
        case 'j': threadCount = atoi(optarg); break;
        case 'T': seconds = atof(optarg); break;
        case 'e': expected = optarg; break;
        case 'r': repeat = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: loadgen -p PORT -c CLIENTS -j THREADS -T SECONDS -e EXPECTED [-r REPEAT] LINE...\n");
            return 2;
        }
    }
    lines = argv + optind;
    lineCount = argc - optind;
    if (port <= 0 || lineCount == 0 || clientCount < 1 || threadCount < 1 || repeat < 1) {
        fprintf(stderr, "usage: loadgen -p PORT -c CLIENTS -j THREADS -T SECONDS -e EXPECTED [-r REPEAT] LINE...\n");
        return 2;
    }
    if (threadCount > clientCount) threadCount = clientCount;
    pthread_t threads[threadCount];
    double start = now();
    deadline = start + seconds;
    for (long t = 0; t < threadCount; t++) pthread_create(&threads[t], NULL, run, (void *)t);
    long total = 0;
    for (int t = 0; t < threadCount; t++) {
        void *rounds;
        pthread_join(threads[t], &rounds);
        total += (long)rounds;
    }
    double elapsed = now() - start;
    printf("%ld %.3f %.1f\n", total, elapsed, total / elapsed);
    return 0;
}
