"""Study configs: a dict, or a JSON file as `hypertune study create --config`
takes, both the protobuf JSON mapping of the ``Study`` message.

Protobuf's own JSON parser does the conversion. A walk over the message's
descriptor comes first so that a mistake is reported against the field it
is in ("spec.parameters[0].double_spec.min: expected a number, got 'a'")
rather than in the parser's own words.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any, Union

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from hypertune._proto import pb
from hypertune.errors import InvalidArgumentError

#: A study config: the ``Study`` message, its JSON mapping as a dict, or the
#: path of a JSON file holding it.
StudyConfig = Union["pb.Study", Mapping[str, Any], str, "os.PathLike[str]"]

_INTEGER_TYPES = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}
_FLOAT_TYPES = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT}


def load_study(config: StudyConfig, name: str | None = None) -> pb.Study:
    """The ``Study`` message ``config`` describes, renamed to ``name`` if
    given. Raises InvalidArgumentError naming the field at fault, or OSError
    for a file that cannot be read."""
    if isinstance(config, pb.Study):
        study = pb.Study()
        study.CopyFrom(config)
    elif isinstance(config, Mapping):
        study = _parse(config, "study config")
    elif isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        with open(path, encoding="utf-8") as file:
            text = file.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise InvalidArgumentError(
                f"{path}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
            ) from None
        study = _parse(data, path)
    else:
        raise InvalidArgumentError(
            "config: expected a dict, the path of a JSON file or a hypertune.v1.Study, "
            f"got {type(config).__name__}"
        )
    if name is not None:
        if not isinstance(name, str):
            raise InvalidArgumentError(f"name: expected a string, got {_describe(name)}")
        study.name = name
    return study


def _parse(data: Any, source: str) -> pb.Study:
    _check_message(pb.Study.DESCRIPTOR, data, "", source)
    try:
        return json_format.ParseDict(data, pb.Study(), ignore_unknown_fields=False)
    except json_format.ParseError as err:  # what the walk above does not judge
        raise InvalidArgumentError(f"{source}: {err}") from None


def _fail(source: str, path: str, problem: str) -> InvalidArgumentError:
    where = f"{source}: {path}" if path else source
    return InvalidArgumentError(f"{where}: {problem}")


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_message(descriptor: Descriptor, data: Any, path: str, source: str) -> None:
    if not isinstance(data, Mapping):
        raise _fail(source, path, f"expected an object ({descriptor.name}), got {_describe(data)}")
    fields = {}
    for field in descriptor.fields:
        fields[field.name] = field
        fields[field.json_name] = field
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            raise _fail(source, _join(path, str(key)), _unknown_field(descriptor, key))
        _check_field(field, value, _join(path, key), source)


def _unknown_field(descriptor: Descriptor, key: Any) -> str:
    if descriptor is pb.ParameterSpec.DESCRIPTOR:
        kinds = [f.name for f in descriptor.oneofs_by_name["kind"].fields]
        return f'unknown parameter type "{key}"; a parameter has one of: ' + ", ".join(kinds)
    names = ", ".join(f.name for f in descriptor.fields)
    return f'unknown field "{key}" ({descriptor.name} has: {names})'


def _check_field(field: FieldDescriptor, value: Any, path: str, source: str) -> None:
    if value is None:
        return  # JSON null: the field's default, as protobuf reads it
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        if not isinstance(value, Mapping):
            raise _fail(source, path, f"expected an object, got {_describe(value)}")
        for key, item in value.items():
            _check_single(message.fields_by_name["value"], item, f"{path}[{key!r}]", source)
        return
    if field.label == FieldDescriptor.LABEL_REPEATED:
        if not isinstance(value, (list, tuple)):
            raise _fail(source, path, f"expected a list, got {_describe(value)}")
        for index, item in enumerate(value):
            _check_single(field, item, _element(path, index, item), source)
        return
    _check_single(field, value, path, source)


def _element(path: str, index: int, item: Any) -> str:
    # Parameters and metrics are easier to find by name than by position.
    if isinstance(item, Mapping) and isinstance(item.get("name"), str):
        return f'{path}[{index}] ("{item["name"]}")'
    return f"{path}[{index}]"


def _check_single(field: FieldDescriptor, value: Any, path: str, source: str) -> None:
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        _check_message(field.message_type, value, path, source)
    elif kind == FieldDescriptor.TYPE_ENUM:
        _check_enum(field, value, path, source)
    elif kind == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise _fail(source, path, f"expected a string, got {_describe(value)}")
    elif kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise _fail(source, path, f"expected true or false, got {_describe(value)}")
    elif kind in _INTEGER_TYPES or kind in _FLOAT_TYPES:
        _check_number(value, kind in _INTEGER_TYPES, path, source)


def _check_enum(field: FieldDescriptor, value: Any, path: str, source: str) -> None:
    enum = field.enum_type
    if isinstance(value, str) and value in enum.values_by_name:
        return
    if isinstance(value, int) and not isinstance(value, bool) and value in enum.values_by_number:
        return
    names = ", ".join(v.name for v in enum.values if not v.name.endswith("_UNSPECIFIED"))
    raise _fail(source, path, f"unknown {enum.name} {_describe(value)}; expected one of: {names}")


def _check_number(value: Any, integer: bool, path: str, source: str) -> None:
    wanted = "an integer" if integer else "a number"
    number = value
    if isinstance(value, str):  # the JSON mapping allows numbers as strings
        try:
            number = float(value)
        except ValueError:
            raise _fail(source, path, f"expected {wanted}, got {_describe(value)}") from None
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(source, path, f"expected {wanted}, got {_describe(value)}")
    if integer and not (math.isfinite(number) and float(number).is_integer()):
        raise _fail(source, path, f"expected {wanted}, got {_describe(value)}")


# Fields the server fills in when a new study leaves them out (what
# service/rpc/study_service.cc's CreateStudy sets before storing the spec):
# the algorithm (StudyServiceOptions.default_algorithm, GP_BANDIT).
_SERVER_FILLED = ("algorithm",)


def spec_differences(stored: pb.StudySpec, wanted: pb.StudySpec) -> list[str]:
    """The names of the top-level spec fields where ``stored`` and
    ``wanted`` differ; a field the server fills in when it is left out
    (the algorithm, early_stopping.multi_objective for several objectives)
    is compared only where ``wanted`` sets it."""
    if (
        wanted.HasField("early_stopping")
        and not wanted.early_stopping.multi_objective
        and stored.early_stopping.multi_objective
    ):
        resolved = pb.StudySpec()
        resolved.CopyFrom(wanted)
        resolved.early_stopping.multi_objective = stored.early_stopping.multi_objective
        wanted = resolved
    names = {f.name for f, _ in stored.ListFields()} | {f.name for f, _ in wanted.ListFields()}
    names -= {name for name in _SERVER_FILLED if not _is_set(wanted, name)}
    differ = []
    for name in sorted(names):
        field = pb.StudySpec.DESCRIPTOR.fields_by_name[name]
        if field.label == FieldDescriptor.LABEL_REPEATED:
            same = list(getattr(stored, name)) == list(getattr(wanted, name))
        elif field.has_presence:
            same = stored.HasField(name) == wanted.HasField(name) and getattr(
                stored, name
            ) == getattr(wanted, name)
        else:
            same = getattr(stored, name) == getattr(wanted, name)
        if not same:
            differ.append(name)
    return differ


def _is_set(spec: pb.StudySpec, name: str) -> bool:
    field = pb.StudySpec.DESCRIPTOR.fields_by_name[name]
    if field.has_presence:
        return spec.HasField(name)
    return getattr(spec, name) != field.default_value
