"""The internal schema type: validation, conversion, fragments and deep comparisons."""

from __future__ import annotations

import copy
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from gambit.core._schema import (
    Schema,
    SchemaValidationError,
    deep_compatibility_problems,
    deep_match_problems,
    schema_from_json,
    schema_from_pydantic,
)


def obj(properties: dict, required: list[str] | None = None, **extra) -> dict:
    out = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    out.update(extra)
    return out


STR = {"type": "string"}
INT = {"type": "integer"}


def make(json_schema: dict) -> Schema:
    return schema_from_json(json_schema, source="/tmp/test.json")


# ---- validation: coercion ----------------------------------------------------------------


def test_strips_unknown_keys_of_closed_objects_recursively():
    schema = make(obj({"a": STR, "inner": obj({"b": INT})}, ["a"]))
    value = {"a": "x", "zzz": 1, "inner": {"b": 2, "junk": True}}
    assert schema.validate(value) == {"a": "x", "inner": {"b": 2}}


def test_open_objects_and_records_keep_unknown_keys():
    passthrough = make({"type": "object", "properties": {"a": STR}})
    assert passthrough.validate({"a": "x", "b": 1}) == {"a": "x", "b": 1}
    record = make({"type": "object", "additionalProperties": obj({"n": INT})})
    assert record.validate({"k": {"n": 1, "drop": 2}}) == {"k": {"n": 1}}
    with pytest.raises(SchemaValidationError) as info:
        record.validate({"k": {"n": "one"}})
    assert info.value.path == "k.n"


def test_applies_defaults_for_missing_properties_deep_copied():
    default_list: list = []
    schema = make(obj({"a": STR, "tags": {"type": "array", "default": default_list}}))
    first = schema.validate({"a": "x"})
    assert first == {"a": "x", "tags": []}
    first["tags"].append("mutated")
    assert schema.validate({}) == {"tags": []}
    assert schema.json["properties"]["tags"]["default"] == []
    # An explicit value wins over the default.
    assert schema.validate({"tags": ["t"]}) == {"tags": ["t"]}


def test_defaults_inside_array_items():
    schema = make({"type": "array", "items": obj({"n": {"type": "integer", "default": 0}})})
    assert schema.validate([{}, {"n": 2}]) == [{"n": 0}, {"n": 2}]


def test_validate_never_mutates_its_input():
    schema = make(obj({"a": STR, "b": {"type": "integer", "default": 1}}))
    value = {"a": "x", "extra": {"deep": [1]}}
    snapshot = copy.deepcopy(value)
    result = schema.validate(value)
    assert value == snapshot
    assert result == {"a": "x", "b": 1}
    # The result shares no containers with the input.
    open_schema = make({"type": "object"})
    out = open_schema.validate(value)
    out["extra"]["deep"].append(2)
    assert value == snapshot


def test_tuples_are_accepted_as_arrays():
    schema = make({"type": "array", "items": STR})
    assert schema.validate(("a", "b")) == ["a", "b"]


def test_prefix_items_are_coerced_per_position():
    schema = make({"type": "array", "prefixItems": [obj({"a": STR}), INT], "items": False})
    assert schema.validate([{"a": "x", "b": 1}, 3]) == [{"a": "x"}, 3]


# ---- validation: errors --------------------------------------------------------------------


def test_error_message_format_with_nested_dotted_path():
    schema = make(
        obj(
            {
                "session": obj(
                    {"messages": {"type": "array", "items": obj({"role": STR}, ["role"])}}
                )
            },
            ["session"],
        )
    )
    with pytest.raises(SchemaValidationError) as info:
        schema.validate({"session": {"messages": [{"role": "user"}, {"role": 7}]}})
    error = info.value
    assert error.path == "session.messages.1.role"
    assert error.detail == "7 is not of type 'string'"
    assert (
        str(error) == "Schema validation failed: session.messages.1.role: 7 is not of type 'string'"
    )
    assert isinstance(error, ValueError)


def test_missing_required_field_names_the_field_in_the_path():
    schema = make(obj({"messages": {"type": "array", "items": obj({"role": STR}, ["role"])}}))
    with pytest.raises(SchemaValidationError) as info:
        schema.validate({"messages": [{"content": "hi"}]})
    assert info.value.path == "messages.0.role"
    assert "'role' is a required property" in str(info.value)


