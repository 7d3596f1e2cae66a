"""A fake Kubernetes API server whose pods are local processes.

Scenario tests run the Kubernetes cluster backend against it, through the
backend's real code path (REST over HTTP or HTTPS, watches, kubeconfig),
because no real kube-apiserver can run on the test machine.

What it serves, as the real API does:
- /version, /api, /api/v1, /apis (discovery, enough for kubectl);
- pods and services in any namespace: create (POST), get, list and watch
  (GET, in one namespace or all; labelSelector with =, ==, !=, `k` and `!k`;
  fieldSelector on metadata.name and metadata.namespace, and for pods
  spec.nodeName, spec.restartPolicy, status.phase and status.podIP), delete
  (DELETE, with DeleteOptions in the body or else the query:
  gracePeriodSeconds, propagationPolicy, preconditions);
- errors as v1 Status objects with the real reasons and messages:
  400 BadRequest (malformed JSON, an unknown field or a wrong type: decoding
  is strict), 401 Unauthorized, 404 NotFound, 405 MethodNotAllowed,
  409 AlreadyExists and Conflict (preconditions), 422 Invalid;
- one resource version counter for all objects, bumped by every change; a
  bounded event history that watches resume from; a watch from a version
  older than the history (see compact()) gets 200 and one ERROR event with
  a 410 Expired Status;
- authentication by bearer token and/or TLS client certificate (a CA, a
  server and a client certificate made with the openssl CLI);
- the kubelet's graceful deletion: SIGTERM to the container's main process,
  SIGKILL to its process group after the grace period, the final status
  (MODIFIED), then the object goes (DELETED); with a grace period of 0 the
  process is killed at once and the object is gone when DELETE answers;
- the garbage collector: dependents (ownerReferences) are deleted after
  their owner (Background), before it (Foreground) or kept without the
  reference (Orphan), and a dependent whose owner does not exist is deleted.

Pods run as local processes, one per pod, started at once: the container's
command and args ($(VAR) expanded as Kubernetes does; command[0] looked up in
the pod's PATH), with an environment made of `base_env` (what the image would
set: PATH, HOME...), the KUBERNETES_SERVICE_* variables of this server,
HOSTNAME and the container's env (values and the fieldRefs metadata.name,
metadata.namespace, metadata.uid, status.podIP, status.hostIP,
spec.nodeName), in workingDir (default: work_dir), in a session and process
group of its own, output appended to <work_dir>/logs/<namespace>_<pod>.log.
When the main process ends, what is left of its group is killed, as a
container ends with its main process. Each pod gets a loopback IP of its own
(127.0.N.1, 127.0.N.2, ... from a block N chosen at random per server, so that
concurrent servers do not collide; never reused) that its processes can bind.
restartPolicy is honoured, with the kubelet's crash-loop back-off.

What it does not do, and refuses with 422 saying it is a limitation of the
fake: more than one container, init or ephemeral containers, volumes other
than hostPath mounted at their own path (a process cannot see a remapped
path), envFrom and valueFrom other than the fieldRefs above, a container
without command (there are no images, so no entrypoints), services other
than ClusterIP. Nor does it schedule (every pod runs at once on
"fake-node"), mount service account tokens, set service environment
variables other than the API server's, route service IPs, update objects
(PUT and PATCH answer 405) or serve other resources.

Use it from a test (FakeKubeApiServer) or run it by hand:
  /usr/bin/python3 fake_kube.py --work-dir D [--tls] [--token T]
      [--port-file F] [--kubeconfig K]
which serves until SIGTERM or SIGINT (pods get PATH, HOME and LANG from its
own environment).
"""
import argparse
import base64
import collections
import copy
import dataclasses
import http.server
import json
import math
import os
import random
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
import uuid

import yaml

import kube_objects

NODE_NAME = "fake-node"
HOST_IP = "127.0.0.1"
RESOURCES = {"pods": "Pod", "services": "Service"}
KUBERNETES_VERSION = {"major": "1", "minor": "29", "gitVersion": "v1.29.0-fake",
                      "gitCommit": "0000000000000000000000000000000000000000",
                      "gitTreeState": "clean", "buildDate": "2024-01-01T00:00:00Z",
                      "goVersion": "go1.21.5", "compiler": "gc", "platform": "linux/amd64"}
DEFAULT_GRACE_SECONDS = 30
FOREGROUND = "foregroundDeletion"
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")
RESTART_POLICIES = ("Always", "OnFailure", "Never")
FIELD_REFS = {
    "metadata.name": lambda pod: pod["metadata"]["name"],
    "metadata.namespace": lambda pod: pod["metadata"]["namespace"],
    "metadata.uid": lambda pod: pod["metadata"]["uid"],
    "spec.nodeName": lambda pod: pod["spec"]["nodeName"],
    "status.podIP": lambda pod: pod["status"]["podIP"],
    "status.hostIP": lambda pod: pod["status"]["hostIP"],
}
MAX_BACKOFF_SECONDS = 300
FORCE_DELETE_WAIT_SECONDS = 10
LIMITATION = "a limitation of the fake API server"


# --------------------------------------------------------------------------
# Errors and small helpers

class ApiError(Exception):
    """An API error, answered as a v1 Status."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self):
        return status_object(self.code, self.reason, self.message, self.details)


def status_object(code, reason, message, details=None):
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": message, "reason": reason, "code": code}
    if details:
        status["details"] = details
    return status


def not_found(resource, name):
    return ApiError(404, "NotFound", f'{resource} "{name}" not found',
                    {"name": name, "kind": resource})


def invalid(kind, name, errors):
    listed = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {listed}',
                    {"name": name, "kind": kind})


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def timestamp(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def dns1123_subdomain_errors(name):
    label = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    if len(name) <= 253 and re.fullmatch(rf"{label}(\.{label})*", name):
        return []
    return [f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
            "of lower case alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'example.com', regex used for validation is "
            r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]


def dns1035_label_errors(name, path="metadata.name"):
    if len(name) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name):
        return []
    return [f'{path}: Invalid value: "{name}": a DNS-1035 label must consist of lower case '
            "alphanumeric characters or '-', start with an alphabetic character, and end with an "
            "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
            "'[a-z]([-a-z0-9]*[a-z0-9])?')"]


def dns1123_label_errors(name, path):
    if len(name) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
        return []
    return [f'{path}: Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower '
            "case alphanumeric characters or '-', and must start and end with an alphanumeric "
            "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]


def expand(text, lookup):
    """Expands $(VAR) in `text` as Kubernetes does (its forked expansion.Expand):
    `lookup` is a dict; $$ is a literal $; unknown or unclosed references and
    a $ before anything else stay as they are."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(" and ")" in text[i + 2:]:
            end = text.index(")", i + 2)
            name = text[i + 2:end]
            out.append(lookup.get(name, f"$({name})"))
            i = end + 1
        else:
            out.append(text[i:i + 2])
            i += 2
    return "".join(out)


