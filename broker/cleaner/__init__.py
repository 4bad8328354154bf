"""The log cleaner: background threads that compact the logs whose cleanup.policy has ``compact``
(Kafka's LogCleaner, LogCleanerManager and CleanerConfig). The cleaning of one log is
``broker.log.compaction``; this package chooses the log, keeps the checkpoints and runs the threads."""

from broker.cleaner.config import UNLIMITED_IO, CleanerConfig
from broker.cleaner.log_cleaner import LogCleaner
from broker.cleaner.manager import CHECKPOINT_FILE, CleanerManager, LogToClean

__all__ = ["CHECKPOINT_FILE", "UNLIMITED_IO", "CleanerConfig", "CleanerManager", "LogCleaner", "LogToClean"]