def test_root_errors_use_root_marker():
    schema = make(obj({"a": STR}))
    with pytest.raises(SchemaValidationError) as info:
        schema.validate("nope")
    assert info.value.path == "(root)"
    assert str(info.value) == "Schema validation failed: (root): 'nope' is not of type 'object'"


def test_bounds_and_enums_are_validated():
    schema = make(
        obj({"score": {"type": "integer", "minimum": -3, "maximum": 3}, "k": {"enum": ["a", "b"]}})
    )
    assert schema.validate({"score": -3, "k": "a"}) == {"score": -3, "k": "a"}
    with pytest.raises(SchemaValidationError, match=r"score: 4 is greater than the maximum of 3"):
        schema.validate({"score": 4})
    with pytest.raises(SchemaValidationError, match=r"^Schema validation failed: k: "):
        schema.validate({"k": "c"})


def test_booleans_are_not_integers():
    with pytest.raises(SchemaValidationError):
        make(INT).validate(True)


def test_format_is_not_checked():
    assert make({"type": "string", "format": "email"}).validate("not an email") == "not an email"


# ---- unions ----------------------------------------------------------------------------------

UNION = {
    "anyOf": [
        obj({"a": STR}, ["a"]),
        obj({"b": INT}, ["b"]),
    ]
}


def test_union_takes_the_first_branch_that_validates_after_coercion():
    schema = make(UNION)
    # Both branches would strip to something; the first that validates wins.
    assert schema.validate({"a": "x", "b": 1}) == {"a": "x"}
    assert schema.validate({"b": 1, "c": 2}) == {"b": 1}


def test_union_failure_reports_the_closest_branch():
    schema = make(UNION)
    with pytest.raises(SchemaValidationError) as info:
        schema.validate({"b": "two"})
    assert info.value.path == "b"
    assert info.value.detail == "'two' is not of type 'integer'"
    with pytest.raises(SchemaValidationError) as info:
        schema.validate(3)
    assert info.value.path == "(root)"


def test_nested_union_inside_object():
    schema = make(obj({"v": {"anyOf": [STR, obj({"n": INT}, ["n"])]}}))
    assert schema.validate({"v": {"n": 1, "x": 2}}) == {"v": {"n": 1}}
    assert schema.validate({"v": "s"}) == {"v": "s"}
    with pytest.raises(SchemaValidationError) as info:
        schema.validate({"v": {"n": "1"}})
    assert info.value.path == "v.n"


def test_one_of_branches_coerce_too():
    schema = make(
        {
            "oneOf": [
                obj({"kind": {"const": "a"}, "x": STR}, ["kind"]),
                obj({"kind": {"const": "b"}}, ["kind"]),
            ]
        }
    )
    assert schema.validate({"kind": "b", "x": "dropped"}) == {"kind": "b"}


def test_nullable_type_list():
    schema = make(obj({"note": {"type": ["string", "null"]}}))
    assert schema.validate({"note": None}) == {"note": None}
    with pytest.raises(SchemaValidationError):
        schema.validate({"note": 1})


# ---- optional schemas ------------------------------------------------------------------------


def test_optional_schema_accepts_none_and_missing_input():
    schema = Schema(json={"type": "string", "x-gambit-optional": True}, source="gambit://x")
    assert schema.is_optional
    assert schema.validate(None) is None
    assert schema.validate("hi") == "hi"
    with pytest.raises(SchemaValidationError) as info:
        schema.validate(3)
    assert str(info.value) == "Schema validation failed: (root): 3 is not of type 'string'"


def test_non_optional_schema_rejects_none():
    schema = make(STR)
    assert not schema.is_optional
    with pytest.raises(SchemaValidationError):
        schema.validate(None)


def test_root_default_applies_to_missing_input():
    assert make({"type": "string", "default": "hello"}).validate(None) == "hello"


# ---- shape helpers ---------------------------------------------------------------------------


