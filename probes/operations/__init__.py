"""The operations that ``lara <command>``, ``lara run``'s stages and the Python API share: each one
reads its inputs (or, for :mod:`.detect`, opens the models), computes, and writes its outputs
atomically with their meta; a command parses its arguments and calls it, a stage schedules it
(docs/development.md)."""
