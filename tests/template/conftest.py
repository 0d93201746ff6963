"""Fixtures for the template's tests."""

from __future__ import annotations

from typing import Any

import pytest
from cfn_template import load_template, sam_transform


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    """`template.yaml`, loaded with its CloudFormation tags in their long form."""
    return load_template()


@pytest.fixture(scope="session")
def transformed(template: dict[str, Any]) -> dict[str, Any]:
    """`template.yaml` after SAM's transform: the CloudFormation that AWS runs."""
    return sam_transform(template)
