"""A command builds its settings object from its parsed flags (issue 43, item 3):
``settings_from`` takes every flag named like a field, lets the caller give the fields parsed
differently, and leaves the rest at their defaults — one source of truth for both."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from probes.cli import build_parser
from probes.commands._common import settings_from
from probes.operations.score import ScoreSettings


@dataclass(frozen=True)
class _Settings:
    alpha: float = 0.05
    seed: int = 0
    subsets: tuple[str, ...] = ()


def test_flags_named_like_fields_fill_them_and_the_rest_keep_their_defaults():
    args = argparse.Namespace(alpha=0.1, output="x.json", subsets="members,non_members")
    assert settings_from(_Settings, args, subsets=("members",)) == _Settings(0.1, 0, ("members",))
    assert settings_from(_Settings, argparse.Namespace()) == _Settings()


def test_lara_score_flags_become_the_same_settings_a_run_config_gives():
    args = build_parser().parse_args(["score", "m.h5", "-o", "s.csv", "--folds", "3", "--dc", "signed"])
    built = settings_from(ScoreSettings, args, metric_set=("zRSM", "DC", "zRSI"), variants=True)
    assert built == ScoreSettings(folds=3, dc="signed")
