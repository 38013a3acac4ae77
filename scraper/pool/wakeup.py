"""A worker's word to the supervisor that it found nothing to claim: a byte on a pipe the supervisor waits on
beside its workers' sentinels, so the run's end is seen as soon as the last job is written, not at the next
tick (issue 45: the time from the last answer to the exit). It carries no data: the supervisor still asks
the database whether work is left; a lost or extra byte only moves when it asks."""

import os


class Wakeup:
    """Made by the supervisor before its first fork; the workers inherit both ends and only `ring`."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)    # a full pipe already wakes the supervisor: a ring never waits

    def fileno(self) -> int:
        """The end `multiprocessing.connection.wait` watches."""
        return self._r

    def ring(self) -> None:
        try:
            os.write(self._w, b"\0")
        except (BlockingIOError, OSError):
            pass    # full (the supervisor has yet to drain it) or closed (it is gone): nothing to add

    def drain(self) -> None:
        try:
            while os.read(self._r, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
