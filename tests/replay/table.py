"""The whole replay table and its agreement per layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tests.replay import (
    cases_apply,
    cases_cel,
    cases_crd_defaults,
    cases_crd_validation,
    cases_field_validation,
    cases_kubectl,
    cases_pods,
    cases_selectors,
    cases_subresources,
)
from tests.replay.model import LAYERS, Case

CASES: list[Case] = [*cases_field_validation.CASES, *cases_pods.CASES,
                     *cases_crd_validation.CASES, *cases_crd_defaults.CASES,
                     *cases_cel.CASES, *cases_subresources.CASES, *cases_selectors.CASES,
                     *cases_apply.CASES, *cases_kubectl.CASES]

THRESHOLD_PERCENT = 95.0


def agreement_lines(cases: Sequence[Case], outcomes: Mapping[str, list[str]]) -> list[str]:
    """One line per layer: cases that agree / cases, and the percentage."""
    lines = [f"{'layer':<26} {'agree':>5} {'cases':>5} {'percent':>8}"]
    total_agree = 0
    for layer in LAYERS:
        ids = [case.id for case in cases if case.layer == layer]
        if not ids:
            continue
        agree = sum(1 for case_id in ids if not outcomes[case_id])
        total_agree += agree
        lines.append(f"{layer:<26} {agree:>5} {len(ids):>5} {100.0 * agree / len(ids):>7.1f}%")
    lines.append(f"{'all':<26} {total_agree:>5} {len(cases):>5} "
                 f"{100.0 * total_agree / max(len(cases), 1):>7.1f}%")
    return lines