class Selector:
    """A label or field selector: comma-separated requirements `k=v`, `k==v`,
    `k!=v` and, for labels, `k` (exists) and `!k` (does not). Set-based
    requirements (in, notin) are not supported by the fake."""

    _REQUIREMENT = re.compile(
        r"\s*(!?)\s*([A-Za-z0-9][-A-Za-z0-9_./]*)\s*(?:(==|=|!=)\s*([^,=!\s]*))?\s*")

    def __init__(self, text, field_names=None):
        self.requirements = []
        for part in filter(str.strip, (text or "").split(",")):
            self.requirements.append(self._parse(part, field_names))

    def _parse(self, part, field_names):
        m = self._REQUIREMENT.fullmatch(part)
        if not m or (m.group(1) and m.group(3)):
            raise bad_request(f"unable to parse requirement: {part!r} (the fake supports =, ==, != "
                              "and existence; set-based selectors are " + LIMITATION + ")")
        negated, key, op, value = m.groups()
        if field_names is not None and op is None:
            raise bad_request(f"invalid selector: {part!r}; can't understand {part!r}")
        if field_names is not None and key not in field_names:
            raise bad_request(f"field label not supported: {key}")
        return (key, "exists" if op is None else op.replace("==", "="), value, bool(negated))

    def matches(self, values):
        return all(self._holds(values, *r) for r in self.requirements)

    @staticmethod
    def _holds(values, key, op, value, negated):
        if op == "exists":
            return (key in values) != negated
        return (values.get(key) == value) == (op == "=")


_META_FIELDS = {"metadata.name": lambda o: o["metadata"]["name"],
                "metadata.namespace": lambda o: o["metadata"]["namespace"]}
# What a field selector can name, per kind (a subset of the real server's).
SELECTABLE_FIELDS = {
    "Pod": {**_META_FIELDS,
            "spec.nodeName": lambda o: o["spec"].get("nodeName", ""),
            "spec.restartPolicy": lambda o: o["spec"].get("restartPolicy", ""),
            "status.phase": lambda o: o["status"].get("phase", ""),
            "status.podIP": lambda o: o["status"].get("podIP", "")},
    "Service": _META_FIELDS,
}


def object_fields(obj):
    return {name: get(obj) for name, get in SELECTABLE_FIELDS[obj["kind"]].items()}


@dataclasses.dataclass
class Filter:
    """Which objects a list or a watch is about."""
    kind: str
    namespace: str = None  # None: all namespaces
    labels: Selector = dataclasses.field(default_factory=lambda: Selector(""))
    fields: Selector = dataclasses.field(default_factory=lambda: Selector(""))

    def matches(self, obj):
        meta = obj["metadata"]
        return (obj["kind"] == self.kind
                and self.namespace in (None, meta["namespace"])
                and self.labels.matches(meta.get("labels") or {})
                and self.fields.matches(object_fields(obj)))


@dataclasses.dataclass
class DeleteOptions:
    grace_seconds: int = None  # None: the object's default
    propagation: str = "Background"
    uid: str = None  # preconditions
    resource_version: str = None

    @classmethod
    def parse(cls, query, body):
        """From a non-empty JSON body if there is one, else from the query,
        as the real server does."""
        if body:
            try:
                kube_objects.check_value(body, "V1DeleteOptions", "")
            except ValueError as e:
                raise bad_request(f"strict decoding error: {e}") from e
            pre = body.get("preconditions") or {}
            options = cls(body.get("gracePeriodSeconds"), body.get("propagationPolicy"),
                          pre.get("uid"), pre.get("resourceVersion"))
            orphan = body.get("orphanDependents")
        else:
            options = cls(query_int(query, "gracePeriodSeconds"), query.get("propagationPolicy"))
            orphan = query_bool(query, "orphanDependents")
        if options.propagation is None:
            options.propagation = "Orphan" if orphan else "Background"
        if options.propagation not in PROPAGATION_POLICIES:
            supported = ", ".join(f'"{p}"' for p in PROPAGATION_POLICIES)
            raise ApiError(422, "Invalid", 'DeleteOptions.meta.k8s.io "" is invalid: '
                           f'propagationPolicy: Unsupported value: "{options.propagation}": '
                           f"supported values: {supported}")
        if options.grace_seconds is not None and options.grace_seconds < 0:
            options.grace_seconds = None
        return options


# --------------------------------------------------------------------------
# Certificates

class Pki:
    """A CA, a server certificate for IP 127.0.0.1 and DNS localhost, and a
    client certificate (CN=elasticdl-user, O=system:masters), all signed by
    the CA, made with the openssl CLI in `directory`."""

    _NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")

    def __init__(self, directory):
        self.directory = directory
        self.ca_cert, self.ca_key = self._paths("ca")
        self.server_cert, self.server_key = self._paths("server")
        self.client_cert, self.client_key = self._paths("client")

    def _paths(self, name):
        return (os.path.join(self.directory, f"{name}.crt"),
                os.path.join(self.directory, f"{name}.key"))

    def create(self):
        os.makedirs(self.directory, exist_ok=True)
        self._openssl("req", "-x509", "-new", "-nodes", "-days", "3650",
                      "-subj", "/CN=fake-kube-ca", *self._NEW_KEY,
                      "-keyout", self.ca_key, "-out", self.ca_cert,
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self._issue("server", "/CN=kube-apiserver", "serverAuth",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost")
        self._issue("client", "/O=system:masters/CN=elasticdl-user", "clientAuth")

    def _issue(self, name, subject, usage, *extensions):
        cert, key = self._paths(name)
        csr = os.path.join(self.directory, f"{name}.csr")
        ext = os.path.join(self.directory, f"{name}.ext")
        with open(ext, "w", encoding="utf-8") as f:
            f.write("\n".join(["basicConstraints=CA:FALSE",
                               "keyUsage=critical,digitalSignature,keyEncipherment",
                               f"extendedKeyUsage={usage}", "subjectKeyIdentifier=hash",
                               "authorityKeyIdentifier=keyid,issuer", *extensions]) + "\n")
        self._openssl("req", "-new", "-nodes", "-subj", subject, *self._NEW_KEY,
                      "-keyout", key, "-out", csr)
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
                      "-CAcreateserial", "-days", "3650", "-extfile", ext, "-out", cert)

    @staticmethod
    def _openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)


# --------------------------------------------------------------------------
# Objects, resource versions and events

@dataclasses.dataclass(frozen=True)
class Event:
    rv: int
    type: str
    object: dict  # a snapshot, never changed

    def json(self):
        return {"type": self.type, "object": self.object}