def test_shape_helpers():
    schema = make(obj({"b": STR, "a": INT}, ["a"]))
    assert schema.type == "object"
    assert schema.is_object and not schema.is_string
    assert schema.field_names() == ["b", "a"]
    assert schema.has_field("a") and not schema.has_field("zz")
    assert schema.required_fields() == ["a"]
    string = make(STR)
    assert string.type == "string" and string.is_string
    assert string.field_names() == [] and string.required_fields() == []
    assert make({}).type is None
    assert make(UNION).type is None
    assert make({"type": ["string", "null"]}).type is None
    assert make({"enum": ["a", "b"]}).type == "string"
    assert make({"const": 3}).type == "integer"


def test_schema_is_hashable_and_comparable():
    a = make(obj({"a": STR}))
    b = make(obj({"a": STR}))
    assert a == b and hash(a) == hash(b)
    a.validate({"a": "x"})  # fills the validator cache; equality is unaffected
    assert a == b


def test_schema_json_must_be_a_dict():
    with pytest.raises(TypeError):
        Schema(json="string", source="x")  # type: ignore[arg-type]


# ---- exports -----------------------------------------------------------------------------------


def test_to_json_schema_drops_internal_keys_only():
    schema = Schema(
        json={
            "type": "object",
            "x-gambit-optional": True,
            "properties": {"x-gambit-name": {"type": "string", "x-gambit-flag": 1}},
        },
        source="x",
    )
    assert schema.to_json_schema() == {
        "type": "object",
        "properties": {"x-gambit-name": {"type": "string"}},
    }
    assert "x-gambit-optional" in schema.json  # the original is untouched


def test_tool_parameters_for_object_schemas_are_the_schema():
    json_schema = obj({"q": STR}, ["q"])
    schema = make(json_schema)
    assert schema.to_tool_parameters() == json_schema
    assert not schema.wraps_tool_input
    assert schema.unwrap_tool_arguments({"q": "x"}) == {"q": "x"}


def test_tool_parameters_wrap_non_object_schemas():
    schema = make({"type": "string", "description": "what to say"})
    params = schema.to_tool_parameters()
    assert params == {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "what to say"}},
        "required": ["input"],
        "additionalProperties": False,
    }
    assert schema.wraps_tool_input
    assert schema.unwrap_tool_arguments({"input": "hi"}) == "hi"
    optional = Schema(json={"type": "string", "x-gambit-optional": True}, source="x")
    assert optional.to_tool_parameters()["required"] == []
    assert optional.to_tool_parameters()["properties"]["input"] == {"type": "string"}
    assert optional.unwrap_tool_arguments({}) is None
    # Unions and `any` are wrapped too: tool parameters must be objects.
    assert make(UNION).to_tool_parameters()["properties"]["input"] == UNION
    assert make({}).to_tool_parameters()["properties"]["input"] == {}


# ---- fragments ------------------------------------------------------------------------------------


def test_merge_fragment_unions_fields():
    deck = make(obj({"text": STR}, ["text"]))
    card = make(obj({"extra": INT}))
    merged = deck.merge_fragment(card)
    assert sorted(merged.field_names()) == ["extra", "text"]
    assert merged.required_fields() == ["text"]
    assert merged.source == deck.source
    assert merged.validate({"text": "t", "extra": 1, "junk": 0}) == {"extra": 1, "text": "t"}
    out = make(obj({"result": STR})).merge_fragment(make(obj({"note": STR})))
    assert sorted(out.field_names()) == ["note", "result"]


def test_merge_fragment_existing_fields_win():
    deck = make(obj({"text": STR}, ["text"]))
    card = make(obj({"text": INT, "extra": STR}, ["extra"]))
    merged = deck.merge_fragment(card)
    assert merged.json["properties"]["text"] == STR
    assert set(merged.required_fields()) == {"text", "extra"}
    # The inputs are untouched.
    assert deck.field_names() == ["text"]
    assert card.json["properties"]["text"] == INT


def test_merge_fragment_requires_object_schemas():
    with pytest.raises(ValueError, match="base schema must be an object schema to merge fragments"):
        make(STR).merge_fragment(make(obj({"a": STR})))
    with pytest.raises(
        ValueError, match="fragment schema must be an object schema to merge fragments"
    ):
        make(obj({"a": STR})).merge_fragment(make(STR))


# ---- schema_from_json -------------------------------------------------------------------------


