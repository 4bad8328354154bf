"""The controller's event handlers, one module per family of events.

Each family is a class built once by ``controller.py`` with the ``ControllerServices`` every family
shares and the other families it calls; all of them run on the event task, one event at a time.

- ``election``: Startup, ControllerChange, Reelect, Expire, Resync, Shutdown (winning, keeping and
  giving up the controller role);
- ``failover``: what a newly elected controller loads and sends before handling anything else;
- ``brokers``: BrokerChange (new, dead and bounced brokers) and BrokerModifications;
- ``topics``: TopicChange and PartitionModifications (new topics and partitions);
- ``topic_deletion``: TopicDeletion and the StopReplica responses that complete it;
- ``controlled_shutdown``: the ControlledShutdown RPC;
- ``isr_changes``: the AlterPartition RPC and ISR change notifications;
- ``preferred_election``: requested and automatic preferred leader elections;
- ``reassignment``: partition reassignment;
- ``responses``: LeaderAndIsr and UpdateMetadata responses.
"""
