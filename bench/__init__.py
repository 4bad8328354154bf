"""Benchmarks: each writes JSON to bench/results/ and asserts nothing. Run as ``python -m bench.<name>``."""
