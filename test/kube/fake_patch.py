"""The PATCH bodies the fake API server accepts, applied to a copy of the
stored object: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the
subset of the strategic merge patch that `kubectl apply` sends for the
kinds served (lists merged by their key where the API declares one, the
$patch / $setElementOrder / $retainKeys / $deleteFromPrimitiveList
directives). Server-side apply is not served (415)."""

import copy
import json

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSONPATCH = "application/json-patch+json"

# List fields the API merges by a key in a strategic merge patch (by path
# from the object's root); every other list of these kinds is replaced
# whole. Lists of scalars named here are merged as sets.
MERGE_KEYS = {
    ("spec", "ports"): "port",                    # Service
    ("metadata", "ownerReferences"): "uid",
    ("metadata", "finalizers"): None,
}


class PatchError(Exception):
    def __init__(self, message, code=422, reason="Invalid"):
        super().__init__(message)
        self.code = code
        self.reason = reason


def apply(content_type, target, body):
    ctype = (content_type or "").split(";")[0].strip().lower()
    try:
        patch = json.loads(body or b"null")
    except ValueError as e:
        raise PatchError("invalid JSON in the patch: %s" % e, 400, "BadRequest")
    if ctype == MERGE:
        return merge(target, patch)
    if ctype == STRATEGIC:
        if not isinstance(patch, dict):
            raise PatchError("a strategic merge patch is an object", 400, "BadRequest")
        return strategic(target, patch, ())
    if ctype == JSONPATCH:
        return json_patch(target, patch)
    raise PatchError("the body of the request was in an unknown format - accepted media "
                     "types include: %s, %s, %s" % (JSONPATCH, MERGE, STRATEGIC),
                     415, "UnsupportedMediaType")


def merge(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge(result.get(k), v)
    return result


def strip_directives(value):
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value


def strategic(target, patch, path):
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "replace":
        return strip_directives(patch)
    if directive not in (None, "merge"):
        raise PatchError("unknown $patch directive %r at %s" % (directive, ".".join(path)))
    retain = patch.pop("$retainKeys", None)
    result = dict(target) if isinstance(target, dict) else {}
    orders = {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v
        elif k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            result[field] = [x for x in result.get(field) or [] if x not in v]
        elif v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                result.pop(k, None)
            else:
                result[k] = strategic(result.get(k), v, path + (k,))
        elif isinstance(v, list) and (path + (k,)) in MERGE_KEYS:
            result[k] = merge_list(result.get(k) or [], v, MERGE_KEYS[path + (k,)], path + (k,))
        else:
            result[k] = strip_directives(v)
    for field, order in orders.items():
        key = MERGE_KEYS.get(path + (field,))
        if isinstance(result.get(field), list):
            result[field] = ordered(result[field], order, key)
    if retain is not None:
        result = {k: v for k, v in result.items() if k in retain}
    return result


def merge_list(current, patch, key, path):
    if key is None:     # a set of scalars
        return current + [x for x in patch if x not in current]
    result = list(current)
    for elem in patch:
        if not isinstance(elem, dict) or key not in elem:
            raise PatchError("an element of %s has no %s" % (".".join(path), key))
        at = next((i for i, x in enumerate(result) if x.get(key) == elem[key]), None)
        if elem.get("$patch") == "delete":
            if at is not None:
                del result[at]
        elif at is None:
            result.append(strip_directives(elem))
        else:
            result[at] = strategic(result[at], elem, path)
    return result


def ordered(items, order, key):
    def ident(x):
        return x.get(key) if key and isinstance(x, dict) else x
    rank = {json.dumps(ident(o) if isinstance(o, dict) else o): i for i, o in enumerate(order)}
    return sorted(items, key=lambda x: rank.get(json.dumps(ident(x)), len(rank)))


# -- RFC 6902 -------------------------------------------------------------

def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("bad JSON pointer %r" % path, 400, "BadRequest")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, tokens):
    for t in tokens[:-1]:
        doc = doc[int(t)] if isinstance(doc, list) else doc[t]
    return doc


def json_patch(target, ops):
    doc = copy.deepcopy(target)
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations", 400, "BadRequest")
    for op in ops:
        try:
            doc = _json_patch_op(doc, op)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise PatchError("the JSON patch operation %s failed: %r" % (json.dumps(op), e))
    return doc


def _json_patch_op(doc, op):
    kind, tokens = op["op"], _pointer(op["path"])
    if kind == "test":
        cur = doc
        for t in tokens:
            cur = cur[int(t)] if isinstance(cur, list) else cur[t]
        if cur != op["value"]:
            raise ValueError("test failed")
        return doc
    if kind in ("move", "copy"):
        src = _pointer(op["from"])
        parent = _parent(doc, src)
        value = parent[int(src[-1])] if isinstance(parent, list) else parent[src[-1]]
        if kind == "move":
            doc = _json_patch_op(doc, {"op": "remove", "path": op["from"]})
        return _json_patch_op(doc, {"op": "add", "path": op["path"], "value": value})
    if not tokens:
        if kind in ("add", "replace"):
            return copy.deepcopy(op["value"])
        raise ValueError("cannot remove the root")
    parent, last = _parent(doc, tokens), tokens[-1]
    if kind == "remove":
        del parent[int(last) if isinstance(parent, list) else last]
    elif kind == "replace":
        if isinstance(parent, list):
            parent[int(last)] = op["value"]
        else:
            parent[last]     # must exist
            parent[last] = op["value"]
    elif kind == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
        else:
            parent[last] = op["value"]
    else:
        raise ValueError("unknown op %r" % kind)
    return doc