def test_schema_from_json_inlines_refs():
    schema = make(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "user": {"$ref": "#/$defs/User", "description": "who"},
                "users": {"type": "array", "items": {"$ref": "#/$defs/User"}},
            },
            "$defs": {"User": obj({"name": STR}, ["name"])},
        }
    )
    assert "$defs" not in schema.json and "$schema" not in schema.json
    assert schema.json["properties"]["user"] == {
        **obj({"name": STR}, ["name"]),
        "description": "who",
    }
    assert schema.json["properties"]["users"]["items"] == obj({"name": STR}, ["name"])
    assert "$ref" not in str(schema.json)


def test_schema_from_json_accepts_draft07_definitions_and_tuple_items():
    schema = make(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"N": INT},
            "type": "array",
            "items": [{"$ref": "#/definitions/N"}, STR],
            "additionalItems": False,
        }
    )
    assert schema.json == {"type": "array", "prefixItems": [INT, STR], "items": False}
    assert schema.validate([1, "a"]) == [1, "a"]
    with pytest.raises(SchemaValidationError):
        schema.validate([1, "a", 3])


def test_schema_from_json_keeps_objects_as_declared():
    schema = make({"type": "object", "properties": {"a": STR}})
    assert "additionalProperties" not in schema.json


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"type": "strin"}, "type"),
        ({"properties": {"a": {"type": 5}}}, "properties/a/type"),
        ({"required": "a"}, "required"),
    ],
)
def test_schema_from_json_rejects_invalid_schemas(bad, fragment):
    with pytest.raises(ValueError) as info:
        make(bad)
    assert fragment in str(info.value)


