"""The one way an export or the report reaches its file: a temporary file beside it, renamed over it once
complete, so that a reader never sees half an output and a failure leaves nothing behind. A folder that
does not exist or cannot be written is one sentence (ConfigError), said before anything is computed.
"""

import contextlib
import os
import tempfile

from scraper.base.errors import ConfigError


def _refused(what, path, why):
    return ConfigError(f"cannot write the {what} {path}: {why}.")


def check_folder(path, what="output"):
    """ConfigError when `path`'s folder does not exist, is not a folder, or cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(folder):
        raise _refused(what, path, f"the folder {folder} does not exist")
    if not os.path.isdir(folder):
        raise _refused(what, path, f"{folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _refused(what, path, f"the folder {folder} cannot be written (permission denied)")
    return folder


def make_folder(folder, what="output"):
    """Make `folder` and its parents when missing (the files export); one sentence when that fails."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise _refused(what, folder, f"the folder cannot be made ({e.strerror or e})") from None
    if not os.path.isdir(folder):
        raise _refused(what, folder, "it is not a folder")


def _mode():
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask       # mkstemp makes 0600; an output is an ordinary file


@contextlib.contextmanager
def atomic_path(path, what="output"):
    """Yields a temporary path beside `path` to write (a library that opens it by name: Parquet); renamed
    to `path` when the block ends normally, removed otherwise."""
    folder = check_folder(path, what)
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".export-", suffix=".tmp")
    except OSError as e:
        raise _refused(what, path, f"the folder {folder} cannot be written ({e.strerror or e})") from None
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, _mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic(path, binary=False, what="output"):
    """Yields a file open for writing (UTF-8 text with newline="" unless `binary`) that becomes `path`
    when the block ends normally; nothing is left otherwise."""
    with atomic_path(path, what) as tmp:
        if binary:
            with open(tmp, "wb") as out:
                yield out
        else:
            with open(tmp, "w", encoding="utf-8", newline="") as out:
                yield out


def put(path, data, what="output"):
    """Write `data` (bytes) to `path` atomically."""
    with atomic(path, binary=True, what=what) as out:
        out.write(data)
