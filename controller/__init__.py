"""The controller daemon: context, events, state machines, elections, request batching, channel manager.

Its decisions are pure functions over a ControllerContext; the shell executes their ZooKeeper writes
and broker requests (see ../docs and ARCHITECTURE).
"""
