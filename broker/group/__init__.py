"""The group coordinator (Kafka's classic rebalance protocol) of the groups whose ``__consumer_offsets``
partition this broker leads: it moves with the LeaderAndIsr requests of the controller."""
