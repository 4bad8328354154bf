"""Where replicas go: Kafka's rack-unaware replica assignment (``AdminUtils.assignReplicasToBrokers``)
and the checks of a given assignment, as pure functions.

A decision about partitions, so it is not ``zkstore/``'s (which only reads and writes znodes); the
admin writes in ``zkstore/``, the broker's CreateTopics and the CLI all call it. It imports nothing of
the project.
"""
