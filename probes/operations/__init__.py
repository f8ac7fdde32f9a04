"""The operations on score files that ``lara <command>`` and ``lara run``'s stages share: each one
reads its inputs, computes, and writes its outputs atomically with their meta; a command parses its
arguments and calls it, a stage schedules it (docs/development.md)."""
