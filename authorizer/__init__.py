"""Kafka's ZooKeeper-backed ACL authorizer: ``/kafka-acl`` read into a cache, kept current by watches
on ``/kafka-acl-changes``, asked by both daemons before they serve a request.

A service built on ``security/`` (ACLs, principals) and ``zkstore/`` (the znodes), one floor above both.
"""