class Store:
    """Objects by (kind, namespace, name), the global resource version and the
    bounded event history. Callers hold `cond` (the server's one lock),
    except around watch(), which takes it itself."""

    def __init__(self, cond, history_limit):
        self.cond = cond
        self.objects = {}
        self.rv = 0
        self.events = collections.deque()
        self.history_limit = history_limit
        self.floor = 0  # events up to this resource version are no longer kept
        self.watch_epoch = 0  # close_watches() bumps it; streams of an older one end
        self.stopped = False

    def get(self, kind, namespace, name):
        return self.objects.get((kind, namespace, name))

    def select(self, filt):
        return [obj for key, obj in sorted(self.objects.items()) if filt.matches(obj)]

    def add(self, obj):
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.objects[key] = obj
        self._record("ADDED", obj)

    def modify(self, key, change):
        obj = self.objects[key]
        change(obj)
        self._record("MODIFIED", obj)
        return obj

    def remove(self, key):
        obj = self.objects.pop(key)
        self._record("DELETED", obj)
        return obj

    def compact(self):
        self.floor = self.rv
        self.events.clear()

    def close_watches(self):
        self.watch_epoch += 1
        self.cond.notify_all()

    def _record(self, kind, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if len(self.events) >= self.history_limit:
            self.floor = self.events.popleft().rv
        self.events.append(Event(self.rv, kind, copy.deepcopy(obj)))
        self.cond.notify_all()

    def watch(self, filt, since, deadline):
        """Starts a watch of `filt`: an iterator of its events as dicts, from
        `since` (a resource version; None: ADDED for every object now, then
        what changes), until `deadline` (time.monotonic()), close_watches()
        or stop. From a version no longer kept: one ERROR event, 410 Expired."""
        with self.cond:
            epoch = self.watch_epoch
            if since is None:
                first, cursor = [{"type": "ADDED", "object": copy.deepcopy(o)}
                                 for o in self.select(filt)], self.rv
            elif since < self.floor:
                first, cursor = [expired_event(since, self.floor)], None
            else:
                first, cursor = [], since
        return self._follow(filt, first, cursor, epoch, deadline)

    def _follow(self, filt, first, cursor, epoch, deadline):
        yield from first
        while cursor is not None:
            with self.cond:
                batch, cursor = self._next_batch(filt, cursor, epoch, deadline)
            yield from batch

    def _next_batch(self, filt, cursor, epoch, deadline):
        def ended():
            return self.stopped or self.watch_epoch != epoch or time.monotonic() >= deadline

        self.cond.wait_for(lambda: self.rv > cursor or ended(),
                           None if math.isinf(deadline) else max(0, deadline - time.monotonic()))
        if ended() or cursor < self.floor:  # fell behind the history: the client resumes
            return [], None
        batch = [e.json() for e in self.events if e.rv > cursor and filt.matches(e.object)]
        return batch, self.rv


def expired_event(since, floor):
    return {"type": "ERROR", "object": status_object(
        410, "Expired", f"too old resource version: {since} ({floor})")}


# --------------------------------------------------------------------------
# Admission: validation and defaults

def check_decoding(kind, body):
    """The real server's decoding of a create's body: kind and apiVersion
    (filled in when missing), the schema (strict)."""
    if not isinstance(body, dict):
        raise bad_request(f"the object provided is unrecognized (must be of type {kind})")
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", kind)
    if (body["apiVersion"], body["kind"]) != ("v1", kind):
        raise bad_request(f"the object provided is unrecognized (must be of type {kind}): "
                          f"{body['apiVersion']}/{body['kind']}")
    try:
        kube_objects.check_object(body)
    except kube_objects.DecodeError as e:
        raise bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: '
                          f"strict decoding error: {e}") from e
    except kube_objects.InvalidError as e:
        raise invalid(kind, (body.get("metadata") or {}).get("name", ""), [str(e)]) from e


