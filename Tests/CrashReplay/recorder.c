/* Issue 25: an LD_PRELOAD recorder of every call that changes files under one directory, with the
 * bytes written, for replay.py to rebuild the directory as a crash at any moment could leave it.
 * A test tool, not linked into vcache:
 *
 *   cc -shared -fPIC -O2 -o recorder.so recorder.c -ldl -lpthread
 *   VCACHE_RECORD_DIR=/abs/cache VCACHE_RECORD_LOG=/abs/log LD_PRELOAD=./recorder.so vcache ...
 *
 * VCACHE_RECORD_LOG is a text log, one call a line (tab-separated: a global sequence number taken
 * under one mutex, as vcache is multithreaded, then the process and thread ids, the call, its
 * arguments; several processes may append to one log, the sequence goes on); the bytes written go to VCACHE_RECORD_LOG.bin
 * and a write's line says where (offset, length). Recorded, for paths under the directory:
 *   open/open64/openat/openat64/__open_2/__open64_2/__openat_2/__openat64_2/creat (path, flags,
 *   fd, whether it created the file), write/pwrite/pwrite64/writev/pwritev/pwritev64/pwritev2
 *   (fd, offset, bytes), fsync/fdatasync (a begin and an end line: a write is covered by a sync
 *   that began after it returned), sync_file_range, ftruncate/ftruncate64/truncate, fallocate/
 *   fallocate64/posix_fallocate/posix_fallocate64, rename/renameat/renameat2, unlink/unlinkat,
 *   rmdir, mkdir/mkdirat, link/linkat, close; sync/syncfs (everything). Also every write to fd 1
 *   (vcache's --json events), so a replay knows what the run had said before a crash point.
 * Not seen: stores through mmap (SQLite maps catalog.db-shm, its WAL index, which it rebuilds from
 * the WAL after a crash: replay.py treats -shm as never durable) and calls glibc makes internally
 * (fopen, opendir); `strace -f` on the same run shows the syscalls, and crash-replay.sh --strace
 * compares the two counts.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXFD 65536

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char root[PATH_MAX];
static size_t rootlen;
static int logfd = -1, binfd = -1;
static unsigned long long seq;
static unsigned long long binoff;
static char *paths[MAXFD]; /* tracked descriptors: the path each was opened with */

#define REAL(name) static __typeof__(name) *real_##name
REAL(open); REAL(open64); REAL(openat); REAL(openat64); REAL(creat); REAL(creat64);
REAL(write); REAL(pwrite); REAL(pwrite64); REAL(writev); REAL(pwritev); REAL(pwritev64); REAL(pwritev2);
REAL(fsync); REAL(fdatasync); REAL(sync_file_range); REAL(ftruncate); REAL(ftruncate64);
REAL(truncate); REAL(fallocate); REAL(fallocate64); REAL(posix_fallocate); REAL(posix_fallocate64);
REAL(rename); REAL(renameat); REAL(renameat2); REAL(unlink); REAL(unlinkat); REAL(rmdir);
REAL(mkdir); REAL(mkdirat); REAL(link); REAL(linkat); REAL(close); REAL(sync); REAL(syncfs);
static int (*real___open_2)(const char *, int);
static int (*real___open64_2)(const char *, int);
static int (*real___openat_2)(int, const char *, int);
static int (*real___openat64_2)(int, const char *, int);

