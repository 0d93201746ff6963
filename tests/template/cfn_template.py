"""Load `template.yaml` as CloudFormation does, for the template's tests.

The tags (`!Ref`, `!GetAtt`, `!Sub`, ...) become their long forms (`{"Ref": ...}`,
`{"Fn::GetAtt": [...]}`, `{"Fn::Sub": ...}`), so the tests read the same structure that
CloudFormation receives, rather than a file with its tags stripped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "template.yaml"

# `${Name}` or `${Resource.Attribute}` in a !Sub string; `${!Literal}` is an escape, not a variable.
SUB_VARIABLE = re.compile(r"\$\{(?!!)([^}]+)\}")


# libyaml's parser where PyYAML has it: a tenth of the pure-Python one's CPU, the same constructors.
try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


class CloudFormationLoader(_SafeLoader):
    """A safe YAML loader that knows CloudFormation's short-form intrinsic functions."""


def _construct_intrinsic(loader: CloudFormationLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        # The short form `!GetAtt Resource.Attribute` is the list [Resource, Attribute].
        resource, attribute = value.split(".", 1)
        return {"Fn::GetAtt": [resource, attribute]}
    return {f"Fn::{tag_suffix}": value}


CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template at `path` with its intrinsic functions in their long form."""
    with path.open(encoding="utf-8") as stream:
        # Safe constructors only: no arbitrary objects are built.
        loaded = yaml.load(stream, Loader=CloudFormationLoader)
    assert isinstance(loaded, dict)
    return loaded


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """The template's resources of one type, by logical id."""
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == resource_type
    }


def sub_variables(text: str) -> list[str]:
    """The variables a !Sub string names, `${!...}` escapes left out."""
    return SUB_VARIABLE.findall(text)


def substitute(text: str, value_of: dict[str, str]) -> str:
    """`text` with each `${...}` replaced as !Sub would, from `value_of` (a KeyError if missing)."""
    replaced = SUB_VARIABLE.sub(lambda match: value_of[match.group(1)], text)
    return replaced.replace("${!", "${")


class _NoManagedPolicies:
    """SAM's managed-policy loader, offline: SAM knows the names it attaches by itself."""

    def load(self) -> dict[str, str]:
        return {}


def sam_transform(template: dict[str, Any], parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """`template` as CloudFormation receives it after SAM's transform, with the roles and policies
    that SAM generates (TOOLING.md, "Transforming the template as SAM does"). Each code folder is
    replaced by an S3 location, as `sam deploy` uploads it."""
    import copy
    import os

    from samtranslator.translator.transform import transform

    document = copy.deepcopy(template)
    for resource in document["Resources"].values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if key in properties:
                properties[key] = f"s3://wakeup-artifacts/{key.lower()}.zip"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    transformed = transform(document, dict(parameters or {}), _NoManagedPolicies())
    assert isinstance(transformed, dict)
    return transformed
