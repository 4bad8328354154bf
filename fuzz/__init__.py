"""Coverage-guided fuzzing (atheris, libFuzzer) of everything that reads bytes from a peer.

``python -m fuzz`` (``make fuzz``) runs each target of :mod:`fuzz.targets` for a share of
``--seconds``, each in its own process, keeping a corpus per target in ``fuzz/corpus/`` and writing
any input that raises something other than the refusal the target allows to ``fuzz/crashers/``.
Every file there is replayed by ``tests/protocol/test_fuzz_targets.py``, so a crasher found once
stays a regression test.
"""
