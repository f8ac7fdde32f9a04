"""The floor below ``cache``, ``generation`` and ``probes``: the toolkit's one root error type and
its one config validator (dataclasses from YAML mappings, errors that name the bad key). It
imports none of them; each of them builds on it."""
