"""Hypothesis settings for the codec tests: thorough locally, bounded and deterministic in CI.

Most property tests run once per message version (about 90 of them), so they draw a twelfth of the
profile's ``max_examples`` each (``tests.protocol.strategies.per_message``): the whole protocol suite
stays under a minute on two cores. ``HYPOTHESIS_PROFILE=thorough`` draws 150 bodies per message
version and test.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=1800, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
