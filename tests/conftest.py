"""Puts ``tests/`` on ``sys.path`` (pytest does so for a conftest's folder), so that every test
can ``import tooling``; and says in the header whether missing tools skip or fail."""

from __future__ import annotations

from tooling import in_ci


def pytest_report_header(config):
    return "CI=true: tests fail when a tool they need is missing" if in_ci() else \
        "not CI: tests skip when a tool they need is missing"
