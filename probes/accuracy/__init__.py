"""Accuracy, in one room: the rule-based verifier that judges an answer against the question's
(:mod:`.verifier`, also the reward of reward gain and the testbeds' GRPO), and the accuracy table
the verdict shows beside its decisions, with Wilson intervals (:mod:`.table`). The run's
``accuracy`` stage, which generates and judges the greedy answers, is an operation
(:mod:`probes.operations.accuracy`)."""
