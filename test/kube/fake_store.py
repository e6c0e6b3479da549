"""The object store of the fake Kubernetes API server (fake_apiserver.py):
the kinds it serves, the objects by resource/namespace/name, one global
resourceVersion counter, and a bounded history of change events that
watches, consistent paginated lists and 410 Gone are computed from.

Every stored object is immutable once stored (an update stores a new dict),
so readers may serialize it outside the lock and the JSON encodings are
cached per object version. All methods take the store's lock; the HTTP
threads call them directly.
"""

import base64
import binascii
import bisect
import collections
import json
import re
import threading
import time
import uuid

import fake_patch

Resource = collections.namedtuple(
    "Resource", "group version plural singular kind namespaced short_names status")

RESOURCES = [
    Resource("", "v1", "namespaces", "namespace", "Namespace", False, ["ns"], True),
    Resource("", "v1", "services", "service", "Service", True, ["svc"], True),
    Resource("", "v1", "secrets", "secret", "Secret", True, [], False),
    Resource("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice",
             True, [], False),
    Resource("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", True, ["ing"], True),
    Resource("networking.k8s.io", "v1", "ingressclasses", "ingressclass", "IngressClass",
             False, [], False),
]
BY_PLURAL = {r.plural: r for r in RESOURCES}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# Namespaces every cluster has.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public")

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def group_version(res):
    return "%s/%s" % (res.group, res.version) if res.group else res.version


def qualified(res):
    """'ingresses.networking.k8s.io', as the API names a resource in
    messages."""
    return "%s.%s" % (res.plural, res.group) if res.group else res.plural


class ApiError(Exception):
    """A failure the server answers with a Status object."""

    def __init__(self, code, reason, message, details=None, cont=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.cont = cont

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            st["details"] = self.details
        if self.cont:
            st["metadata"]["continue"] = self.cont
        return st


def not_found(res, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(res), name),
                    {"name": name, "group": res.group, "kind": res.plural})


def expired(message):
    return ApiError(410, "Expired", message)


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Stored:
    """One version of one object (without kind/apiVersion, as list items
    are sent) and its two encodings, made on first use."""

    __slots__ = ("res", "obj", "_item", "_full")

    def __init__(self, res, obj):
        self.res = res
        self.obj = obj
        self._item = None
        self._full = None

    @property
    def namespace(self):
        return self.obj["metadata"].get("namespace", "")

    @property
    def name(self):
        return self.obj["metadata"]["name"]

    @property
    def rv(self):
        return int(self.obj["metadata"]["resourceVersion"])

    def item_json(self):
        """As an item of a list: the API leaves kind and apiVersion out."""
        if self._item is None:
            self._item = json.dumps(self.obj, separators=(",", ":")).encode()
        return self._item

    def full_json(self):
        if self._full is None:
            head = '{"kind":"%s","apiVersion":"%s",' % (self.res.kind, group_version(self.res))
            self._full = head.encode() + self.item_json()[1:]
        return self._full

    def copy(self):
        """A deep copy of the object, to edit."""
        return json.loads(self.item_json())


class Event:
    """A change: type ADDED/MODIFIED/DELETED at resourceVersion rv; `obj`
    is what a watch sends, `old` the previous version (None for ADDED),
    used to rebuild an older state and to filter by selector."""

    __slots__ = ("rv", "type", "obj", "old", "_line")

    def __init__(self, rv, type_, obj, old):
        self.rv = rv
        self.type = type_
        self.obj = obj
        self.old = old
        self._line = None

    @property
    def res(self):
        return self.obj.res

    def line(self, type_=None):
        """The watch stream's line; type_ overrides the type (a selector
        turns a MODIFIED into ADDED or DELETED)."""
        t = type_ or self.type
        if t != self.type:
            return b'{"type":"%s","object":%s}\n' % (t.encode(), self.obj.full_json())
        if self._line is None:
            self._line = b'{"type":"%s","object":%s}\n' % (t.encode(), self.obj.full_json())
        return self._line


# Selectors: equality (=, ==, !=) and existence (key, !key), comma-separated.
# Set-based forms (in, notin) are refused: nothing here uses them.
def parse_label_selector(text):
    terms = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        m = re.match(r"^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$", part)
        if m:
            terms.append((m.group(1), m.group(2) != "!=", m.group(3)))
        elif re.match(r"^!\S+$", part):
            terms.append((part[1:], False, None))
        elif re.match(r"^[^\s!=()]+$", part):
            terms.append((part, True, None))
        else:
            raise ApiError(400, "BadRequest", "unable to parse requirement: %r" % part)
    return terms


