"""The conversation record's rules: how a transcript becomes stored messages (`transcript`) and when a
segment closes (`segments`). The engine's `mem.conversations` applies them to a store."""
