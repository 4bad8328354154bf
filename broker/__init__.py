"""The broker daemon: listeners and network planes (KIP-291), request handlers, metadata cache, logs."""