def labels_match(terms, obj):
    labels = obj["metadata"].get("labels") or {}
    for key, positive, value in terms:
        present = key in labels and (value is None or labels[key] == value)
        if present != positive:
            return False
    return True


def parse_field_selector(text):
    terms = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise ApiError(400, "BadRequest", "invalid field selector: %r" % part)
        terms.append((m.group(1).split("."), m.group(2) != "!=", m.group(3)))
    return terms


def fields_match(terms, obj):
    for path, positive, value in terms:
        v = obj
        for step in path:
            v = v.get(step) if isinstance(v, dict) else None
        text = "" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
        if (text == value) != positive:
            return False
    return True


class Selector:
    """What a LIST or WATCH asks for: a resource, a namespace or all ("")
    and the label and field selectors."""

    def __init__(self, res, namespace="", labels="", fields=""):
        self.res = res
        self.namespace = namespace
        self.labels = parse_label_selector(labels)
        self.fields = parse_field_selector(fields)

    def matches(self, stored):
        if stored is None or stored.res is not self.res:
            return False
        if self.namespace and stored.namespace != self.namespace:
            return False
        return labels_match(self.labels, stored.obj) and fields_match(self.fields, stored.obj)


class Store:
    def __init__(self, history=10000):
        self.lock = threading.Condition()
        self.rv = 0
        self.objects = {r.plural: {} for r in RESOURCES}   # plural -> {(ns, name): Stored}
        self._sorted = {}                                    # plural -> sorted keys, or absent
        # Events in rv order; every event with rv > compacted_rv is kept.
        self.history = []
        self.history_rvs = []
        self.history_limit = history
        self.compacted_rv = 0
        self.ip_next = 1
        for ns in INITIAL_NAMESPACES:
            self.create(BY_PLURAL["namespaces"], "", {"metadata": {"name": ns}})
        # The initial objects are the state a new watch starts from, not
        # history a client could have seen.
        self.compact()

    # -- history ---------------------------------------------------------

    def _record(self, type_, stored, old):
        ev = Event(stored.rv, type_, stored, old)
        self.history.append(ev)
        self.history_rvs.append(ev.rv)
        # Trim in batches: a list's head deletion is linear.
        excess = len(self.history) - self.history_limit
        if excess > 0 and (excess >= 1024 or excess * 8 >= self.history_limit):
            self.compacted_rv = self.history_rvs[excess - 1]
            del self.history[:excess]
            del self.history_rvs[:excess]
        self.lock.notify_all()

    def compact(self, keep=0):
        """Drop all history but the newest `keep` events: a resourceVersion
        older than what is kept is then answered 410 Gone."""
        with self.lock:
            drop = max(0, len(self.history) - keep)
            self.compacted_rv = self.history_rvs[drop - 1] if drop else self.compacted_rv
            if not self.history:
                self.compacted_rv = self.rv
            del self.history[:drop]
            del self.history_rvs[:drop]
            return self.compacted_rv

    def set_history_limit(self, limit):
        with self.lock:
            self.history_limit = max(1, int(limit))
            self.compact(self.history_limit)

    def check_not_compacted(self, rv):
        """Raise 410 if the events after rv are no longer all kept."""
        if rv < self.compacted_rv:
            raise expired("too old resource version: %d (%d)" % (rv, self.compacted_rv))

    def events_after(self, rv, limit=1000):
        """Events with rv > the given one, oldest first (caller holds the
        lock and has checked compaction)."""
        i = bisect.bisect_right(self.history_rvs, rv)
        return self.history[i:i + limit]

    # -- reads -----------------------------------------------------------

    def _keys(self, plural):
        keys = self._sorted.get(plural)
        if keys is None:
            keys = self._sorted[plural] = sorted(self.objects[plural])
        return keys

    def get(self, res, namespace, name):
        with self.lock:
            stored = self.objects[res.plural].get((namespace, name))
            if stored is None:
                raise not_found(res, name)
            return stored

    def snapshot(self, sel, at_rv=None):
        """The objects sel selects, sorted by (namespace, name), as they
        were at at_rv (default: now), and the rv of that state. Caller
        checks at_rv against compaction first."""
        with self.lock:
            objs = self.objects[sel.res.plural]
            if at_rv is None or at_rv >= self.rv:
                items = [objs[k] for k in self._keys(sel.res.plural)]
                return [s for s in items if sel.matches(s)], self.rv
            self.check_not_compacted(at_rv)
            state = self._state_at(sel.res, at_rv)
        items = [state[k] for k in sorted(state)]
        return [s for s in items if sel.matches(s)], at_rv

    def page(self, sel, at_rv=None, start=None, limit=0):
        """One page of a LIST: up to `limit` (0: all) objects sel selects,
        with keys after `start`, in the state at at_rv (default: now).
        Returns (items, rv of the state, key to continue after or None,
        remainingItemCount or None: the API leaves it out when selecting by
        label or field)."""
        with self.lock:
            if at_rv is None or at_rv >= self.rv:
                table, keys, at = self.objects[sel.res.plural], self._keys(sel.res.plural), self.rv
            else:
                self.check_not_compacted(at_rv)
                table, at = self._state_at(sel.res, at_rv), at_rv
                keys = sorted(table)
            # The namespace's keys are one run of the sorted keys.
            lo, hi = 0, len(keys)
            if sel.namespace:
                lo = bisect.bisect_left(keys, (sel.namespace, ""))
                hi = bisect.bisect_left(keys, (sel.namespace + "\0", ""))
            i = max(lo, bisect.bisect_right(keys, start)) if start else lo
            items = []
            while i < hi and not (limit and len(items) == limit):
                stored = table[keys[i]]
                i += 1
                if sel.matches(stored):
                    items.append(stored)
            if not any(sel.matches(table[keys[j]]) for j in range(i, hi)):
                return items, at, None, None
            plain = not sel.labels and not sel.fields
            last = items[-1]
            return items, at, (last.namespace, last.name), (hi - i) if plain else None

    def _state_at(self, res, at_rv):
        """{key: Stored} of res as it was at at_rv: now, with what happened
        since undone, newest first."""
        state = dict(self.objects[res.plural])
        for ev in reversed(self.events_after(at_rv, limit=len(self.history))):
            if ev.res is not res:
                continue
            key = (ev.obj.namespace, ev.obj.name)
            if ev.old is None:
                state.pop(key, None)
            else:
                state[key] = ev.old
        return state

    # -- writes ----------------------------------------------------------

    def _next_rv(self):
        self.rv += 1
        return self.rv

    def _check_namespace(self, res, namespace):
        if res.namespaced and ("", namespace) not in self.objects["namespaces"]:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % namespace,
                           {"name": namespace, "kind": "namespaces"})

    def _validate(self, res, namespace, obj):
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise ApiError(400, "BadRequest", "the object has no metadata")
        # Stored without them: list items go out so, the rest adds them.
        kind, api = obj.pop("kind", None), obj.pop("apiVersion", None)
        if (kind and kind != res.kind) or (api and api != group_version(res)):
            raise ApiError(400, "BadRequest", "the API version in the data (%s) does not match "
                           "the expected API version (%s)" % (api, group_version(res)))
        meta = obj["metadata"]
        name = meta.get("name", "")
        if not NAME_RE.match(name):
            raise ApiError(422, "Invalid", '%s "%s" is invalid: metadata.name: Invalid value'
                           % (res.kind, name), {"name": name, "kind": res.kind})
        if res.namespaced:
            if meta.get("namespace", namespace) != namespace:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                               "match the namespace sent on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if res.kind == "Secret":
            normalize_secret(obj)

    def _default(self, res, obj, old):
        """What the real API server fills in that a client may read."""
        spec = obj.setdefault("spec", {}) if res.kind in (
            "Service", "Ingress", "IngressClass", "Namespace") else None
        if res.kind == "Namespace":
            spec.setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        elif res.kind == "Service":
            spec.setdefault("type", "ClusterIP")
            spec.setdefault("sessionAffinity", "None")
            if "clusterIP" not in spec:
                prev = old.obj.get("spec", {}).get("clusterIP") if old else None
                if prev is None:
                    prev = "10.96.%d.%d" % (self.ip_next // 250, self.ip_next % 250 + 1)
                    self.ip_next += 1
                spec["clusterIP"] = prev
                spec["clusterIPs"] = [prev]
            for port in spec.get("ports") or []:
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
            obj.setdefault("status", {"loadBalancer": {}})
        elif res.kind == "Ingress":
            obj.setdefault("status", {"loadBalancer": {}})
        elif res.kind == "EndpointSlice":
            for port in obj.get("ports") or []:
                port.setdefault("protocol", "TCP")

    def _store(self, res, namespace, obj, old):
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._next_rv())
        if old is None:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
        else:
            om = old.obj["metadata"]
            meta["uid"] = om["uid"]
            meta["creationTimestamp"] = om["creationTimestamp"]
            changed = strip_meta(obj) != strip_meta(old.obj)
            meta["generation"] = om.get("generation", 1) + (1 if changed else 0)
        stored = Stored(res, obj)
        key = (namespace, meta["name"])
        table = self.objects[res.plural]
        if key not in table:
            self._sorted.pop(res.plural, None)
        table[key] = stored
        self._record("ADDED" if old is None else "MODIFIED", stored, old)
        return stored

    def create(self, res, namespace, obj, dry_run=False):
        with self.lock:
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            self._validate(res, namespace, obj)
            self._check_namespace(res, namespace)
            name = meta["name"]
            if (namespace, name) in self.objects[res.plural]:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists'
                               % (qualified(res), name),
                               {"name": name, "group": res.group, "kind": res.plural})
            for k in ("resourceVersion", "uid", "creationTimestamp", "generation"):
                meta.pop(k, None)
            self._default(res, obj, None)
            if dry_run:
                return Stored(res, obj)
            return self._store(res, namespace, obj, None)

    def update(self, res, namespace, name, obj, status_only=False, dry_run=False):
        """PUT: the whole object; a resourceVersion in it must be the
        current one (409 Conflict otherwise). status_only keeps all but
        status from the stored object (the status subresource)."""
        with self.lock:
            old = self.objects[res.plural].get((namespace, name))
            if old is None:
                raise not_found(res, name)
            self._validate(res, namespace, obj)
            if obj["metadata"]["name"] != name:
                raise ApiError(400, "BadRequest", "the name of the object (%s) does not match "
                               "the name on the URL (%s)" % (obj["metadata"]["name"], name))
            rv = obj["metadata"].get("resourceVersion")
            if rv and rv != old.obj["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the '
                               "object has been modified; please apply your changes to the "
                               "latest version and try again" % (qualified(res), name),
                               {"name": name, "group": res.group, "kind": res.plural})
            if status_only:
                merged = old.copy()
                merged["status"] = obj.get("status", {})
                obj = merged
            self._default(res, obj, old)
            if dry_run:
                return Stored(res, obj)
            return self._store(res, namespace, obj, old)

    def patch(self, res, namespace, name, content_type, body, status_only=False, dry_run=False):
        with self.lock:
            old = self.objects[res.plural].get((namespace, name))
            if old is None:
                raise not_found(res, name)
            try:
                obj = fake_patch.apply(content_type, old.copy(), body)
            except fake_patch.PatchError as e:
                raise ApiError(e.code, e.reason, str(e))
            obj.get("metadata", {}).pop("resourceVersion", None)
            return self.update(res, namespace, name, obj, status_only, dry_run)

    def delete(self, res, namespace, name, dry_run=False):
        with self.lock:
            old = self.objects[res.plural].get((namespace, name))
            if old is None:
                raise not_found(res, name)
            if not dry_run:
                if res.kind == "Namespace":
                    for plural, table in self.objects.items():
                        for key in [k for k in table if BY_PLURAL[plural].namespaced
                                    and k[0] == name]:
                            self._remove(BY_PLURAL[plural], key)
                self._remove(res, (namespace, name))
            return old

    def _remove(self, res, key):
        old = self.objects[res.plural].pop(key)
        self._sorted.pop(res.plural, None)
        # The DELETED event carries the last state at the deletion's rv.
        obj = old.copy()
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        self._record("DELETED", Stored(res, obj), old)

    def counts(self):
        with self.lock:
            return {p: len(t) for p, t in self.objects.items()}


def strip_meta(obj):
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def normalize_secret(obj):
    """stringData folds into data; data must be base64; a TLS Secret needs
    its two keys (the API server's own checks)."""
    data = obj.get("data") or {}
    for k, v in (obj.pop("stringData", None) or {}).items():
        data[k] = base64.b64encode(v.encode()).decode()
    for k, v in data.items():
        try:
            base64.b64decode(v, validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise ApiError(400, "BadRequest", "data[%s]: illegal base64 data" % k)
    obj["data"] = data
    obj.setdefault("type", "Opaque")
    if obj["type"] == "kubernetes.io/tls":
        missing = [k for k in ("tls.crt", "tls.key") if k not in data]
        if missing:
            raise ApiError(422, "Invalid", 'Secret "%s" is invalid: data[%s]: Required value'
                           % (obj["metadata"].get("name"), missing[0]))
