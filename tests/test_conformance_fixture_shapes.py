"""A fixture of the wrong shape fails the conformance class at once, naming the fixture,
its fields and what each must be, instead of ``ValueError: not enough values to
unpack`` deep inside a test."""

from __future__ import annotations

import unittest
from typing import Any

import pytest

from managoat_sandbox.testing.conformance import (
    FIXTURE_FIELDS,
    FIXTURE_SHAPES,
    OPTIONAL_FIXTURES,
    REQUIRED_FIXTURES,
    ConformanceTests,
)
from managoat_sandbox.testing.fake import Fake

from .test_fake_conformance import FAKE_FIXTURES


def _class_errors(fixtures: dict[str, Any]) -> list[str]:
    """The errors of running one test of a conformance class with ``fixtures``."""
    probe = type(
        "ProbeShapes",
        (ConformanceTests, unittest.TestCase),
        {
            "adapter": Fake,
            "fixtures": fixtures,
        },
    )
    result = unittest.TestResult()
    unittest.TestSuite([probe("test_build_handle_is_pure_and_provider_tagged")]).run(result)
    assert not result.failures
    return [text for _, text in result.errors]


def test_every_fixture_has_one_shape_and_every_field_one_rule() -> None:
    assert set(FIXTURE_SHAPES) == REQUIRED_FIXTURES | OPTIONAL_FIXTURES
    assert {field for fields in FIXTURE_SHAPES.values() for field in fields} == set(FIXTURE_FIELDS)


def test_the_fake_s_fixtures_are_well_shaped() -> None:
    assert _class_errors(dict(FAKE_FIXTURES)) == []


@pytest.mark.parametrize(
    ("name", "value", "shape"),
    [
        ("exec_mixed", ("emit", ["out:OUT"], "OUT"), "(cmd, args, out_part, err_part) of 4 items"),
        ("exec_late_child", ("emit", ["out:x"]), "(cmd, args, early, late)"),
        ("spawn_ok", ("emit", ["out:x"], "x"), "(cmd, args) of 2 items"),
        ("exec_fail", ("emit", ["exit:3"], "3"), "code an int"),
        ("spawn_bulk", ("emit", ["out:x"], True), "nbytes an int"),
        ("exec_ok", ("emit", "out:hello", "hello"), "args a list of str"),
        ("exec_slow", "sleep 5", "(cmd, args)"),
        ("exec_ordered", ("emit", ["out:a"], 1), "expected_merged a str or bytes"),
        ("exec_killed", ("emit", ["out:x"], 137), "signum a signal number, 1-127"),
    ],
)
def test_a_misshapen_fixture_fails_the_class_naming_it_and_its_shape(
    name: str, value: object, shape: str
) -> None:
    [error] = _class_errors({**FAKE_FIXTURES, name: value})
    assert f"ProbeShapes.fixtures[{name!r}] must be a tuple" in error
    assert shape in error and repr(value) in error
    assert "not enough values to unpack" not in error


def test_every_misshapen_fixture_is_named_at_once() -> None:
    [error] = _class_errors({**FAKE_FIXTURES, "exec_mixed": ("emit", []), "spawn_stay": ("emit",)})
    assert "'exec_mixed'" in error and "'spawn_stay'" in error
