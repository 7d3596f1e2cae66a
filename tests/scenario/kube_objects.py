"""Strict checks of Kubernetes objects against the official client's models.

check_object(obj) checks a JSON-like dict of kind Pod, Service or
ServiceAccount (v1) or Role or RoleBinding (rbac.authorization.k8s.io/v1)
the way an API server decodes it with fieldValidation=Strict:

- every key must be a field of its model (the JSON names of the model's
  `attribute_map`), at every depth: an unknown field is refused;
- every value must have its field's type (`openapi_types`): str, int (not a
  bool), bool, an RFC 3339 timestamp, a list or a map of those, or a nested
  model. The client types int-or-string fields (ports, targetPort) as
  'object' and resource quantities as str; both take a string or a number
  here, as they do on the server;
- the models' own validation then runs (python3-kubernetes refuses a missing
  required field, such as a container's name), and the object is
  deserialized with ApiClient.deserialize, which also parses timestamps.

A refusal is a DecodeError (what the API server answers 400 BadRequest to:
an unknown field, a wrong type) or an InvalidError (what it answers 422
Invalid to: a missing required field), both ValueErrors whose message starts
with the path of the offending value, e.g.
"spec.containers[0]: unknown field 'bogus' in V1Container".

This is the schema only: the API server's semantic validation (names,
ranges, allowed values) is not checked here.

load_manifests(path) reads a multi-document YAML file; check_manifest_file
checks every document in it.
"""
import json
import re
import types

import kubernetes.client
import yaml
from kubernetes.client import models

# (apiVersion, kind) -> the python3-kubernetes model of that kind.
MODELS = {
    ("v1", "Pod"): "V1Pod",
    ("v1", "Service"): "V1Service",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
}

# Fields whose type in the client is looser or narrower than the API's:
# int-or-string fields are 'object' in the client, quantities 'str'.
FIELD_TYPE_OVERRIDES = {
    ("V1ServicePort", "target_port"): "int-or-string",
    ("V1HTTPGetAction", "port"): "int-or-string",
    ("V1TCPSocketAction", "port"): "int-or-string",
    ("V1ResourceRequirements", "limits"): "dict(str, quantity)",
    ("V1ResourceRequirements", "requests"): "dict(str, quantity)",
    ("V1PodSpec", "overhead"): "dict(str, quantity)",
    ("V1EmptyDirVolumeSource", "size_limit"): "quantity",
}

_LIST_TYPE = re.compile(r"list\[(.*)\]$")
_DICT_TYPE = re.compile(r"dict\(str, (.*)\)$")
_REQUIRED_MESSAGE = re.compile(r"Invalid value for `(\w+)`, must not be `None`")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class DecodeError(ValueError):
    """Not of its kind's schema: an unknown field, a value of the wrong type."""


class InvalidError(ValueError):
    """Of its kind's schema, but a required field is missing."""


def model_name(obj):
    """The model class name for a dict's apiVersion and kind; DecodeError if none."""
    if not isinstance(obj, dict):
        raise DecodeError(f"(top level): expected an object, got {_json_type(obj)}")
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in MODELS:
        known = ", ".join(f"{kind} ({version})" for version, kind in MODELS)
        raise DecodeError(f"(top level): unsupported apiVersion/kind {key[0]!r}/{key[1]!r}; "
                          f"known: {known}")
    return MODELS[key]


def check_object(obj):
    """Checks `obj` (see the module's docstring) and returns it deserialized
    as its model (a V1Pod, V1Service, ...). Raises DecodeError or InvalidError."""
    name = model_name(obj)
    check_value(obj, name, "")
    return _deserialize(obj, name)


