"""What both daemons share, written once: configuration loading (and, next, the event log and metrics)."""
