"""The memory of process trees, as the pool's ceiling counts it: proportional set size (PSS).

A worker's tree is the worker and every descendant (a browser's driver and Chromium's processes).
Chromium's processes share most of their pages, and so do forked workers: a sum of RSS counts a shared
page once per process (one default Chromium: 912 MB of RSS summed, 378 MB of PSS), while PSS splits
it between the processes that share it, so the trees' PSS add up to what the pool really holds."""

import psutil


def tree(pid):
    """The process `pid` and its descendants (those still there)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def usage(procs):
    """(pss, rss) in bytes summed over `procs`; a process that went meanwhile counts nothing."""
    pss = rss = 0
    for p in procs:
        try:
            m = p.memory_full_info()
        except psutil.Error:
            continue
        pss += m.pss
        rss += m.rss
    return pss, rss


def tree_pss(pid):
    """PSS in bytes of `pid`'s whole tree; 0 once it is gone."""
    return usage(tree(pid))[0]


def own_pss(pid):
    """PSS in bytes of the process `pid` alone (the supervisor: its children are counted per worker)."""
    return usage(tree(pid)[:1])[0]


M_ARENA_MAX = -8    # glibc's mallopt parameter (malloc.h)


def one_malloc_arena():
    """Make the threads of this process share one malloc arena. glibc gives each thread that allocates its
    own (up to 8 per core), and a worker's lanes each held ~2 MB of arena (issue 45: 4 workers of 2 lanes,
    213 MB of RSS summed against 205 MB with one arena); the lanes take turns on the GIL, so they gain
    nothing from their own. Called in a worker before its lanes start; a libc without mallopt is left as it is."""
    import ctypes
    try:
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)
    except (OSError, AttributeError):
        pass
