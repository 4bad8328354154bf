"""ZooKeeper for the control plane: Kafka's znodes, and the operations both daemons need on them.

- ``znodes``: paths and JSON formats, with tolerant readers (corrupt data is logged and skipped);
- ``ops``: the write operations (Create, SetData, Delete, Check) as typed, frozen values;
- ``aio``: an asyncio bridge over kazoo, whose ``multi`` commits those values;
- ``registration``: KIP-380 broker registration (the czxid is the broker epoch);
- ``election`` and ``fencing``: controller election and writes fenced by ``/controller_epoch``;
- ``batch_read``: multi-read batches for loading hundreds of thousands of znodes;
- ``client_config`` and ``client_metrics``: the daemons' ZooKeeper client settings and metrics;
- the admin reads and writes, in Kafka's layout (what its ZooKeeper-era tools do): ``cluster_reads``,
  ``topic_writes``, ``entity_configs`` (and ``users``), ``controller_requests``, over a session
  from ``admin_session``; where replicas go is ``placement/``'s decision, which they only call.

The ZooKeeper servers themselves (``make run``, tests) are ``zkserver/``, tooling above the daemons.

Import the module you need: the package itself imports nothing, so the pure ones (``znodes``,
``ops``) can be used without loading kazoo.
"""
