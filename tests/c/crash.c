/* crash.c: for the debugger tests. main builds a two-node list at the
 * global `head` (push() writes head twice), then starts two threads.
 * Once the worker has walked the list (prints sum=42), the corrupter
 * calls corrupt(), which stores the bad pointer 0x10 into `head`, and
 * tells the worker, which then calls use_head(): its read of head->value
 * faults, and the process dies of SIGSEGV in use_head() called from
 * worker(). The last write to `head` before the crash is corrupt()'s. */
#include <pthread.h>
#include <stdio.h>

struct node {
    int value;
    struct node *next;
};

struct node *head;
static struct node nodes[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int summed, corrupted;

void push(struct node *n, int value) {
    n->value = value;
    n->next = head;
    head = n;
}

int sum_list(void) {
    int sum = 0;
    for (struct node *n = head; n; n = n->next) sum += n->value;
    return sum;
}

void corrupt(void) {
    head = (struct node *)0x10;
}

int use_head(void) {
    return head->value; /* SIGSEGV: head is 0x10 */
}

void *corrupter(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!summed) pthread_cond_wait(&changed, &lock);
    corrupt();
    corrupted = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    return NULL;
}

void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    printf("sum=%d\n", sum_list());
    fflush(stdout);
    summed = 1;
    pthread_cond_broadcast(&changed);
    while (!corrupted) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    printf("value=%d\n", use_head());
    return NULL;
}

int main(void) {
    push(&nodes[0], 20);
    push(&nodes[1], 22);
    pthread_t w, c;
    pthread_create(&w, NULL, worker, NULL);
    pthread_create(&c, NULL, corrupter, NULL);
    pthread_join(c, NULL);
    pthread_join(w, NULL); /* never returns: the worker crashes */
    printf("unreachable\n");
    return 0;
}
