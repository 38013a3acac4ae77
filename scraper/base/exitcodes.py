"""Every exit code of scraper: the commands', the run's, and the worker processes' (read by the supervisor)."""

# every command
OK = 0
FAILED = 1          # `run`: some job in the database is failed; another command: its work could not be done
USAGE = 2           # usage or configuration error (click's own usage errors exit 2 too)

# `scraper run` only
GAVE_UP = 3         # some jobs were left pending because their domain kept failing
DB_DOWN = 69        # EX_UNAVAILABLE: the database stayed unreachable past db_down_after; nothing was lost
CRASHING = 70       # EX_SOFTWARE: workers keep dying at start; restarting them would spin
DISK_FULL = 74      # EX_IOERR: the disk under the database is full or under min_free_mb; free space, run again
LOCKED = 75         # EX_TEMPFAIL: another run holds the database; cron may simply try again later
SIGINT = 130        # stopped by Ctrl-C (128 + the signal's number, as a shell reports it)
SIGTERM = 143       # stopped by SIGTERM

# a worker process, as the supervisor reads it
WORKER_STOPPED = 0  # asked to stop (signal, or the supervisor went away): its job is handed back for free
WORKER_CRASHED = 1  # could not start, or died on an error: the job it held is charged
WORKER_RECYCLE = 3  # finished its quota of jobs or was over its memory share: start a fresh one
WORKER_DB_DOWN = 4  # the database stayed unreachable past db_down_after: its jobs come back, nothing charged
WORKER_DISK_FULL = 5    # SQLite said the disk is full: its job was handed back; the run stops (DISK_FULL)
