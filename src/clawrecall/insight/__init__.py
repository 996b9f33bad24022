"""Insight into memory (docs/insight.md): what it is asked, what it finds, why a memory was recalled.

    door       which door a call came in by (a context variable the doors set)
    log        the search log's writer: searches noted on the request path, written off it
    namespace  `mem.insight`: the log's reports and a memory's recalls, in the scopes the caller reads
"""
