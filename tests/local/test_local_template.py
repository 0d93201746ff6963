"""The template loader (CloudFormation's short tags) and the resolver of intrinsic functions."""

import random
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from wakeup_awsfacts import template as template_module
from wakeup_awsfacts.template import (
    NO_VALUE,
    CloudFormationLoader,
    Resolver,
    Template,
    TemplateError,
    load_template,
    parse_template,
)


def template_of(yaml_text: str) -> Template:
    return Template(parse_template(textwrap.dedent(yaml_text)), Path("/tmp"))


def resolver_of(yaml_text: str, **kwargs: Any) -> Resolver:
    kwargs.setdefault("rng", random.Random(7))
    return Resolver(template_of(yaml_text), "mystack", **kwargs)


SMALL = """
    AWSTemplateFormatVersion: 2010-09-09
    Parameters:
      Stage: {Type: String, Default: dev}
      Subnets: {Type: CommaDelimitedList, Default: "a, b"}
      Retention: {Type: Number, Default: 14}
    Mappings:
      Sizes:
        dev: {Memory: 256}
    Conditions:
      IsProd: !Equals [!Ref Stage, prod]
      IsDev: !Not [!Condition IsProd]
      Both: !And [!Condition IsDev, !Equals [a, a]]
      Either: !Or [!Condition IsProd, !Condition IsDev]
    Resources:
      Table:
        Type: AWS::DynamoDB::Table
        Properties: {KeySchema: []}
      NamedTable:
        Type: AWS::DynamoDB::Table
        Properties: {TableName: !Sub "${AWS::StackName}-items"}
      Queue:
        Type: AWS::SQS::Queue
      FifoQueue:
        Type: AWS::SQS::Queue
        Properties: {FifoQueue: true}
      Group:
        Type: AWS::Scheduler::ScheduleGroup
      Function:
        Type: AWS::Serverless::Function
        Properties: {FunctionName: !Sub "${AWS::StackName}-caller"}
      Role:
        Type: AWS::IAM::Role
    """


def test_each_short_tag_loads_as_its_long_form() -> None:
    document = parse_template(
        textwrap.dedent(
            """
            ref: !Ref Table
            getatt_dotted: !GetAtt Table.Arn
            getatt_list: !GetAtt [Table, Arn]
            getatt_deep: !GetAtt Db.Endpoint.Address
            sub: !Sub "${AWS::StackName}-x"
            sub_list: !Sub ["${A}", {A: b}]
            join: !Join [",", [a, b]]
            if: !If [IsProd, a, b]
            select: !Select [0, [a]]
            split: !Split [",", "a,b"]
            equals: !Equals [a, b]
            not: !Not [!Condition C]
            and: !And [!Condition C, !Condition D]
            or: !Or [!Condition C, !Condition D]
            find: !FindInMap [M, K, V]
            base64: !Base64 text
            import: !ImportValue Exported
            azs: !GetAZs ""
            cidr: !Cidr [10.0.0.0/16, 2, 8]
            """
        )
    )
    assert document == {
        "ref": {"Ref": "Table"},
        "getatt_dotted": {"Fn::GetAtt": ["Table", "Arn"]},
        "getatt_list": {"Fn::GetAtt": ["Table", "Arn"]},
        "getatt_deep": {"Fn::GetAtt": ["Db", "Endpoint.Address"]},
        "sub": {"Fn::Sub": "${AWS::StackName}-x"},
        "sub_list": {"Fn::Sub": ["${A}", {"A": "b"}]},
        "join": {"Fn::Join": [",", ["a", "b"]]},
        "if": {"Fn::If": ["IsProd", "a", "b"]},
        "select": {"Fn::Select": [0, ["a"]]},
        "split": {"Fn::Split": [",", "a,b"]},
        "equals": {"Fn::Equals": ["a", "b"]},
        "not": {"Fn::Not": [{"Condition": "C"}]},
        "and": {"Fn::And": [{"Condition": "C"}, {"Condition": "D"}]},
        "or": {"Fn::Or": [{"Condition": "C"}, {"Condition": "D"}]},
        "find": {"Fn::FindInMap": ["M", "K", "V"]},
        "base64": {"Fn::Base64": "text"},
        "import": {"Fn::ImportValue": "Exported"},
        "azs": {"Fn::GetAZs": ""},
        "cidr": {"Fn::Cidr": ["10.0.0.0/16", 2, 8]},
    }


def test_the_format_version_stays_a_string_not_a_date() -> None:
    assert template_of(SMALL).document["AWSTemplateFormatVersion"] == "2010-09-09"