#define RESOLVE(name) real_##name = dlsym(RTLD_NEXT, #name)
/* The real call, looked up on first use too: other constructors may open files before init runs. */
static void *lookup(void **slot, const char *name) {
    if (!*slot) *slot = dlsym(RTLD_NEXT, name);
    return *slot;
}
#define R(name) ((__typeof__(real_##name))lookup((void **)&real_##name, #name))
__attribute__((constructor)) static void init(void) {
    RESOLVE(open); RESOLVE(open64); RESOLVE(openat); RESOLVE(openat64); RESOLVE(creat); RESOLVE(creat64);
    RESOLVE(write); RESOLVE(pwrite); RESOLVE(pwrite64); RESOLVE(writev); RESOLVE(pwritev); RESOLVE(pwritev64);
    RESOLVE(pwritev2); RESOLVE(fsync); RESOLVE(fdatasync); RESOLVE(sync_file_range); RESOLVE(ftruncate);
    RESOLVE(ftruncate64); RESOLVE(truncate); RESOLVE(fallocate); RESOLVE(fallocate64); RESOLVE(posix_fallocate);
    RESOLVE(posix_fallocate64); RESOLVE(rename); RESOLVE(renameat); RESOLVE(renameat2); RESOLVE(unlink);
    RESOLVE(unlinkat); RESOLVE(rmdir); RESOLVE(mkdir); RESOLVE(mkdirat); RESOLVE(link); RESOLVE(linkat);
    RESOLVE(close); RESOLVE(sync); RESOLVE(syncfs);
    RESOLVE(__open_2); RESOLVE(__open64_2); RESOLVE(__openat_2); RESOLVE(__openat64_2);
    const char *dir = getenv("VCACHE_RECORD_DIR"), *log = getenv("VCACHE_RECORD_LOG");
    if (!dir || !log) return;
    /* The directory need not exist yet: its path is taken as given (give it absolute and real). */
    snprintf(root, sizeof root, "%s", dir);
    rootlen = strlen(root);
    while (rootlen > 1 && root[rootlen - 1] == '/') root[--rootlen] = 0;
    char bin[PATH_MAX + 8];
    snprintf(bin, sizeof bin, "%s.bin", log);
    logfd = (int)syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    binfd = (int)syscall(SYS_openat, AT_FDCWD, bin, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    struct stat st;
    if (binfd >= 0 && fstat(binfd, &st) == 0) binoff = (unsigned long long)st.st_size;
    /* Several processes may append to one log (a run, then a resume): the sequence goes on. */
    if (logfd >= 0 && fstat(logfd, &st) == 0 && st.st_size > 0) {
        int r = (int)syscall(SYS_openat, AT_FDCWD, log, O_RDONLY | O_CLOEXEC);
        if (r >= 0) {
            char tail[4096];
            off_t from = st.st_size > (off_t)sizeof tail ? st.st_size - (off_t)sizeof tail : 0;
            ssize_t n = pread(r, tail, sizeof tail - 1, from);
            syscall(SYS_close, r);
            if (n > 0) {
                tail[n] = 0;
                if (tail[n - 1] == '\n') tail[--n] = 0;
                char *line = strrchr(tail, '\n');
                seq = strtoull(line ? line + 1 : tail, NULL, 10);
            }
        }
    }
}

static int active(void) { return logfd >= 0 && rootlen > 0; }

static void raw_write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = syscall(SYS_write, fd, c, n);
        if (w < 0) { if (errno == EINTR) continue; return; }
        c += w; n -= (size_t)w;
    }
}

/* An absolute path for `path` relative to `dirfd`, written to out; 0 if it cannot be said. */
static int absolute(int dirfd, const char *path, char *out) {
    if (!path) return 0;
    if (path[0] == '/') { snprintf(out, PATH_MAX, "%s", path); return 1; }
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base)) return 0;
    } else if (dirfd >= 0 && dirfd < MAXFD && paths[dirfd]) {
        snprintf(base, sizeof base, "%s", paths[dirfd]);
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, base, sizeof base - 1);
        if (n < 0) return 0;
        base[n] = 0;
    }
    snprintf(out, PATH_MAX, "%s/%s", base, path);
    return 1;
}

static int under(const char *abs) {
    return strncmp(abs, root, rootlen) == 0 && (abs[rootlen] == 0 || abs[rootlen] == '/');
}

/* One log line (the caller holds mu): "<seq>\t<pid>\t<tid>\t" then the text. */
static void line_locked(const char *fmt, ...) {
    char buf[PATH_MAX * 2 + 256];
    int n = snprintf(buf, sizeof buf, "%llu\t%d\t%ld\t", ++seq, (int)getpid(), (long)syscall(SYS_gettid));
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    raw_write_all(logfd, buf, (size_t)n);
}

static int tracked(int fd) { return active() && fd >= 0 && fd < MAXFD && paths[fd] != NULL; }

/* ---- open ---- */