def pod_errors(pod):
    """What the real API server refuses in a pod, and what the fake cannot run."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    errors = dns1123_subdomain_errors(pod["metadata"]["name"])
    if not containers:
        return errors + ["spec.containers: Required value"]
    if len(containers) > 1:
        errors.append(f"spec.containers: Too many: {len(containers)}: must have at most 1 items "
                      f"(the fake runs one container per pod: {LIMITATION})")
    for field in ("initContainers", "ephemeralContainers"):
        if spec.get(field):
            errors.append(f"spec.{field}: Forbidden: {LIMITATION}")
    if spec.get("restartPolicy", "Always") not in RESTART_POLICIES:
        errors.append(f'spec.restartPolicy: Unsupported value: "{spec["restartPolicy"]}": '
                      'supported values: "Always", "OnFailure", "Never"')
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for i, volume in enumerate(spec.get("volumes") or []):
        if {k for k, v in volume.items() if v is not None} - {"name", "hostPath"}:
            errors.append(f"spec.volumes[{i}]: Forbidden: only hostPath volumes ({LIMITATION})")
    return errors + container_errors(containers[0], "spec.containers[0]", volumes)


def container_errors(container, path, volumes):
    errors = dns1123_label_errors(container["name"], f"{path}.name")
    if not container.get("image"):
        errors.append(f"{path}.image: Required value")
    if not container.get("command"):
        errors.append(f"{path}.command: Required value: the fake has no image entrypoints: "
                      f"set command ({LIMITATION})")
    if container.get("envFrom"):
        errors.append(f"{path}.envFrom: Forbidden: {LIMITATION}")
    for i, var in enumerate(container.get("env") or []):
        errors += env_var_errors(var, f"{path}.env[{i}]")
    for i, mount in enumerate(container.get("volumeMounts") or []):
        errors += mount_errors(mount, f"{path}.volumeMounts[{i}]", volumes)
    return errors


def env_var_errors(var, path):
    source = var.get("valueFrom")
    if not source:
        return []
    field_path = (source.get("fieldRef") or {}).get("fieldPath")
    if set(source) != {"fieldRef"} or field_path not in FIELD_REFS:
        return [f"{path}.valueFrom: Unsupported value: {json.dumps(source)}: the fake resolves "
                f"only fieldRef of {', '.join(FIELD_REFS)} ({LIMITATION})"]
    return []


def mount_errors(mount, path, volumes):
    volume = volumes.get(mount["name"])
    if volume is None:
        return [f'{path}.name: Not found: "{mount["name"]}"']
    host_path = (volume.get("hostPath") or {}).get("path")
    if mount.get("subPath") or mount.get("subPathExpr") or mount["mountPath"] != host_path:
        return [f'{path}.mountPath: Invalid value: "{mount["mountPath"]}": a local process sees '
                f'the host path "{host_path}" only at that path: mount it there, without subPath '
                f"({LIMITATION})"]
    return []


def default_pod(pod):
    """The defaults the real API server fills in that a client may read back."""
    spec = pod["spec"]
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for container in spec["containers"]:
        image = container["image"]
        latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")


def service_errors(service):
    spec = service.get("spec") or {}
    errors = dns1035_label_errors(service["metadata"]["name"])
    if spec.get("type", "ClusterIP") != "ClusterIP":
        errors.append(f'spec.type: Unsupported value: "{spec["type"]}": only ClusterIP '
                      f"({LIMITATION})")
    if not spec.get("ports") and spec.get("clusterIP") != "None":
        errors.append("spec.ports: Required value")
    for i, port in enumerate(spec.get("ports") or []):
        if not 1 <= port["port"] <= 65535:
            errors.append(f"spec.ports[{i}].port: Invalid value: {port['port']}: must be between "
                          "1 and 65535, inclusive")
    return errors


def default_service(service, cluster_ip):
    spec = service.setdefault("spec", {})
    spec.update(type="ClusterIP", clusterIP=cluster_ip, clusterIPs=[cluster_ip])
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port["port"])
    service["status"] = {"loadBalancer": {}}


class AddressPool:
    """Addresses `prefix`.x.y handed out in order from `first` (x*254 + y-1),
    each at most once at a time."""

    def __init__(self, prefix, first):
        self.prefix, self.next, self.taken = prefix, first, set()

    def allocate(self):
        while True:
            n, self.next = self.next, self.next + 1
            address = f"{self.prefix}.{n // 254}.{n % 254 + 1}"
            if address not in self.taken:
                self.taken.add(address)
                return address

    def claim(self, address):
        if address in self.taken:
            return False
        self.taken.add(address)
        return True

    def release(self, address):
        self.taken.discard(address)


# --------------------------------------------------------------------------
# The kubelet: pods as processes

@dataclasses.dataclass
class Outcome:
    """How one run of a container ended."""
    exit_code: int
    signal: int = None
    reason: str = None
    message: str = None
    started_at: str = None
    finished_at: str = None

    @classmethod
    def from_returncode(cls, returncode, started_at):
        if returncode >= 0:
            return cls(returncode, None, "Completed" if returncode == 0 else "Error",
                       started_at=started_at, finished_at=timestamp())
        return cls(128 - returncode, -returncode, "Error", started_at=started_at,
                   finished_at=timestamp())

    @classmethod
    def start_error(cls, message):
        now = timestamp()
        return cls(128, None, "StartError", message, now, now)

    def state(self, container_id):
        terminated = {"exitCode": self.exit_code, "reason": self.reason,
                      "startedAt": self.started_at, "finishedAt": self.finished_at}
        for key, value in (("signal", self.signal), ("message", self.message),
                           ("containerID", container_id)):
            if value:
                terminated[key] = value
        return {"terminated": terminated}


@dataclasses.dataclass
class Container:
    """The kubelet's record of one pod's container; guarded by the server's lock."""
    key: tuple
    popen: subprocess.Popen = None
    exited: bool = True  # no process of this run is alive
    restarts: int = 0
    last_state: dict = dataclasses.field(default_factory=dict)
    terminating: bool = False
    done: bool = False  # the kubelet is finished with the pod
    wake: threading.Event = dataclasses.field(default_factory=threading.Event)
    kill_timers: list = dataclasses.field(default_factory=list)
    thread: threading.Thread = None

    @property
    def container_id(self):
        return f"fake://{self.popen.pid}" if self.popen else None


