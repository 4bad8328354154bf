"""Where replicas go: Kafka's replica assignment and the checks of a given one, as pure functions.

- ``assignment``: ``AdminUtils.assignReplicasToBrokersRackUnaware``, the checks of an explicit
  assignment, and the replicas of partitions added to a topic;
- ``plans``: reassignment plans read strictly, checked, and proposed over new brokers;
- ``errors``: ``AdminError``, the refusal every admin path raises (defined here, where it is first raised).

A decision about partitions, so it is not ``zkstore/``'s (which only reads and writes znodes): the admin
writes in ``zkstore/`` (``topic_writes``, ``controller_requests``), the broker's CreateTopics and the CLI
all call it. It imports nothing of the project.
"""
