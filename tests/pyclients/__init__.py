"""Programs run with the clients that live in their own virtualenv (``.run/pyclients``, ``make clients``)."""
