"""Byte-for-byte comparison of compiled cases with golden/ (``make golden`` rewrites)."""

from __future__ import annotations

import os

import pytest

from golden_cases import CASES, case_name, compile_case


@pytest.mark.parametrize("case", CASES, ids=[case_name(c) for c in CASES])
def test_golden(case: str, update_golden: bool) -> None:
    golden, text = compile_case(case)
    if update_golden:
        os.makedirs(os.path.dirname(golden), exist_ok=True)
        with open(golden, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    assert os.path.exists(golden), f"missing {golden}: run make golden"
    with open(golden, encoding="utf-8") as fh:
        assert fh.read() == text, f"{golden} differs: review and run make golden"