class Kubelet:
    """Runs each pod's container as a local process in its own process group
    (one supervising thread per pod), reports its status in the pod and kills
    it on deletion: SIGTERM to the container's main process, as a container
    runtime does, SIGKILL to the whole group at the deadline; when the main
    process ends, what is left of its group is killed (the container ends
    with its main process). Calls `on_stopped(key)` when it is done with a
    pod. Thread safe: everything under the server's lock."""

    def __init__(self, store, environment, work_dir, restart_backoff_seconds, on_stopped):
        self.store, self.cond = store, store.cond
        self.environment = environment  # pod -> (env for the process, env for $(VAR))
        self.work_dir = work_dir
        self.log_dir = os.path.join(work_dir, "logs")
        self.restart_backoff_seconds = restart_backoff_seconds
        self.on_stopped = on_stopped
        self.containers = {}

    def run_pod(self, key):
        if self.store.stopped:
            return
        c = self.containers[key] = Container(key)
        c.thread = threading.Thread(target=self._supervise, args=(c,), daemon=True,
                                    name=f"pod {key[1]}/{key[2]}")
        c.thread.start()

    def active(self, key):
        c = self.containers.get(key)
        return c is not None and not c.done

    def pid(self, key):
        c = self.containers.get(key)
        return c.popen.pid if c and c.popen and not c.exited else None

    def log_path(self, namespace, name):
        return os.path.join(self.log_dir, f"{namespace}_{name}.log")

    def terminate(self, key, grace):
        """Stops the pod's container for good: SIGTERM now (SIGKILL if grace is
        0), SIGKILL after `grace` seconds."""
        c = self.containers.get(key)
        if c is None or c.done:
            return
        first = not c.terminating
        c.terminating = True
        c.wake.set()
        if grace == 0:
            self._kill(c)
            return
        if first:
            self._signal(c, signal.SIGTERM, group=False)
        timer = threading.Timer(grace, self._kill_locked, args=(c,))
        timer.daemon = True
        c.kill_timers.append(timer)
        timer.start()

    def stop(self):
        with self.cond:
            for key in list(self.containers):
                self.terminate(key, 0)
            threads = [c.thread for c in self.containers.values()]
        for thread in threads:
            thread.join(FORCE_DELETE_WAIT_SECONDS)

    def _kill_locked(self, c):
        with self.cond:
            self._kill(c)

    def _kill(self, c):
        self._signal(c, signal.SIGKILL, group=True)

    @staticmethod
    def _signal(c, sig, group):
        if c.popen is None or c.exited:  # never a reaped (reusable) pid
            return
        try:
            (os.killpg if group else os.kill)(c.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _supervise(self, c):
        outcome = None
        while True:
            run = self._run_once(c)
            if run is None:
                break
            outcome = run
            with self.cond:
                policy = self.store.get(*c.key)["spec"]["restartPolicy"]
                if c.terminating or not should_restart(policy, outcome.exit_code):
                    break
            self._back_off(c, outcome)
        self._finish(c, outcome)

    def _run_once(self, c):
        """Runs the container once; its outcome, or None if the pod was
        deleted before it started."""
        with self.cond:
            if c.terminating:
                return None
            pod = self.store.get(*c.key)
            c.popen = None
            try:
                c.popen = self._spawn(pod)
            except OSError as e:
                return Outcome.start_error(str(e))
            c.exited = False
            started_at = timestamp()
            self.store.modify(c.key, lambda p: set_running(p, c, started_at))
        return Outcome.from_returncode(self._wait(c), started_at)

    def _spawn(self, pod):
        env, lookup = self.environment(pod)
        container = pod["spec"]["containers"][0]
        argv = [expand(a, lookup) for a in container["command"] + (container.get("args") or [])]
        executable = argv[0]
        if "/" not in executable:
            executable = shutil.which(executable, path=env.get("PATH", os.defpath))
            if executable is None:
                raise FileNotFoundError(f'exec: "{argv[0]}": executable file not found in $PATH')
        os.makedirs(self.log_dir, exist_ok=True)
        meta = pod["metadata"]
        with open(self.log_path(meta["namespace"], meta["name"]), "ab") as log:
            return subprocess.Popen(argv, executable=executable, env=env,
                                    cwd=container.get("workingDir") or self.work_dir,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def _wait(self, c):
        """Waits for the main process to end, kills what is left of its group
        while the (unreaped) leader still holds the group id, then reaps it."""
        try:
            os.waitid(os.P_PID, c.popen.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        with self.cond:
            self._kill(c)
            c.exited = True
            for timer in c.kill_timers:
                timer.cancel()
        return c.popen.wait()

    def _back_off(self, c, outcome):
        with self.cond:
            c.last_state = outcome.state(c.container_id)
            c.restarts += 1
            delay = self._backoff_delay(c.restarts)
            if delay:
                self.store.modify(c.key, lambda p: set_waiting(
                    p, c, "CrashLoopBackOff", f"back-off {delay:g}s restarting failed container"))
        c.wake.wait(delay)

    def _backoff_delay(self, restart):
        """The kubelet's crash-loop back-off: the first restart at once, then
        10 s, 20 s, 40 s... (restart_backoff_seconds doubling) up to 5 min."""
        if restart == 1:
            return 0
        return min(self.restart_backoff_seconds * 2 ** (restart - 2), MAX_BACKOFF_SECONDS)

    def _finish(self, c, outcome):
        with self.cond:
            if outcome is not None:
                self.store.modify(c.key, lambda p: set_terminated(p, c, outcome))
            c.done = True
            self.cond.notify_all()
            self.on_stopped(c.key)


def should_restart(policy, exit_code):
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def set_condition(status, kind, value):
    text = "True" if value else "False"
    conditions = status.setdefault("conditions", [])
    for condition in conditions:
        if condition["type"] == kind:
            if condition["status"] != text:
                condition.update(status=text, lastTransitionTime=timestamp())
            return
    conditions.append({"type": kind, "status": text, "lastProbeTime": None,
                       "lastTransitionTime": timestamp()})


def set_container_status(pod, c, state, ready):
    container = pod["spec"]["containers"][0]
    status = {"name": container["name"], "image": container["image"], "imageID": "",
              "ready": ready, "started": "running" in state, "restartCount": c.restarts,
              "state": state, "lastState": c.last_state}
    if c.container_id:
        status["containerID"] = c.container_id
    pod["status"]["containerStatuses"] = [status]
    for kind in ("Initialized", "ContainersReady", "Ready"):
        set_condition(pod["status"], kind, kind == "Initialized" or ready)


def set_running(pod, c, started_at):
    pod["status"]["phase"] = "Running"
    pod["status"].setdefault("startTime", started_at)
    set_container_status(pod, c, {"running": {"startedAt": started_at}}, True)


def set_waiting(pod, c, reason, message):
    set_container_status(pod, c, {"waiting": {"reason": reason, "message": message}}, False)


def set_terminated(pod, c, outcome):
    pod["status"]["phase"] = "Succeeded" if outcome.exit_code == 0 else "Failed"
    set_container_status(pod, c, outcome.state(c.container_id), False)


def kubernetes_service_env(port):
    """The variables of the `kubernetes` service that every container gets."""
    tcp = f"tcp://{HOST_IP}:{port}"
    prefix = f"KUBERNETES_PORT_{port}_TCP"
    return {"KUBERNETES_SERVICE_HOST": HOST_IP, "KUBERNETES_SERVICE_PORT": str(port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(port), "KUBERNETES_PORT": tcp, prefix: tcp,
            f"{prefix}_PROTO": "tcp", f"{prefix}_PORT": str(port), f"{prefix}_ADDR": HOST_IP}


# --------------------------------------------------------------------------
# The API's semantics

class Registry:
    """Create, get, list and delete pods and services with the real API's
    semantics: names, defaults, resource versions, graceful deletion,
    propagation and garbage collection (a thread of its own). Thread safe:
    every method takes the server's lock."""

    def __init__(self, store, kubelet):
        self.store, self.cond, self.kubelet = store, store.cond, kubelet
        # Pod IPs are never reused: what a deleted pod left behind cannot clash.
        # A block of loopback addresses of its own: servers of concurrent test
        # runs must not hand two pods the same IP (and port).
        self.pod_ips = AddressPool("127.0", random.SystemRandom().randrange(10, 240) * 254)
        self.cluster_ips = AddressPool("10.96", 9)
        self.gc_wake = threading.Event()
        self.gc_thread = threading.Thread(target=self._gc_loop, daemon=True,
                                          name="garbage collector")

    # ---- create, get, list

    def create(self, kind, namespace, body):
        check_decoding(kind, body)
        meta = body["metadata"] = body.get("metadata") or {}
        if (meta.get("namespace") or namespace) != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace "
                              "sent on the request")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise invalid(kind, "", ["metadata.name: Required value: "
                                         "name or generateName is required"])
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        errors = pod_errors(body) if kind == "Pod" else service_errors(body)
        if errors:
            raise invalid(kind, meta["name"], errors)
        with self.cond:
            return copy.deepcopy(self._admit(kind, namespace, body))

    def _admit(self, kind, namespace, obj):
        meta = obj["metadata"]
        if self.store.get(kind, namespace, meta["name"]):
            resource = kind.lower() + "s"
            raise ApiError(409, "AlreadyExists", f'{resource} "{meta["name"]}" already exists',
                           {"name": meta["name"], "kind": resource})
        for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "selfLink", "managedFields"):
            meta.pop(field, None)
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=timestamp())
        if kind == "Pod":
            self._place_pod(obj)
        else:
            self._allocate_cluster_ip(obj)
        self.store.add(obj)
        if kind == "Pod":
            self.kubelet.run_pod((kind, namespace, meta["name"]))
        if meta.get("ownerReferences"):
            self.gc_wake.set()
        return obj

    def _place_pod(self, pod):
        default_pod(pod)
        pod["spec"]["nodeName"] = NODE_NAME
        ip = self.pod_ips.allocate()
        pod["status"] = {"phase": "Pending", "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
                         "podIP": ip, "podIPs": [{"ip": ip}]}
        set_condition(pod["status"], "PodScheduled", True)

    def _allocate_cluster_ip(self, service):
        wanted = (service.get("spec") or {}).get("clusterIP")
        if wanted in (None, ""):
            wanted = self.cluster_ips.allocate()
        elif wanted != "None" and not self.cluster_ips.claim(wanted):
            raise invalid("Service", service["metadata"]["name"], [
                f'spec.clusterIPs: Invalid value: ["{wanted}"]: failed to allocate IP {wanted}: '
                "provided IP is already allocated"])
        default_service(service, wanted)

    def get(self, kind, namespace, name):
        with self.cond:
            return copy.deepcopy(self._existing(kind, namespace, name))

    def list(self, filt):
        with self.cond:
            items = copy.deepcopy(self.store.select(filt))
            rv = self.store.rv
        for item in items:  # the real server's list items carry no kind
            del item["kind"], item["apiVersion"]
        return {"kind": f"{filt.kind}List", "apiVersion": "v1",
                "metadata": {"resourceVersion": str(rv)}, "items": items}

    def _existing(self, kind, namespace, name):
        obj = self.store.get(kind, namespace, name)
        if obj is None:
            raise not_found(kind.lower() + "s", name)
        return obj

    # ---- delete

    def delete(self, kind, namespace, name, options):
        """Deletes as the real API does; returns the object as the deletion
        left it. A pod goes once its container stopped; with a grace period
        of 0 that has happened when this returns."""
        key = (kind, namespace, name)
        with self.cond:
            obj = self._existing(*key)
            check_preconditions(obj, options)
            if options.propagation == "Orphan":
                self._orphan_dependents(obj)
            if kind == "Service" and options.propagation != "Foreground":
                return copy.deepcopy(self._remove(key))
            grace = pod_grace(obj, options.grace_seconds) if kind == "Pod" else 0
            marked = copy.deepcopy(self._mark_deleted(key, grace, options.propagation))
            if kind == "Pod":
                self.kubelet.terminate(key, grace)
                if grace == 0:
                    self.cond.wait_for(lambda: not self.kubelet.active(key),
                                       FORCE_DELETE_WAIT_SECONDS)
            self.finish_deletion(key)
            return marked

    def _mark_deleted(self, key, grace, propagation):
        obj = self.store.get(*key)
        meta = obj["metadata"]
        shorter = meta.get("deletionGracePeriodSeconds", math.inf) > grace
        foreground = propagation == "Foreground" and FOREGROUND not in meta.get("finalizers", [])
        if not (shorter or foreground):
            return obj

        def mark(o):
            if shorter:
                o["metadata"].update(deletionTimestamp=timestamp(time.time() + grace),
                                     deletionGracePeriodSeconds=grace)
            if foreground:
                o["metadata"].setdefault("finalizers", []).append(FOREGROUND)
                self.gc_wake.set()
        return self.store.modify(key, mark)

    def finish_deletion(self, key):
        """Removes an object being deleted once nothing holds it: a pod's
        running container, dependents of a foreground deletion."""
        with self.cond:
            obj = self.store.get(*key)
            if obj is None or "deletionTimestamp" not in obj["metadata"]:
                return
            if self.kubelet.active(key):
                return
            finalizers = obj["metadata"].get("finalizers", [])
            if FOREGROUND in finalizers:
                if self._dependents(obj):
                    return
                finalizers.remove(FOREGROUND)
            self._remove(key)

    def _remove(self, key):
        obj = self.store.remove(key)
        if key[0] == "Service":
            self.cluster_ips.release(obj["spec"]["clusterIP"])
        self.gc_wake.set()
        return obj

    # ---- garbage collection

    def _dependents(self, owner):
        uid = owner["metadata"]["uid"]
        return [key for key, obj in self.store.objects.items()
                if key[1] == owner["metadata"]["namespace"]
                and any(ref["uid"] == uid for ref in obj["metadata"].get("ownerReferences") or [])]

    def _orphan_dependents(self, owner):
        uid = owner["metadata"]["uid"]
        for key in self._dependents(owner):
            self.store.modify(key, lambda o: o["metadata"].update(ownerReferences=[
                ref for ref in o["metadata"]["ownerReferences"] if ref["uid"] != uid]))

    def _gc_loop(self):
        while True:
            self.gc_wake.wait()
            self.gc_wake.clear()
            with self.cond:
                if self.store.stopped:
                    return
                self._collect_garbage()

    def _collect_garbage(self):
        """One pass of the garbage collector: dependents of gone owners are
        deleted (in the foreground if an owner is deleted in the foreground),
        references to gone owners removed where other owners remain, and
        foreground deletions whose dependents are gone completed."""
        for key in list(self.store.objects):
            meta = (self.store.objects.get(key) or {"metadata": {}})["metadata"]
            if meta.get("ownerReferences") and "deletionTimestamp" not in meta:
                self._collect(key, self.store.objects[key])
        for key, obj in list(self.store.objects.items()):
            if FOREGROUND in obj["metadata"].get("finalizers", []):
                self.finish_deletion(key)

    def _collect(self, key, obj):
        refs = obj["metadata"]["ownerReferences"]
        states = {ref["uid"]: self._owner_state(key[1], ref) for ref in refs}
        gone = {uid for uid, state in states.items() if state != "solid"}
        if not gone:
            return
        if len(gone) < len(states):
            self.store.modify(key, lambda o: o["metadata"].update(
                ownerReferences=[ref for ref in refs if ref["uid"] not in gone]))
        else:
            waiting = "waiting" in states.values()
            self.delete(*key, DeleteOptions(propagation="Foreground" if waiting else "Background"))

    def _owner_state(self, namespace, ref):
        """'dangling' (no such owner), 'waiting' (deleted in the foreground)
        or 'solid'. Owners of kinds the fake does not serve count as solid."""
        if ref.get("apiVersion") != "v1" or ref.get("kind") not in RESOURCES.values():
            return "solid"
        owner = self.store.get(ref["kind"], namespace, ref["name"])
        if owner is None or owner["metadata"]["uid"] != ref["uid"]:
            return "dangling"
        meta = owner["metadata"]
        waiting = "deletionTimestamp" in meta and FOREGROUND in meta.get("finalizers", [])
        return "waiting" if waiting else "solid"


def pod_grace(pod, requested):
    """A finished pod goes at once; otherwise the requested grace period,
    else the pod's terminationGracePeriodSeconds."""
    if pod["status"].get("phase") in ("Succeeded", "Failed"):
        return 0
    return pod["spec"]["terminationGracePeriodSeconds"] if requested is None else requested


def check_preconditions(obj, options):
    meta = obj["metadata"]
    for field, wanted in (("UID", options.uid), ("ResourceVersion", options.resource_version)):
        actual = meta["uid" if field == "UID" else "resourceVersion"]
        if wanted is not None and wanted != actual:
            resource = obj["kind"].lower() + "s"
            raise ApiError(409, "Conflict",
                           f'Operation cannot be fulfilled on {resource} "{meta["name"]}": '
                           f"Precondition failed: {field} in precondition: {wanted}, "
                           f"{field} in object meta: {actual}",
                           {"name": meta["name"], "kind": resource})


# --------------------------------------------------------------------------
# HTTP

_NAMESPACED = r"/api/v1/namespaces/(?P<namespace>[^/]+)/(?P<resource>pods|services)"
ROUTES = [
    (re.compile(r"/version/?"), {"GET": "get_version"}),
    (re.compile(r"/api/?"), {"GET": "get_api_versions"}),
    (re.compile(r"/api/v1/?"), {"GET": "get_resource_list"}),
    (re.compile(r"/apis/?"), {"GET": "get_api_groups"}),
    (re.compile(r"/api/v1/(?P<resource>pods|services)"), {"GET": "get_collection"}),
    (re.compile(_NAMESPACED), {"GET": "get_collection", "POST": "post"}),
    (re.compile(_NAMESPACED + r"/(?P<name>[^/]+)"), {"GET": "get_object", "DELETE": "delete"}),
]


def api_resource(name, kind, short_names):
    return {"name": name, "singularName": kind.lower(), "namespaced": True, "kind": kind,
            "verbs": ["create", "delete", "get", "list", "watch"], "shortNames": short_names}


class Handler(http.server.BaseHTTPRequestHandler):
    """One connection's requests (HTTP/1.1, keep-alive); routes them to the
    server's FakeKubeApiServer (self.server.fake)."""

    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"

    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")

    def do_DELETE(self):
        self.serve("DELETE")

    def do_PUT(self):
        self.serve("PUT")

    def do_PATCH(self):
        self.serve("PATCH")

    def log_message(self, format, *args):  # requests are recorded in fake.requests instead
        pass

    def send_response(self, code, message=None):
        self.server.fake.record_request(self.command, self.path, code)
        super().send_response(code, message)

    def serve(self, method):
        url = urllib.parse.urlsplit(self.path)
        parsed = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        query = {k: v[-1] for k, v in parsed.items()}
        try:
            body = self.read_body()
            self.authenticate()
            handler, params = self.route(method, url.path)
            handler(query, body, **params)
        except ApiError as e:
            self.send_json(e.code, e.status())
        except ConnectionError:  # the client went away: nothing to answer
            raise
        except Exception as e:  # a bug of the fake: say so, as the real server does
            traceback.print_exc()
            self.send_json(500, status_object(500, "InternalError",
                                              f"Internal error occurred: {e}"))

    def route(self, method, path):
        for pattern, methods in ROUTES:
            m = pattern.fullmatch(path)
            if m and method in methods:
                return getattr(self, methods[method]), m.groupdict()
            if m:
                raise ApiError(405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource")
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def authenticate(self):
        fake = self.server.fake
        if fake.token is None and not fake.tls:
            return
        if fake.token is not None and self.headers.get("Authorization") == f"Bearer {fake.token}":
            return
        if fake.tls and self.connection.getpeercert():
            return
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def send_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # ---- endpoints

    def get_version(self, query, body):
        self.send_json(200, KUBERNETES_VERSION)

    def get_api_versions(self, query, body):
        address = {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{HOST_IP}:{self.server.fake.port}"}
        self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                             "serverAddressByClientCIDRs": [address]})

    def get_resource_list(self, query, body):
        self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                             "resources": [api_resource("pods", "Pod", ["po"]),
                                           api_resource("services", "Service", ["svc"])]})

    def get_api_groups(self, query, body):
        self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})

    def get_collection(self, query, body, resource, namespace=None):
        kind = RESOURCES[resource]
        filt = Filter(kind, namespace, Selector(query.get("labelSelector")),
                      Selector(query.get("fieldSelector"), SELECTABLE_FIELDS[kind]))
        if query_bool(query, "watch"):
            self.watch(filt, query)
        else:
            self.send_json(200, self.server.fake.registry.list(filt))

    def get_object(self, query, body, resource, namespace, name):
        self.send_json(200, self.server.fake.registry.get(RESOURCES[resource], namespace, name))

    def post(self, query, body, resource, namespace):
        obj = self.server.fake.registry.create(RESOURCES[resource], namespace, parse_json(body))
        self.send_json(201, obj)

    def delete(self, query, body, resource, namespace, name):
        parsed = parse_json(body) if body.strip() else None
        options = DeleteOptions.parse(query, parsed)
        registry = self.server.fake.registry
        self.send_json(200, registry.delete(RESOURCES[resource], namespace, name, options))

    def watch(self, filt, query):
        since = parse_resource_version(query.get("resourceVersion"))
        timeout = query_int(query, "timeoutSeconds")
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        events = self.server.fake.store.watch(filt, since, deadline)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                self.write_chunk(json.dumps(event).encode() + b"\n")
            self.write_chunk(b"")
        except OSError:  # the client went away
            self.close_connection = True
        finally:
            events.close()

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def parse_json(body):
    try:
        return json.loads(body)
    except ValueError as e:
        raise bad_request(f"couldn't get version/kind; json parse error: {e}") from e


