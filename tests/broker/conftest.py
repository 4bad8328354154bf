from tests.broker.cluster import cluster

__all__ = ["cluster"]
