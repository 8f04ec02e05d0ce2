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
static inline void czmq_name_current_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }
#else
static inline void czmq_name_current_thread(const char *name) { (void)name; }
#endif
#endif