def test_libyamls_parser_reads_template_yaml_as_the_pure_python_one_does() -> None:
    class PurePython(yaml.SafeLoader):
        yaml_constructors = CloudFormationLoader.yaml_constructors
        yaml_implicit_resolvers = CloudFormationLoader.yaml_implicit_resolvers

    assert issubclass(CloudFormationLoader, yaml.CSafeLoader)  # PyYAML's wheels have libyaml
    text = (Path(__file__).parents[2] / "template.yaml").read_text()
    assert parse_template(text) == yaml.load(text, Loader=PurePython)  # noqa: S506 - safe constructors only


def test_each_parse_of_one_text_is_a_document_of_its_own() -> None:
    # given one template's text parsed twice (the second from the first's, kept)
    text = (Path(__file__).parents[2] / "template.yaml").read_text()
    parsed_before = template_module._parsed.cache_info().hits
    first, second = parse_template(text), parse_template(text)
    # then it was parsed once at most, and both are the document, and a change to one is not a
    # change to the other
    assert template_module._parsed.cache_info().hits >= parsed_before + 1
    assert first == second
    first["Resources"]["Table"]["Properties"]["TableName"] = "changed"
    del first["Parameters"]
    assert parse_template(text) == second != first


def test_a_template_that_is_not_yaml_or_cannot_be_read_is_a_template_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="not valid YAML"):
        parse_template("a: [unclosed")
    with pytest.raises(TemplateError, match="cannot read"):
        load_template(tmp_path / "missing.yaml")


def test_ref_gives_parameter_defaults_overrides_and_pseudo_parameters() -> None:
    resolver = resolver_of(SMALL, region="eu-west-1", parameter_overrides={"Stage": "prod"})
    assert resolver.resolve({"Ref": "Stage"}) == "prod"
    assert resolver.resolve({"Ref": "Subnets"}) == ["a", "b"]
    assert resolver.resolve({"Ref": "Retention"}) == "14"
    assert resolver.resolve({"Ref": "AWS::StackName"}) == "mystack"
    assert resolver.resolve({"Ref": "AWS::Region"}) == "eu-west-1"
    assert resolver.resolve({"Ref": "AWS::AccountId"}) == "123456789012"
    assert resolver.resolve({"Ref": "AWS::Partition"}) == "aws"


def test_aws_novalue_removes_the_key_or_item() -> None:
    resolver = resolver_of(SMALL)
    resolved = resolver.resolve(
        {"keep": 1, "drop": {"Ref": "AWS::NoValue"}, "list": [1, {"Fn::If": ["IsProd", 2, {"Ref": "AWS::NoValue"}]}]}
    )
    assert resolved == {"keep": 1, "list": [1]}
    assert resolver.resolve({"Ref": "AWS::NoValue"}) is NO_VALUE


def test_resources_are_named_as_cloudformation_names_them_unless_named() -> None:
    resolver = resolver_of(SMALL)
    assert re.fullmatch(r"mystack-Table-[A-Z0-9]{12}", resolver.resolve({"Ref": "Table"}))
    assert resolver.resolve({"Ref": "NamedTable"}) == "mystack-items"
    assert resolver.resolve({"Ref": "Function"}) == "mystack-caller"
    assert re.fullmatch(r"mystack-Group-[A-Z0-9]{12}", resolver.resolve({"Ref": "Group"}))
    assert re.fullmatch(r"mystack-FifoQueue-[A-Z0-9]{12}\.fifo", resolver.physical_name("FifoQueue"))
    # A name is made once: every reference sees the same one.
    assert resolver.resolve({"Ref": "Table"}) == resolver.resolve({"Ref": "Table"})


def test_long_names_are_cut_to_the_services_limit() -> None:
    resolver = Resolver(template_of(SMALL), "s" * 100, rng=random.Random(1))
    assert len(resolver.physical_name("Queue")) <= 80
    assert len(resolver.physical_name("Role")) <= 64


def test_a_queue_ref_is_its_url_and_getatt_gives_arn_url_and_name() -> None:
    resolver = resolver_of(SMALL, endpoint_url="http://127.0.0.1:5000")
    name = resolver.physical_name("Queue")
    assert resolver.resolve({"Ref": "Queue"}) == f"http://127.0.0.1:5000/123456789012/{name}"
    assert resolver.resolve({"Fn::GetAtt": ["Queue", "QueueUrl"]}) == f"http://127.0.0.1:5000/123456789012/{name}"
    assert resolver.resolve({"Fn::GetAtt": ["Queue", "QueueName"]}) == name
    assert resolver.resolve({"Fn::GetAtt": ["Queue", "Arn"]}) == f"arn:aws:sqs:us-east-1:123456789012:{name}"
    resolver.set_ref("Queue", "http://elsewhere/q")
    assert resolver.resolve({"Ref": "Queue"}) == "http://elsewhere/q"


