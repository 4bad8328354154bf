"""The controller's deterministic simulation: the real controller on simulated ZooKeeper, brokers and time.

``python -m controller.sim`` runs it (see ``__main__``); ``run.run`` is one seeded schedule.
"""