def test_schema_from_json_rejects_recursive_and_remote_refs():
    recursive = {
        "$defs": {"Node": obj({"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}})},
        "$ref": "#/$defs/Node",
    }
    with pytest.raises(ValueError, match="recursive"):
        make(recursive)
    with pytest.raises(ValueError, match="not supported"):
        make({"$ref": "https://example.com/schema.json"})
    with pytest.raises(ValueError, match="points at nothing"):
        make({"$ref": "#/$defs/Missing"})
    with pytest.raises(ValueError):
        schema_from_json(["not", "a", "dict"], source="x")  # type: ignore[arg-type]


# ---- schema_from_pydantic ----------------------------------------------------------------------


class Address(BaseModel):
    city: str
    zip_code: str | None = None


class Person(BaseModel):
    name: str
    age: int = 0
    address: Address
    previous: list[Address] = Field(default_factory=list)
    kind: Literal["a", "b"] = "a"


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


def test_schema_from_pydantic_inlines_nested_models_and_closes_objects():
    schema = schema_from_pydantic(Person, source="/tmp/models.py")
    assert "$ref" not in str(schema.json) and "$defs" not in schema.json
    assert schema.json["additionalProperties"] is False
    address = schema.json["properties"]["address"]
    assert address["properties"]["city"]["type"] == "string"
    assert address["additionalProperties"] is False
    assert schema.json["properties"]["previous"]["items"]["additionalProperties"] is False
    assert schema.required_fields() == ["name", "address"]
    value = {"name": "Ada", "address": {"city": "London", "planet": "Earth"}, "x": 1}
    assert schema.validate(value) == {
        "name": "Ada",
        "age": 0,
        "address": {"city": "London", "zip_code": None},
        "kind": "a",
    }
    with pytest.raises(SchemaValidationError) as info:
        schema.validate({"name": "Ada", "address": {"city": 3}})
    assert info.value.path == "address.city"


def test_schema_from_pydantic_respects_extra_allow():
    schema = schema_from_pydantic(Loose, source="x")
    assert schema.validate({"name": "n", "more": 1}) == {"name": "n", "more": 1}


def test_schema_from_pydantic_accepts_plain_types():
    schema = schema_from_pydantic(list[int], source="x")
    assert schema.type == "array"
    assert schema.validate([1, 2]) == [1, 2]


def test_schema_from_pydantic_recursive_model_is_a_clear_error():
    class Node(BaseModel):
        children: list[Node] = []

    Node.model_rebuild()
    with pytest.raises(ValueError, match="recursive"):
        schema_from_pydantic(Node, source="x")


def test_schema_from_pydantic_rejects_what_pydantic_cannot_describe():
    with pytest.raises(ValueError, match="cannot build a JSON Schema"):
        schema_from_pydantic(object(), source="x")


# ---- deep compatibility (the graders' rule) ------------------------------------------------------

MSG = obj({"role": STR, "content": {}, "name": STR}, ["role"])
BASE = obj(
    {
        "session": obj(
            {
                "messages": {"type": "array", "items": copy.deepcopy(MSG)},
                "meta": {"type": "object", "additionalProperties": {}},
            }
        ),
        "messageToGrade": copy.deepcopy(MSG),
    },
    ["session", "messageToGrade"],
)


def variant() -> dict:
    return copy.deepcopy(BASE)


def test_identical_schemas_are_compatible():
    assert deep_compatibility_problems(BASE, BASE) == []
    assert deep_compatibility_problems(make(BASE), make(BASE)) == []


def test_annotations_and_bounds_are_ignored():
    candidate = variant()
    candidate["description"] = "mine"
    candidate["properties"]["messageToGrade"]["properties"]["role"] = {
        "type": "string",
        "minLength": 1,
        "title": "Role",
    }
    assert deep_compatibility_problems(candidate, BASE) == []


def test_optional_extension_is_compatible():
    candidate = variant()
    candidate["properties"]["extra"] = STR
    candidate["properties"]["messageToGrade"]["properties"]["messageRefId"] = STR
    assert deep_compatibility_problems(candidate, BASE) == []


def test_required_extension_is_flagged():
    candidate = variant()
    candidate["properties"]["extra"] = STR
    candidate["required"].append("extra")
    assert deep_compatibility_problems(candidate, BASE) == [
        '"extra": added fields must be optional'
    ]


def test_changed_type_is_flagged():
    candidate = variant()
    candidate["properties"]["session"]["properties"]["messages"]["items"]["properties"]["role"] = {
        "type": "number"
    }
    assert deep_compatibility_problems(candidate, BASE) == [
        '"session.messages.0.role": type is "number", expected "string"'
    ]


def test_missing_base_field_is_flagged():
    candidate = variant()
    del candidate["properties"]["messageToGrade"]
    candidate["required"].remove("messageToGrade")
    problems = deep_compatibility_problems(candidate, BASE, base_label="the built-in schema")
    assert problems == ['"messageToGrade": missing; the built-in schema defines it']


def test_required_to_optional_is_flagged_and_vice_versa():
    candidate = variant()
    candidate["required"].remove("messageToGrade")
    assert deep_compatibility_problems(candidate, BASE, base_label="the built-in schema") == [
        '"messageToGrade": required in the built-in schema but optional here'
    ]
    candidate = variant()
    candidate["properties"]["messageToGrade"]["required"] = ["role", "name"]
    assert deep_compatibility_problems(candidate, BASE) == [
        '"messageToGrade.name": optional in the base schema but required here'
    ]


def test_nested_array_item_change_is_flagged():
    candidate = variant()
    candidate["properties"]["session"]["properties"]["messages"]["items"] = STR
    assert deep_compatibility_problems(candidate, BASE) == [
        '"session.messages.0": type is "string", expected "object"'
    ]


def test_any_in_base_accepts_only_any():
    candidate = variant()
    candidate["properties"]["messageToGrade"]["properties"]["content"] = STR
    assert deep_compatibility_problems(candidate, BASE) == [
        '"messageToGrade.content": type is "string", expected any value'
    ]
    assert deep_compatibility_problems({}, STR) == [
        '"(root)": type is any value, expected "string"'
    ]


def test_record_values_are_compared():
    candidate = variant()
    candidate["properties"]["session"]["properties"]["meta"] = {
        "type": "object",
        "additionalProperties": STR,
    }
    assert deep_compatibility_problems(candidate, BASE) == [
        '"session.meta.*": type is "string", expected any value'
    ]
    # An open object with no properties is the same as a record of any.
    candidate["properties"]["session"]["properties"]["meta"] = {"type": "object"}
    assert deep_compatibility_problems(candidate, BASE) == []


def test_enum_values_must_be_equal():
    base = obj({"kind": {"type": "string", "enum": ["a", "b"]}})
    same = obj({"kind": {"type": "string", "enum": ["b", "a"]}})
    narrower = obj({"kind": {"type": "string", "enum": ["a"]}})
    assert deep_compatibility_problems(same, base) == []
    assert deep_compatibility_problems(narrower, base) == [
        '"kind": allowed values are ["a"], expected ["a", "b"]'
    ]
    assert deep_compatibility_problems(obj({"kind": STR}), base) == [
        '"kind": allowed values are any string, expected ["a", "b"]'
    ]


def test_unions_are_compared_branch_wise():
    base = obj({"v": {"anyOf": [STR, INT]}})
    assert deep_compatibility_problems(obj({"v": {"anyOf": [STR, INT]}}), base) == []
    assert deep_compatibility_problems(obj({"v": {"anyOf": [INT, STR]}}), base) == []
    assert deep_compatibility_problems(obj({"v": {"type": ["string", "integer"]}}), base) == []
    assert deep_compatibility_problems(obj({"v": {"anyOf": [STR, {"type": "boolean"}]}}), base) == [
        '"v[option 2]": type is "boolean", expected "integer"'
    ]
    assert deep_compatibility_problems(obj({"v": {"anyOf": [STR]}}), base) == [
        '"v": type is "string", expected a union'
    ]
    three = obj({"v": {"anyOf": [STR, INT, {"type": "null"}]}})
    assert deep_compatibility_problems(three, base) == ['"v": union has 3 options, expected 2']


def test_integer_and_number_are_different_types():
    assert deep_compatibility_problems(obj({"n": {"type": "number"}}), obj({"n": INT})) == [
        '"n": type is "number", expected "integer"'
    ]


def test_root_optional_status_must_match():
    optional = {"type": "string", "x-gambit-optional": True}
    assert deep_compatibility_problems(optional, optional) == []
    assert deep_compatibility_problems(STR, optional) == [
        '"(root)": optional in the base schema but required here'
    ]


def test_compatibility_accepts_schemas_and_dicts_without_mutating():
    base = make(BASE)
    snapshot = copy.deepcopy(base.json)
    deep_compatibility_problems(variant(), base)
    assert base.json == snapshot


# ---- deep match (execute actions) ---------------------------------------------------------------


def test_deep_match_identical_objects():
    assert deep_match_problems(BASE, copy.deepcopy(BASE)) == []


def test_deep_match_ignores_annotations_enums_and_bounds():
    a = obj(
        {
            "k": {"type": "string", "enum": ["a"], "description": "x"},
            "n": {"type": "integer", "maximum": 3},
        }
    )
    b = obj({"k": STR, "n": INT})
    assert deep_match_problems(a, b) == []


def test_deep_match_flags_extra_fields_on_either_side():
    a = obj({"q": STR, "limit": INT})
    b = obj({"q": STR, "offset": INT})
    assert deep_match_problems(a, b, a_label="the inline schema", b_label="the module schema") == [
        '"offset": only in the module schema',
        '"limit": only in the inline schema',
    ]


def test_deep_match_flags_requiredness_and_nested_types():
    a = obj({"q": STR, "inner": obj({"xs": {"type": "array", "items": INT}})}, ["q"])
    b = obj({"q": STR, "inner": obj({"xs": {"type": "array", "items": STR}})})
    assert deep_match_problems(a, b) == [
        '"q": required in the inline schema but optional in the target\'s schema',
        '"inner.xs.0": type is "integer" in the inline schema but "string" in the target\'s schema',
    ]


def test_deep_match_non_objects_compare_top_level_type_only():
    assert deep_match_problems(STR, {"type": "string", "enum": ["a"]}) == []
    assert (
        deep_match_problems({"type": "array", "items": INT}, {"type": "array", "items": STR}) == []
    )
    assert deep_match_problems(STR, INT) == [
        '"(root)": type is "string" in the inline schema but "integer" in the target\'s schema'
    ]
    assert deep_match_problems(obj({"a": STR}), STR) == [
        '"(root)": type is "object" in the inline schema but "string" in the target\'s schema'
    ]


def test_deep_match_accepts_schema_objects():
    assert deep_match_problems(make(obj({"a": STR})), make(obj({"a": STR}))) == []
    assert deep_match_problems(make(obj({"a": STR})), make(obj({"a": INT}))) != []


def test_schema_from_json_ignores_unused_recursive_definitions():
    schema = make(
        {
            "type": "object",
            "properties": {"a": STR},
            "$defs": {"Loop": {"type": "array", "items": {"$ref": "#/$defs/Loop"}}},
        }
    )
    assert schema.json == {"type": "object", "properties": {"a": STR}}


def test_schema_from_json_modernises_older_drafts():
    schema = make(
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "properties": {
                "n": {"type": "number", "maximum": 3, "exclusiveMaximum": True},
                "m": {"type": "number", "minimum": 0, "exclusiveMinimum": False},
                "ref": {"allOf": [{"$ref": "#/definitions/R"}], "description": "d"},
            },
            "definitions": {"R": obj({"x": STR})},
        }
    )
    props = schema.json["properties"]
    assert props["n"] == {"type": "number", "exclusiveMaximum": 3}
    assert props["m"] == {"type": "number", "minimum": 0}
    assert props["ref"] == {**obj({"x": STR}), "description": "d"}
    assert schema.validate({"n": 2.5, "ref": {"x": "y", "drop": 1}}) == {
        "n": 2.5,
        "ref": {"x": "y"},
    }
    with pytest.raises(SchemaValidationError, match="^Schema validation failed: n: "):
        schema.validate({"n": 3})


# ---- the fast path of validate: the same outcome as the full path --------------------------

_SCALAR_TYPES = ["string", "number", "integer", "boolean", "null"]
_NAMES = st.sampled_from(["a", "b", "c", "n"])


def _schemas() -> st.SearchStrategy[dict]:
    scalar = st.sampled_from(_SCALAR_TYPES).map(lambda kind: {"type": kind})
    bounded = st.builds(
        lambda kind, bounds: {"type": kind, **bounds},
        st.sampled_from(["number", "integer"]),
        st.dictionaries(
            st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
            st.sampled_from([-3, 0, 1.5, 3]),
            max_size=2,
        ),
    )
    # Keywords outside the fast subset, so giving up is exercised too.
    other = st.sampled_from(
        [{}, {"description": "anything"}, {"type": "string", "minLength": 2}, {"enum": [1, "a"]}]
    )
    return st.recursive(
        scalar | bounded | other,
        lambda inner: st.one_of(
            st.builds(
                lambda props, required, extra: {
                    "type": "object",
                    "properties": props,
                    **({"required": required} if required else {}),
                    **({} if extra is None else {"additionalProperties": extra}),
                },
                st.dictionaries(_NAMES, inner, max_size=3),
                st.lists(_NAMES, max_size=2, unique=True),
                st.sampled_from([None, True, False]) | inner,
            ),
            st.builds(lambda items: {"type": "array", "items": items}, inner),
            st.just({"type": "array"}),
        ),
        max_leaves=6,
    )


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=16)
    | st.sampled_from([1.0, 2.5])
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(schema=_schemas(), value=_JSON | st.tuples(st.integers()))
def test_fast_validation_matches_the_full_path(schema, value):
    import json

    from gambit.core._schema import _compile_fast, _Unsure

    built = Schema(json=schema, source="test")
    try:
        expected, error = built._validate_fully(value), None
    except SchemaValidationError as exc:
        expected, error = None, str(exc)
    fast = _compile_fast(built._validation_json())
    if fast is not None:
        try:
            got = fast(value)
        except _Unsure:
            got = None
            # Giving up on a valid JSON value would only be slow, but it should not happen.
            assert error is not None or isinstance(value, tuple) or _has_tuple(value)
        else:
            assert error is None, error
            assert json.dumps(got) == json.dumps(expected)  # key order included
    # And the public entry point agrees with the full path either way.
    if error is None:
        assert json.dumps(built.validate(value)) == json.dumps(expected)
    else:
        with pytest.raises(SchemaValidationError) as info:
            built.validate(value)
        assert str(info.value) == error


def _has_tuple(value) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, dict):
        return any(_has_tuple(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_tuple(v) for v in value)
    return False


def test_fast_validation_does_not_share_the_input():
    schema = Schema(json={"type": "object", "properties": {"a": {"type": "array"}}}, source="t")
    value = {"a": [{"x": [1]}]}
    out = schema.validate(value)
    assert out == value and out is not value and out["a"][0] is not value["a"][0]
