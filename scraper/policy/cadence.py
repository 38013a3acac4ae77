"""When a source's walk is due: pure functions of its cadence, its last complete walk and the time."""


def next_due_at(every_s, last_complete_at, now):
    """Unix time the next walk is due: at once when it never completed one, else `every_s` after it."""
    if last_complete_at is None:
        return now
    return last_complete_at + every_s


def is_due(every_s, last_complete_at, now):
    """Never walked completely, or the last complete walk is at least `every_s` old."""
    return next_due_at(every_s, last_complete_at, now) <= now