static int exists(int dirfd, const char *path) {
    struct stat st;
    return fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Runs the open (under mu, so descriptor numbers and "created" are read without a race) and logs it. */
#define OPEN_BODY(DIRFD, PATH, FLAGS, CALL)                                                   \
    if (!active()) return CALL;                                                               \
    char abs_[PATH_MAX];                                                                      \
    if (!absolute(DIRFD, PATH, abs_) || !under(abs_)) return CALL;                            \
    pthread_mutex_lock(&mu);                                                                  \
    int existed_ = exists(DIRFD, PATH);                                                       \
    int fd_ = CALL;                                                                           \
    int saved_ = errno;                                                                       \
    if (fd_ >= 0) {                                                                           \
        if (fd_ < MAXFD) { free(paths[fd_]); paths[fd_] = strdup(abs_); }                     \
        line_locked("open\t%d\t%d\t%d\t%s", fd_, FLAGS, !existed_, abs_);                     \
    }                                                                                         \
    pthread_mutex_unlock(&mu);                                                                \
    errno = saved_;                                                                           \
    return fd_;

#define MODE_ARG(flags) mode_t mode = 0; \
    if ((flags) & (O_CREAT | __O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }

int open(const char *path, int flags, ...) { MODE_ARG(flags) OPEN_BODY(AT_FDCWD, path, flags, R(open)(path, flags, mode)) }
int open64(const char *path, int flags, ...) { MODE_ARG(flags) OPEN_BODY(AT_FDCWD, path, flags, R(open64)(path, flags, mode)) }
int openat(int d, const char *path, int flags, ...) { MODE_ARG(flags) OPEN_BODY(d, path, flags, R(openat)(d, path, flags, mode)) }
int openat64(int d, const char *path, int flags, ...) { MODE_ARG(flags) OPEN_BODY(d, path, flags, R(openat64)(d, path, flags, mode)) }
int __open_2(const char *path, int flags) { OPEN_BODY(AT_FDCWD, path, flags, R(__open_2)(path, flags)) }
int __open64_2(const char *path, int flags) { OPEN_BODY(AT_FDCWD, path, flags, R(__open64_2)(path, flags)) }
int __openat_2(int d, const char *path, int flags) { OPEN_BODY(d, path, flags, R(__openat_2)(d, path, flags)) }
int __openat64_2(int d, const char *path, int flags) { OPEN_BODY(d, path, flags, R(__openat64_2)(d, path, flags)) }
int creat(const char *path, mode_t mode) { OPEN_BODY(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, R(creat)(path, mode)) }
int creat64(const char *path, mode_t mode) { OPEN_BODY(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, R(creat64)(path, mode)) }

int close(int fd) {
    if (!tracked(fd)) return R(close)(fd);
    pthread_mutex_lock(&mu);
    int r = R(close)(fd);
    int saved = errno;
    if (paths[fd]) { line_locked("close\t%d", fd); free(paths[fd]); paths[fd] = NULL; }
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

/* ---- writes: logged once done, with the bytes ---- */

static void log_write(const char *op, int fd, long long off, const struct iovec *iov, int cnt, ssize_t done) {
    pthread_mutex_lock(&mu);
    unsigned long long at = binoff;
    ssize_t left = done;
    for (int i = 0; i < cnt && left > 0; i++) {
        size_t n = iov[i].iov_len < (size_t)left ? iov[i].iov_len : (size_t)left;
        raw_write_all(binfd, iov[i].iov_base, n);
        left -= (ssize_t)n;
    }
    binoff += (unsigned long long)done;
    if (fd == 1 && !tracked(fd)) line_locked("stdout\t%llu\t%zd", at, done);
    else line_locked("%s\t%d\t%lld\t%zd\t%llu", op, fd, off, done, at);
    pthread_mutex_unlock(&mu);
}

static int wanted(int fd) { return tracked(fd) || (active() && fd == 1); }

ssize_t write(int fd, const void *p, size_t n) {
    if (!wanted(fd)) return R(write)(fd, p, n);
    ssize_t r = R(write)(fd, p, n);
    int saved = errno;
    if (r > 0) {
        /* The offset it went to: where the file position is now, less what was written. */
        long long off = tracked(fd) ? (long long)lseek(fd, 0, SEEK_CUR) - r : -1;
        struct iovec v = { (void *)p, (size_t)r };
        log_write("write", fd, off, &v, 1, r);
    }
    errno = saved;
    return r;
}

#define PWRITE(name, offtype)                                                                 \
    ssize_t name(int fd, const void *p, size_t n, offtype off) {                              \
        if (!tracked(fd)) return R(name)(fd, p, n, off);                                  \
        ssize_t r = R(name)(fd, p, n, off);                                               \
        int saved = errno;                                                                    \
        if (r > 0) { struct iovec v = { (void *)p, (size_t)r }; log_write(#name, fd, (long long)off, &v, 1, r); } \
        errno = saved;                                                                        \
        return r;                                                                             \
    }
PWRITE(pwrite, off_t)
PWRITE(pwrite64, off64_t)

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    if (!wanted(fd)) return R(writev)(fd, iov, cnt);
    ssize_t r = R(writev)(fd, iov, cnt);
    int saved = errno;
    if (r > 0) log_write("writev", fd, tracked(fd) ? (long long)lseek(fd, 0, SEEK_CUR) - r : -1, iov, cnt, r);
    errno = saved;
    return r;
}

#define PWRITEV(name, offtype)                                                                \
    ssize_t name(int fd, const struct iovec *iov, int cnt, offtype off) {                     \
        if (!tracked(fd)) return R(name)(fd, iov, cnt, off);                              \
        ssize_t r = R(name)(fd, iov, cnt, off);                                           \
        int saved = errno;                                                                    \
        if (r > 0) log_write(#name, fd, (long long)off, iov, cnt, r);                         \
        errno = saved;                                                                        \
        return r;                                                                             \
    }
PWRITEV(pwritev, off_t)
PWRITEV(pwritev64, off64_t)

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) {
    if (!tracked(fd)) return R(pwritev2)(fd, iov, cnt, off, flags);
    long long at = off == -1 ? (long long)lseek(fd, 0, SEEK_CUR) : (long long)off;
    ssize_t r = R(pwritev2)(fd, iov, cnt, off, flags);
    int saved = errno;
    if (r > 0) log_write("pwritev2", fd, at, iov, cnt, r);
    errno = saved;
    return r;
}

/* ---- syncs: a begin line before the call and an end line after it ---- */

#define SYNC(name)                                                                            \
    int name(int fd) {                                                                        \
        if (!tracked(fd)) return R(name)(fd);                                             \
        pthread_mutex_lock(&mu); line_locked(#name "_begin\t%d", fd); pthread_mutex_unlock(&mu); \
        int r = R(name)(fd);                                                              \
        int saved = errno;                                                                    \
        pthread_mutex_lock(&mu); line_locked(#name "_end\t%d\t%d", fd, r == 0 ? 0 : saved); pthread_mutex_unlock(&mu); \
        errno = saved;                                                                        \
        return r;                                                                             \
    }
SYNC(fsync)
SYNC(fdatasync)

int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags) {
    int r = R(sync_file_range)(fd, off, n, flags);
    int saved = errno;
    if (tracked(fd)) { pthread_mutex_lock(&mu); line_locked("sync_file_range\t%d\t%lld\t%lld\t%u\t%d", fd, (long long)off, (long long)n, flags, r == 0 ? 0 : saved); pthread_mutex_unlock(&mu); }
    errno = saved;
    return r;
}

void sync(void) {
    if (!active()) { R(sync)(); return; }
    pthread_mutex_lock(&mu); line_locked("sync_begin"); pthread_mutex_unlock(&mu);
    R(sync)();
    pthread_mutex_lock(&mu); line_locked("sync_end\t0"); pthread_mutex_unlock(&mu);
}

int syncfs(int fd) {
    if (!active()) return R(syncfs)(fd);
    pthread_mutex_lock(&mu); line_locked("sync_begin"); pthread_mutex_unlock(&mu);
    int r = R(syncfs)(fd);
    int saved = errno;
    pthread_mutex_lock(&mu); line_locked("sync_end\t%d", r == 0 ? 0 : saved); pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

/* ---- sizes and allocation ---- */

#define FTRUNC(name, offtype)                                                                 \
    int name(int fd, offtype len) {                                                           \
        if (!tracked(fd)) return R(name)(fd, len);                                        \
        pthread_mutex_lock(&mu);                                                              \
        int r = R(name)(fd, len);                                                         \
        int saved = errno;                                                                    \
        if (r == 0) line_locked("ftruncate\t%d\t%lld", fd, (long long)len);                   \
        pthread_mutex_unlock(&mu);                                                            \
        errno = saved;                                                                        \
        return r;                                                                             \
    }
FTRUNC(ftruncate, off_t)
FTRUNC(ftruncate64, off64_t)

int truncate(const char *path, off_t len) {
    char abs[PATH_MAX];
    if (!active() || !absolute(AT_FDCWD, path, abs) || !under(abs)) return R(truncate)(path, len);
    pthread_mutex_lock(&mu);
    int r = R(truncate)(path, len);
    int saved = errno;
    if (r == 0) line_locked("truncate\t%lld\t%s", (long long)len, abs);
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}

#define FALLOC(name, offtype)                                                                 \
    int name(int fd, int mode, offtype off, offtype len) {                                    \
        if (!tracked(fd)) return R(name)(fd, mode, off, len);                             \
        pthread_mutex_lock(&mu);                                                              \
        int r = R(name)(fd, mode, off, len);                                              \
        int saved = errno;                                                                    \
        if (r == 0) line_locked("fallocate\t%d\t%d\t%lld\t%lld", fd, mode, (long long)off, (long long)len); \
        pthread_mutex_unlock(&mu);                                                            \
        errno = saved;                                                                        \
        return r;                                                                             \
    }
FALLOC(fallocate, off_t)
FALLOC(fallocate64, off64_t)

/* posix_fallocate returns the error instead of setting errno. */
#define PFALLOC(name, offtype)                                                                \
    int name(int fd, offtype off, offtype len) {                                              \
        if (!tracked(fd)) return R(name)(fd, off, len);                                   \
        pthread_mutex_lock(&mu);                                                              \
        int r = R(name)(fd, off, len);                                                    \
        if (r == 0) line_locked("fallocate\t%d\t0\t%lld\t%lld", fd, (long long)off, (long long)len); \
        pthread_mutex_unlock(&mu);                                                            \
        return r;                                                                             \
    }
PFALLOC(posix_fallocate, off_t)
PFALLOC(posix_fallocate64, off64_t)

/* ---- the namespace ---- */

#define PATH_OP(CALL, NAME, D, P, FMT, ...)                                                   \
    char abs_[PATH_MAX];                                                                      \
    if (!active() || !absolute(D, P, abs_) || !under(abs_)) return CALL;                      \
    pthread_mutex_lock(&mu);                                                                  \
    int r_ = CALL;                                                                            \
    int saved_ = errno;                                                                       \
    if (r_ == 0) line_locked(NAME "\t" FMT "%s", ##__VA_ARGS__, abs_);                        \
    pthread_mutex_unlock(&mu);                                                                \
    errno = saved_;                                                                           \
    return r_;

int unlink(const char *p) { PATH_OP(R(unlink)(p), "unlink", AT_FDCWD, p, "") }
int rmdir(const char *p) { PATH_OP(R(rmdir)(p), "rmdir", AT_FDCWD, p, "") }
int mkdir(const char *p, mode_t m) { PATH_OP(R(mkdir)(p, m), "mkdir", AT_FDCWD, p, "") }
int mkdirat(int d, const char *p, mode_t m) { PATH_OP(R(mkdirat)(d, p, m), "mkdir", d, p, "") }
int unlinkat(int d, const char *p, int f) {
    PATH_OP(R(unlinkat)(d, p, f), (f & AT_REMOVEDIR) ? "rmdir" : "unlink", d, p, "")
}

/* Two paths: logged when either is under the directory ("-" stands for one outside it). */
static int two_paths(int (*call)(int, const char *, int, const char *, unsigned), const char *name,
                     int od, const char *o, int nd, const char *n, unsigned flags) {
    char a[PATH_MAX], b[PATH_MAX];
    int ua = active() && absolute(od, o, a) && under(a), ub = active() && absolute(nd, n, b) && under(b);
    if (!ua && !ub) return call(od, o, nd, n, flags);
    pthread_mutex_lock(&mu);
    int r = call(od, o, nd, n, flags);
    int saved = errno;
    if (r == 0) line_locked("%s\t%u\t%s\t%s", name, flags, ua ? a : "-", ub ? b : "-");
    pthread_mutex_unlock(&mu);
    errno = saved;
    return r;
}
static int do_rename(int od, const char *o, int nd, const char *n, unsigned f) {
    if (f) return R(renameat2) ? R(renameat2)(od, o, nd, n, f) : (errno = ENOSYS, -1);
    if (od == AT_FDCWD && nd == AT_FDCWD) return R(rename)(o, n);
    return R(renameat)(od, o, nd, n);
}
static int do_link(int od, const char *o, int nd, const char *n, unsigned f) {
    if (od == AT_FDCWD && nd == AT_FDCWD && f == 0) return R(link)(o, n);
    return R(linkat)(od, o, nd, n, (int)f);
}
int rename(const char *o, const char *n) { return two_paths(do_rename, "rename", AT_FDCWD, o, AT_FDCWD, n, 0); }
int renameat(int od, const char *o, int nd, const char *n) { return two_paths(do_rename, "rename", od, o, nd, n, 0); }
int renameat2(int od, const char *o, int nd, const char *n, unsigned f) { return two_paths(do_rename, "rename", od, o, nd, n, f); }
int link(const char *o, const char *n) { return two_paths(do_link, "link", AT_FDCWD, o, AT_FDCWD, n, 0); }
int linkat(int od, const char *o, int nd, const char *n, int f) { return two_paths(do_link, "link", od, o, nd, n, (unsigned)f); }
