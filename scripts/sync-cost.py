#!/usr/bin/env python3
# The cost of making many files durable: an fdatasync each, or one syncfs of
# their filesystem (docs/performance.md, "Syncing many boards' files at once").
#   scripts/sync-cost.py FOLDER   (30 files of FOLDER, 300 rounds of 200 bytes each)
import os, ctypes, resource, time, sys
libc = ctypes.CDLL("libc.so.6", use_errno=True)
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
fds = [os.open(f"{d}/b{i}", os.O_WRONLY|os.O_CREAT|os.O_APPEND, 0o644) for i in range(30)]
rec = b"x"*200
def cpu(): r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
for mode in ["fdatasync", "syncfs", "fdatasync", "syncfs"]:
    c0, t0 = cpu(), time.time()
    for _ in range(300):
        for fd in fds: os.write(fd, rec)
        if mode == "fdatasync":
            for fd in fds: os.fdatasync(fd)
        else:
            if libc.syncfs(fds[0]) != 0: raise OSError(ctypes.get_errno(), "syncfs")
    c1, t1 = cpu(), time.time()
    print(f"{mode:10s} cpu {1e3*(c1-c0)/300:.3f} ms per round, wall {1e3*(t1-t0)/300:.3f} ms per round")
