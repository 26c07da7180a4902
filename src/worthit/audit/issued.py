"""How many indexes this writer has handed out, in a file that outlives a crash of the process.

A receipt is handed out before its leaf is on disk, so after a crash the log must know
how many receipts went out to say how many leaves were lost, and to give none of those
indexes to another leaf. Writing that number to the database on every append would put
a disk write on the answer path. Instead the number is stored into a shared memory
mapping of this small file: one 8-byte store per append, kept by the kernel's page
cache when the process dies, so the next start reads it exactly. A machine that
restarted (a different boot ID) may have lost the page, so the number is trusted only
from the same boot; otherwise the log falls back to its durable reservation (log.py).

The file is also the writer's lock: `flock` held for the writer's life, released by the
kernel when the process dies, so a second writer cannot assign the same indexes.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import uuid
from pathlib import Path

from worthit.audit.errors import LogBusyError

MAGIC = b"WTAUDIT1"
_LAYOUT = struct.Struct("<8s16sQ")
_COUNT_AT = 24
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> bytes | None:
    """This boot's identity, or None where the system does not tell it."""
    try:
        return uuid.UUID(BOOT_ID.read_text().strip()).bytes
    except (OSError, ValueError):
        return None


def check_unlocked(path: Path) -> None:
    """`LogBusyError` when another process holds the writer's lock now: lets a command say
    so before it starts, instead of failing half way into its start-up."""
    IssuedCounter(path).close()


class IssuedCounter:
    def __init__(self, path: Path) -> None:
        """Opens (or makes) the counter and takes the writer's lock, or `LogBusyError`."""
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise LogBusyError(
                f"another process is writing the audit log ({path} is locked)"
            ) from None
        if os.fstat(self._fd).st_size < _LAYOUT.size:
            os.ftruncate(self._fd, _LAYOUT.size)
        self._map = mmap.mmap(self._fd, _LAYOUT.size)

    def read(self) -> tuple[bytes | None, int]:
        """(boot ID, count) as last stored; (None, 0) for a new or unreadable file."""
        magic, boot, count = _LAYOUT.unpack_from(self._map)
        if magic != MAGIC:
            return None, 0
        return boot, count

    def reset(self, count: int) -> None:
        """Stamps the file with this boot and `count`, made durable (once per start)."""
        _LAYOUT.pack_into(self._map, 0, MAGIC, boot_id() or bytes(16), count)
        self._map.flush()

    def store(self, count: int) -> None:
        struct.pack_into("<Q", self._map, _COUNT_AT, count)

    def close(self) -> None:
        self._map.flush()
        self._map.close()
        os.close(self._fd)  # releases the lock
