"""The cyclic garbage collector paused while a bulk write builds its objects.

An import holds every item, record and row it has made until it ends, and each of them is a
container: the collector runs every few hundred of them and, as they pile up, walks the whole
heap again and again, finding nothing (100k memories: ~2.5 of ~20 CPU s). Reference counting
still frees what they drop; cycles left meanwhile are collected once it resumes.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside (as a `with` or a decorator); resumed after unless something
    else had paused it (an outer bulk write, nested or in another thread, resumes it itself)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
