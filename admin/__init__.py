"""Kafka's topic admin requests, served the same way by both daemons: CreateTopics, DeleteTopics,
CreatePartitions and Metadata's auto-creation, with the topic-config checks they make.

- ``topic_requests``: the sans-thread core each daemon runs on its event loop over a ``TopicView`` of
  what it knows (a broker's metadata cache, the controller's context): checks, Kafka's error codes and
  messages, the ZooKeeper writes (``zkstore.topic_writes``, ``zkstore.entity_configs``), the events,
  and the wait until the view shows the change;
- ``topic_configs``: Kafka's topic-level config names and the checks of their values (pure);
- ``errors``: ``AdminFailure``, a request refused with Kafka's error code and a message.

A service built on ``placement/`` (where replicas go) and ``zkstore/`` (the znodes), one floor above
``zkstore/`` and below the daemons, which each adapt their own handlers to it. Import the module you
need: the package itself imports nothing, so ``topic_configs`` can be used without loading kazoo.
"""