def query_bool(query, name):
    """A boolean query parameter, spelt as Go's strconv.ParseBool reads it."""
    text = query.get(name, "false")
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False", ""):
        return False
    raise bad_request(f'{name}: Invalid value: "{text}": not a boolean')


def query_int(query, name):
    """An integer query parameter, or None."""
    text = query.get(name)
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise bad_request(f'{name}: Invalid value: "{text}": not an integer') from None


def parse_resource_version(text):
    if text in (None, "", "0"):
        return None
    if not text.isdigit():
        raise bad_request(f'invalid resource version "{text}"')
    return int(text)


class HttpServer(http.server.ThreadingHTTPServer):
    """Serves `fake` on 127.0.0.1 (an ephemeral port), over TLS when given a
    context (the handshake happens in the connection's thread)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, fake, ssl_context):
        self.fake, self.ssl_context = fake, ssl_context
        super().__init__((HOST_IP, 0), Handler)

    def finish_request(self, request, client_address):
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        try:
            request.settimeout(10)
            tls = self.ssl_context.wrap_socket(request, server_side=True)
            tls.settimeout(None)
        except (OSError, ValueError):  # a failed handshake: the client sees it
            return
        with tls:
            super().finish_request(tls, client_address)

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, ssl.SSLError)):
            super().handle_error(request, client_address)


# --------------------------------------------------------------------------
# The server

class FakeKubeApiServer:
    """The fake API server (see the module's docstring).

    work_dir: where it keeps its certificates (pki/) and the pods' logs
      (logs/); pods run there unless they set workingDir.
    tls: serve HTTPS with certificates of its own CA and accept its client
      certificate; else plain HTTP.
    token: the bearer token it accepts. With neither a token nor TLS every
      request is accepted.
    base_env: the environment every pod's process starts from (what the image
      would set: PATH, HOME, ...); nothing else of the test's leaks in.
    history_limit: how many events it keeps for watches to resume from.
    restart_backoff_seconds: the kubelet's crash-loop back-off base.

    Thread safe: one lock (a condition, notified on every change) guards
    everything.
    """

    def __init__(self, work_dir, *, tls=False, token=None, base_env=None, history_limit=1000,
                 restart_backoff_seconds=10.0):
        self.work_dir = os.path.abspath(work_dir)
        self.tls, self.token = tls, token
        self.base_env = dict(base_env or {})
        self.pki = Pki(os.path.join(self.work_dir, "pki")) if tls else None
        self.cond = threading.Condition(threading.RLock())
        self.store = Store(self.cond, history_limit)
        self.kubelet = Kubelet(self.store, self._environment, self.work_dir,
                               restart_backoff_seconds,
                               on_stopped=lambda key: self.registry.finish_deletion(key))
        self.registry = Registry(self.store, self.kubelet)
        self._requests = []
        self._http = None

    # ---- lifecycle

    def start(self):
        os.makedirs(self.work_dir, exist_ok=True)
        context = None
        if self.tls:
            self.pki.create()
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.pki.server_cert, self.pki.server_key)
            context.load_verify_locations(self.pki.ca_cert)
            context.verify_mode = ssl.CERT_OPTIONAL
        self._http = HttpServer(self, context)
        threading.Thread(target=self._http.serve_forever, daemon=True,
                         name="fake kube http").start()
        self.registry.gc_thread.start()
        return self

    def stop(self):
        """Kills every pod's processes, ends the watches and closes the server."""
        with self.cond:
            self.store.stopped = True
            self.cond.notify_all()
        if self._http:
            self._http.shutdown()
            self._http.server_close()
        self.kubelet.stop()
        self.registry.gc_wake.set()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- where and how to connect

    @property
    def port(self):
        return self._http.server_address[1]

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://{HOST_IP}:{self.port}"

    @property
    def ca_path(self):
        return self.pki.ca_cert if self.pki else None

    @property
    def client_cert_path(self):
        return self.pki.client_cert if self.pki else None

    @property
    def client_key_path(self):
        return self.pki.client_key if self.pki else None

    def write_kubeconfig(self, path, auth="token", namespace="default", inline=True):
        """Writes a kubeconfig for this server: `auth` is "token", "cert" (the
        client certificate) or "none"; certificates inline (*-data) or as
        file paths."""
        cluster, user = {"server": self.url}, {}
        if self.tls:
            cluster.update(file_entry("certificate-authority", self.ca_path, inline))
        if auth == "token":
            if self.token is None:
                raise ValueError("this server has no token")
            user["token"] = self.token
        elif auth == "cert":
            if not self.tls:
                raise ValueError("client certificates need tls=True")
            user.update(file_entry("client-certificate", self.client_cert_path, inline))
            user.update(file_entry("client-key", self.client_key_path, inline))
        elif auth != "none":
            raise ValueError(f"auth must be token, cert or none, not {auth!r}")
        config = {"apiVersion": "v1", "kind": "Config", "preferences": {},
                  "clusters": [{"name": "fake", "cluster": cluster}],
                  "users": [{"name": "fake-user", "user": user}],
                  "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake-user",
                                                            "namespace": namespace}}],
                  "current-context": "fake"}
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(config, f, sort_keys=False)

    # ---- test hooks

    def pods(self, namespace):
        with self.cond:
            return copy.deepcopy(self.store.select(Filter("Pod", namespace)))

    def get(self, kind, namespace, name):
        """The object (a copy), or None."""
        with self.cond:
            return copy.deepcopy(self.store.get(kind, namespace, name))

    def pid_of(self, namespace, pod):
        """The pid of the pod's running process, or None."""
        with self.cond:
            return self.kubelet.pid(("Pod", namespace, pod))

    def log_path(self, namespace, pod):
        return self.kubelet.log_path(namespace, pod)

    def delete(self, kind, namespace, name, grace_seconds=None, propagation="Background"):
        """As DELETE does (ApiError 404 if there is no such object)."""
        options = DeleteOptions(grace_seconds=grace_seconds, propagation=propagation)
        return self.registry.delete(kind, namespace, name, options)

    def compact(self):
        """Drops the event history: a watch from any older version gets 410."""
        with self.cond:
            self.store.compact()

    def close_watches(self):
        """Ends every open watch stream (the clients must resume)."""
        with self.cond:
            self.store.close_watches()

    @property
    def resource_version(self):
        """The current global resource version."""
        with self.cond:
            return self.store.rv

    @property
    def requests(self):
        """(method, path with query, status code) of every request so far."""
        with self.cond:
            return list(self._requests)

    def record_request(self, method, path, code):
        """Called by the HTTP handler for every response."""
        with self.cond:
            self._requests.append((method, path, code))
            self.cond.notify_all()

    def wait_for(self, predicate, timeout=10.0):
        """Waits until predicate() (called under the lock at every change: of
        an object, a process, the requests) is true; returns its last value."""
        with self.cond:
            return self.cond.wait_for(predicate, timeout)

    # ---- pods' environment

    def _environment(self, pod):
        """(the process's environment, what $(VAR) in command and args sees):
        base_env, then the kubernetes service's variables and HOSTNAME, then
        the container's env, whose values see only the service variables
        and the entries before them, as on a real node."""
        service = kubernetes_service_env(self.port)
        own = {}
        for var in pod["spec"]["containers"][0].get("env") or []:
            source = var.get("valueFrom")
            if source:
                own[var["name"]] = FIELD_REFS[source["fieldRef"]["fieldPath"]](pod)
            else:
                own[var["name"]] = expand(var.get("value") or "", {**service, **own})
        env = {**self.base_env, **service, "HOSTNAME": pod["metadata"]["name"], **own}
        return env, {**service, **own}


def file_entry(name, path, inline):
    if not inline:
        return {name: path}
    with open(path, "rb") as f:
        return {f"{name}-data": base64.b64encode(f.read()).decode()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--token")
    parser.add_argument("--port-file", help="where to write the port once serving")
    parser.add_argument("--kubeconfig", help="where to write a kubeconfig for this server")
    args = parser.parse_args()
    base_env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    fake = FakeKubeApiServer(args.work_dir, tls=args.tls, token=args.token, base_env=base_env)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    fake.start()
    if args.kubeconfig:
        auth = "token" if args.token else "cert" if args.tls else "none"
        fake.write_kubeconfig(args.kubeconfig, auth)
    if args.port_file:
        with open(args.port_file + ".tmp", "w", encoding="utf-8") as f:
            f.write(f"{fake.port}\n")
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"fake kube-apiserver at {fake.url}", flush=True)
    done.wait()
    fake.stop()


if __name__ == "__main__":
    main()
