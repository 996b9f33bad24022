"""Insight into memory (docs/insight.md), the parts below the engine; `mem.insight` itself (the log's
reports, a memory's recalls and provenance) is `engine/_insight.py`.

    door  which door a call came in by (a context variable the doors set)
    log   the search log's writer: searches noted on the request path, written off it
"""
