"""One BLAS thread for the small matrix products of deduplication and the vector index.

They are memory-bound, so a second thread makes them no faster; it stalls for milliseconds
whenever another process holds the other core, and after each product OpenBLAS leaves it
spinning idle for ~0.13 s, taking a core from the embedding model that runs next (after
every 1,000 adds it burned 0.13 s of CPU before this).
"""

from __future__ import annotations

from functools import lru_cache


def one_blas_thread():
    """A context manager: BLAS products inside it run on the calling thread alone."""
    return _threadpools().limit(limits=1, user_api="blas")


@lru_cache(maxsize=1)
def _threadpools():
    """Built on first use: inspecting the loaded libraries takes a while, and `stats` never needs it."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
