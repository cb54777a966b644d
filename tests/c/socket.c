/* socket.c: loopback TCP. main listens on 127.0.0.1:0 (getsockname for the
 * port); a client thread connects and send()s 10 lines then shuts down its
 * write side; a server thread accept()s, poll()s, recv()s until EOF and
 * send()s back the byte count, which the client recv()s. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int lfd;
static struct sockaddr_in addr;
static long received, echoed = -1;

static void *server(void *arg) {
    (void)arg;
    int cfd = accept(lfd, NULL, NULL);
    if (cfd < 0) { perror("accept"); exit(1); }
    char buf[512];
    for (;;) {
        struct pollfd pfd = { .fd = cfd, .events = POLLIN };
        if (poll(&pfd, 1, 5000) <= 0) { perror("poll"); exit(1); }
        ssize_t n = recv(cfd, buf, sizeof buf, 0);
        if (n <= 0) break;
        received += n;
    }
    int len = snprintf(buf, sizeof buf, "%ld", received);
    send(cfd, buf, len, 0);
    close(cfd);
    return NULL;
}

static void *client(void *arg) {
    (void)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) { perror("connect"); exit(1); }
    char line[32];
    for (int i = 0; i < 10; i++) {
        int len = snprintf(line, sizeof line, "line %d\n", i);
        if (send(fd, line, len, 0) != len) perror("send");
    }
    shutdown(fd, SHUT_WR);
    char reply[32] = {0};
    size_t got = 0;
    ssize_t n;
    while (got < sizeof reply - 1 && (n = recv(fd, reply + got, sizeof reply - 1 - got, 0)) > 0)
        got += n;
    echoed = atol(reply);
    close(fd);
    return NULL;
}

int main(void) {
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0) { perror("bind"); return 1; }
    listen(lfd, 4);
    socklen_t alen = sizeof addr;
    getsockname(lfd, (struct sockaddr *)&addr, &alen);
    pthread_t s, c;
    pthread_create(&s, NULL, server, NULL);
    pthread_create(&c, NULL, client, NULL);
    pthread_join(c, NULL);
    pthread_join(s, NULL);
    close(lfd);
    printf("received=%ld\n", received);
    printf("echoed=%ld\n", echoed);
    return 0;
}
