"""The transaction coordinator: transactional ids, their producer ids and epochs, and the two-phase
commit of each transaction through ``__transaction_state`` and the partitions' markers."""
