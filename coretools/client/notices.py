"""The bridge's loggers, which give each warning once.

A bridge re-lists tools whenever a server says they changed, re-sanitises their schemas, and
keeps reading a server that keeps misbehaving; without care the same sentence reaches stderr
again and again, burying the one that differs. Every client module takes its logger from
:func:`client_logger`, whose filter lets a warning through only the first time its exact text
is seen since the last bridge started (:meth:`Bridge.start` clears the memory, so a second
bridge in the same process reports its own findings). Records below WARNING pass untouched:
they are for debugging, where repetition is information.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

MEMORY = 4096
"""How many distinct warnings are remembered; the oldest are forgotten first."""


class OnceFilter(logging.Filter):
    """Drops a WARNING-or-above record whose logger, level and text were already let through."""

    def __init__(self, memory: int = MEMORY) -> None:
        super().__init__()
        self.memory = memory
        self._seen: OrderedDict[tuple[str, int, str], None] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage())
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > self.memory:
            self._seen.popitem(last=False)
        return True

    def forget(self) -> None:
        self._seen.clear()


ONCE = OnceFilter()


def client_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the shared once-only filter attached."""
    logger = logging.getLogger(name)
    if ONCE not in logger.filters:
        logger.addFilter(ONCE)
    return logger
