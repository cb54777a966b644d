/* fig1.c: the Fig. 1 program of Lee/Kim/Zhang, "Infrastructure-free logging
 * and replay of concurrent execution on multiple cores", in its PASSING form:
 * both the bounds check and the memcpy into gbuf are inside the lock, so
 * there is no overflow. Two threads each handle N=20 requests. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define N 20

int req_cnt = 0;
int buf_len = 1000;
char gbuf[1024];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *handle_requests(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&m);
        req_cnt++;
        int r = req_cnt;
        pthread_mutex_unlock(&m);
        if (r % 16 == 0) {
            char local[64];
            int len = snprintf(local, sizeof local, "admin message %d....", r);
            pthread_mutex_lock(&m);
            if (buf_len + len <= 1024) {
                memcpy(gbuf + buf_len, local, len);
                buf_len += len;
            }
            pthread_mutex_unlock(&m);
        }
    }
    char done[32];
    int dl = snprintf(done, sizeof done, "thread %ld done\n", id);
    if (write(1, done, dl) != dl) return NULL;
    return NULL;
}

int main(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, handle_requests, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("req_cnt=%d buf_len=%d\n", req_cnt, buf_len);
    return 0;
}
