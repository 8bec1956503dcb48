#define _GNU_SOURCE
#include <stdint.h>
#include <errno.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <time.h>
#include <pthread.h>
#include <string.h>
#include <stdlib.h>

long raw_futex(long nr, uintptr_t addr, long op, long val, long tmo_ns, uintptr_t addr2, long val3) {
    struct timespec ts = {tmo_ns / 1000000000L, tmo_ns % 1000000000L};
    long r = syscall(nr, addr, op, val, tmo_ns ? &ts : NULL, addr2, val3);
    return r < 0 ? -errno : r;
}
/* futex2 style: futex_wake(uaddr, mask, nr, flags); futex_wait(uaddr, val, mask, flags, timeout, clockid) */
long raw6(long nr, long a, long b, long c, long d, long e, long f) {
    long r = syscall(nr, a, b, c, d, e, f);
    return r < 0 ? -errno : r;
}
/* i386 int 0x80: eax=nr ebx ecx edx esi edi ebp */
long int80(long nr, long a, long b, long c, long d, long e, long f) {
    long ret;
    register long r9 asm("r9") = f;
    asm volatile("push %%rbp\n mov %%r9, %%rbp\n int $0x80\n pop %%rbp\n"
        : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e), "r"(r9)
        : "memory", "r8", "r10", "r11", "cc");
    return (int)ret;
}
/* thread that sets clear_child_tid (or robust list) to addr and exits: kernel does a SHARED futex wake */
static void *cleartid_thread(void *a) {
    syscall(SYS_set_tid_address, a);
    syscall(SYS_exit, 0);
    return NULL;
}
struct rhead { void *next; long off; void *pending; };
static void *robust_thread(void *a) {
    static __thread struct rhead h;
    h.next = &h; h.off = 0; h.pending = a;  /* list_op_pending points at the word (futex at entry+off) */
    syscall(SYS_set_robust_list, &h, sizeof(h));
    syscall(SYS_set_tid_address, NULL);
    syscall(SYS_exit, 0);
    return NULL;
}
int exit_wake(uintptr_t addr, int robust) {
    pthread_t t; pthread_attr_t at; pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&t, &at, robust ? robust_thread : cleartid_thread, (void *)addr);
    usleep(2000);
    return r;
}