def test_getatt_arn_of_each_kind_of_resource() -> None:
    resolver = resolver_of(SMALL)
    table = resolver.physical_name("Table")
    table_arn = resolver.resolve({"Fn::GetAtt": ["Table", "Arn"]})
    assert table_arn == f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}"
    assert (
        resolver.resolve({"Fn::GetAtt": ["Function", "Arn"]})
        == "arn:aws:lambda:us-east-1:123456789012:function:mystack-caller"
    )
    group = resolver.physical_name("Group")
    assert (
        resolver.resolve({"Fn::GetAtt": ["Group", "Arn"]})
        == f"arn:aws:scheduler:us-east-1:123456789012:schedule-group/{group}"
    )
    role = resolver.physical_name("Role")
    assert resolver.resolve({"Fn::GetAtt": ["Role", "Arn"]}) == f"arn:aws:iam::123456789012:role/{role}"


def test_sub_replaces_parameters_pseudo_parameters_attributes_and_its_own_variables() -> None:
    resolver = resolver_of(SMALL)
    table = resolver.physical_name("Table")
    assert resolver.resolve({"Fn::Sub": "${AWS::StackName}/${Stage}/${Table}"}) == f"mystack/dev/{table}"
    assert resolver.resolve({"Fn::Sub": "${Table.Arn}/index/x"}).endswith(f"table/{table}/index/x")
    assert resolver.resolve({"Fn::Sub": ["${Greeting}, ${Stage}", {"Greeting": "hello"}]}) == "hello, dev"
    assert resolver.resolve({"Fn::Sub": "${!Literal} stays"}) == "${Literal} stays"


def test_join_select_split_findinmap_base64_and_getazs() -> None:
    resolver = resolver_of(SMALL)
    assert resolver.resolve({"Fn::Join": ["-", ["a", {"Ref": "Stage"}]]}) == "a-dev"
    assert resolver.resolve({"Fn::Select": [1, {"Fn::Split": [",", "x,y,z"]}]}) == "y"
    assert resolver.resolve({"Fn::FindInMap": ["Sizes", {"Ref": "Stage"}, "Memory"]}) == 256
    assert resolver.resolve({"Fn::Base64": "hi"}) == "aGk="
    assert resolver.resolve({"Fn::GetAZs": ""}) == ["us-east-1a", "us-east-1b", "us-east-1c"]


def test_if_follows_the_templates_conditions() -> None:
    dev = resolver_of(SMALL)
    prod = resolver_of(SMALL, parameter_overrides={"Stage": "prod"})
    value = {"Fn::If": ["IsProd", "big", "small"]}
    assert (dev.resolve(value), prod.resolve(value)) == ("small", "big")
    assert (dev.condition("IsDev"), dev.condition("Both"), dev.condition("Either")) == (True, True, True)
    assert (prod.condition("IsDev"), prod.condition("Both"), prod.condition("Either")) == (False, False, True)


def test_what_the_local_stack_cannot_resolve_is_a_clear_template_error() -> None:
    resolver = resolver_of(SMALL)
    with pytest.raises(TemplateError, match="Table.StreamArn"):
        resolver.resolve({"Fn::GetAtt": ["Table", "StreamArn"]})
    with pytest.raises(TemplateError, match="Fn::ImportValue"):
        resolver.resolve({"Fn::ImportValue": "Exported"})
    with pytest.raises(TemplateError, match="no resource 'Missing'"):
        resolver.resolve({"Ref": "Missing"})
    with pytest.raises(TemplateError, match="no condition"):
        resolver.resolve({"Fn::If": ["Nope", 1, 2]})


def test_a_parameter_without_default_needs_a_value() -> None:
    resolver = resolver_of("Parameters: {Required: {Type: String}}\nResources: {}\n")
    with pytest.raises(TemplateError, match="Required has no default"):
        resolver.resolve({"Ref": "Required"})


def test_a_functions_properties_take_globals_as_sam_merges_them() -> None:
    template = template_of(
        """
        Globals:
          Function:
            MemorySize: 512
            Layers: [!Ref Shared]
            Environment: {Variables: {A: global, B: global}}
        Resources:
          Fn:
            Type: AWS::Serverless::Function
            Properties:
              MemorySize: 1024
              Layers: [!Ref Own]
              Environment: {Variables: {B: own}}
        """
    )
    assert template.function_properties("Fn") == {
        "MemorySize": 1024,  # a value is replaced
        "Layers": [{"Ref": "Shared"}, {"Ref": "Own"}],  # lists add up
        "Environment": {"Variables": {"A": "global", "B": "own"}},  # maps merge, the function's keys win
    }
