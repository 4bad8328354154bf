"""What both daemons share, written once: configuration, the event log, metrics, the request server and
client connection, and process set-up."""
