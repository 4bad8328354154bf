"""The group coordinator (Kafka's classic rebalance protocol) of the groups whose ``__consumer_offsets``
partition this broker leads: it moves with the LeaderAndIsr requests of the controller.

Split as Kafka splits it: ``coordinator`` (GroupCoordinator: the membership requests and the broker's
entry point), ``rebalance`` (the rebalance state machine and its timers), ``metadata_manager``
(GroupMetadataManager: partitions owned, loading, offsets, records), ``admin`` (list, describe and
delete groups), ``timers`` (the scheduler on the loop); ``state`` holds a group, ``messages`` the
join and sync answers, ``loader`` and ``offsets_log`` read and write the log, ``apis`` the wire.
"""
