#ifndef TOUCHSYNC_CZEROMQ_SHIM_H
#define TOUCHSYNC_CZEROMQ_SHIM_H
// The system libzmq (Debian: libzmq3-dev). Draft APIs are not used, so any
// stable libzmq 4.3.x works.
#include <zmq.h>
#include <errno.h>

// errno is a macro over a thread-local on glibc; zmq_errno() is the portable
// way to read it, this accessor exists so Swift never touches the macro.
static inline int czmq_errno(void) { return zmq_errno(); }

// Names the calling thread for top -H, perf, gdb and /proc (the threads that
// own sockets). Glibc's Swift module leaves pthread_setname_np out.
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static inline void czmq_name_current_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }
// The kernel's id of the calling thread (its /proc/self/task entry), for benchmarks.
static inline int czmq_current_thread_id(void) { return (int)syscall(SYS_gettid); }
#else
static inline void czmq_name_current_thread(const char *name) { (void)name; }
static inline int czmq_current_thread_id(void) { return 0; }
#endif

// epoll over sockets' ZMQ_FD (ZMQReadySet). struct epoll_event is packed on
// x86-64, which Swift does not import, so only tokens cross this line.
#if defined(__linux__)
#include <stdint.h>
#include <sys/epoll.h>
static inline int czmq_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int czmq_epoll_add(int epoll, int fd, uint64_t token) {
    struct epoll_event event = {0};
    event.events = EPOLLIN;
    event.data.u64 = token;
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}
static inline int czmq_epoll_remove(int epoll, int fd) { return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL); }
// Waits and writes up to 256 ready tokens; returns their count, or -1 (errno).
static inline int czmq_epoll_wait(int epoll, uint64_t *tokens, int timeout) {
    struct epoll_event events[256];
    int count = epoll_wait(epoll, events, 256, timeout);
    for (int index = 0; index < count; index++) tokens[index] = events[index].data.u64;
    return count;
}
#endif
#endif