def check_value(value, type_name, path):
    """Checks `value` against a client type name ('V1Container',
    'list[V1EnvVar]', 'dict(str, str)', 'int', ...) at `path`."""
    if value is None:  # JSON null: the field is unset
        return
    list_item = _LIST_TYPE.match(type_name)
    dict_value = _DICT_TYPE.match(type_name)
    if list_item:
        _expect(isinstance(value, list), value, "a list", path)
        for i, item in enumerate(value):
            check_value(item, list_item.group(1), f"{path}[{i}]")
    elif dict_value:
        _expect(isinstance(value, dict), value, "an object", path)
        for key, item in value.items():
            check_value(item, dict_value.group(1), f"{path}[{key}]")
    elif type_name in _PRIMITIVES:
        expected, accepts = _PRIMITIVES[type_name]
        _expect(accepts(value), value, expected, path)
    else:
        _check_model(value, getattr(models, type_name), path)


def load_manifests(path):
    """The documents of a (multi-document) YAML file, empty ones left out."""
    with open(path, encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def check_manifest_file(path):
    """Checks every document of a YAML file; a refusal names the document."""
    for i, doc in enumerate(load_manifests(path)):
        try:
            check_object(doc)
        except ValueError as e:
            raise type(e)(f"{path}, document {i + 1}: {e}") from e


def _check_model(value, klass, path):
    _expect(isinstance(value, dict), value, f"an object ({klass.__name__})", path)
    by_json_name = {json_name: attr for attr, json_name in klass.attribute_map.items()}
    for key, item in value.items():
        attr = by_json_name.get(key)
        if attr is None:
            raise DecodeError(f"{path or '(top level)'}: unknown field '{key}' in {klass.__name__}")
        field_type = FIELD_TYPE_OVERRIDES.get((klass.__name__, attr), klass.openapi_types[attr])
        check_value(item, field_type, _join(path, key))
    _check_required(value, klass, by_json_name, path)


def _check_required(value, klass, by_json_name, path):
    """Runs the model's own validation: its setters refuse a required field
    left None."""
    kwargs = {by_json_name[key]: item for key, item in value.items()}
    strict = kubernetes.client.Configuration()
    strict.client_side_validation = True
    try:
        klass(local_vars_configuration=strict, **kwargs)
    except ValueError as e:
        missing = _REQUIRED_MESSAGE.search(str(e))
        if not missing:
            raise InvalidError(f"{path or '(top level)'}: {e}") from e
        field = klass.attribute_map.get(missing.group(1), missing.group(1))
        raise InvalidError(f"{_join(path, field)}: missing required field '{field}' "
                           f"in {klass.__name__}") from e


def _deserialize(obj, name):
    client = kubernetes.client.ApiClient(kubernetes.client.Configuration())
    response = types.SimpleNamespace(data=json.dumps(obj))
    try:
        return client.deserialize(response, name)
    except ValueError as e:
        raise InvalidError(f"(top level): {e}") from e
    except kubernetes.client.ApiException as e:  # an unparseable timestamp
        raise DecodeError(f"(top level): {e.reason}") from e


def _expect(ok, value, expected, path):
    if not ok:
        raise DecodeError(f"{path or '(top level)'}: expected {expected}, "
                          f"got {_json_type(value)} {json.dumps(value)[:60]}")


def _json_type(value):
    for python_type, name in ((bool, "a boolean"), (int, "an integer"), (float, "a number"),
                              (str, "a string"), (list, "a list"), (dict, "an object")):
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def _join(path, key):
    return f"{path}.{key}" if path else key


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return _is_int(value) or isinstance(value, float)


# Primitive client type -> (what the message says is expected, the check).
_PRIMITIVES = {
    "str": ("a string", lambda v: isinstance(v, str)),
    "int": ("an integer", _is_int),
    "bool": ("a boolean", lambda v: isinstance(v, bool)),
    "datetime": ("an RFC 3339 timestamp",
                 lambda v: isinstance(v, str) and _TIMESTAMP.match(v) is not None),
    "object": ("any value", lambda v: True),
    "int-or-string": ("an integer or a string",
                      lambda v: _is_int(v) or isinstance(v, str)),
    "quantity": ("a quantity (a string or a number)",
                 lambda v: _is_number(v) or isinstance(v, str)),
}
