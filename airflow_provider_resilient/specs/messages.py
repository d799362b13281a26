"""Google API messages as the dicts the provider's specs read: a proto-plus or protobuf message (a
``WorkerPoolSpec``, a ``StudySpec``) given where a dict is expected becomes the dict form, its 64-bit integers as
``int`` (protobuf's JSON mapping writes them as strings). Imports protobuf only when a message is converted.
"""

from __future__ import annotations

from typing import Any


def message_as_dict(value: Any) -> Any:
    """A WorkerPoolSpec (proto-plus or protobuf message) as a dict in the shape of the dict form; anything
    else unchanged.

    Only the fields that are set are kept, with proto field names, enum names, durations as ``"3600s"`` and
    64-bit integers (``replica_count``, ``boot_disk_size_gb`` where int64 ...) as ``int`` -- protobuf's JSON
    mapping writes those as strings, which the validation would read as ``"1" != 1``.
    """
    message = type(value).pb(value) if hasattr(value, "_pb") and hasattr(type(value), "pb") else value
    if not hasattr(message, "DESCRIPTOR") or not hasattr(message, "ListFields"):
        return value
    from google.protobuf import json_format

    data = json_format.MessageToDict(message, preserving_proto_field_name=True, use_integers_for_enums=False)
    return cast_int64(data, message.DESCRIPTOR)


def cast_int64(data: dict[str, Any], descriptor: Any) -> dict[str, Any]:
    """``data`` (the JSON form of a message of type ``descriptor``) with its 64-bit integers as ints."""
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            inner = field.message_type.fields_by_name["value"]
            data[field.name] = {k: cast_value(v, inner) for k, v in value.items()}
        elif repeated:
            data[field.name] = [cast_value(v, field) for v in value]
        else:
            data[field.name] = cast_value(value, field)
    return data


def cast_value(value: Any, field: Any) -> Any:
    if field.message_type is not None:  # well-known types (Duration ...) are strings in JSON: left as they are
        return cast_int64(value, field.message_type) if isinstance(value, dict) else value
    from google.protobuf.descriptor import FieldDescriptor as F

    int64 = (F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64, F.TYPE_SFIXED64)
    return int(value) if field.type in int64 and isinstance(value, str) else value


__all__ = ["cast_int64", "cast_value", "message_as_dict"]
