"""PNML interchange (ISO/IEC 15909-2) for sgdnet nets.

:func:`to_pnml` writes a standard place/transition net (``ptnet`` type): one ``<page>`` with
``<place>`` (``<name>``, ``<initialMarking>``), ``<transition>`` (``<name>``) and ``<arc>``
(``<inscription>`` = weight) elements, so any PNML tool reads the structure. Everything a P/T
net cannot say — durations, servers, priority, tags, resources (links with their bandwidth,
latency and efficiency), transfers' rate caps, inhibitor arcs, gates,
modulators, ``net.meta`` — goes into ``<toolspecific tool="sgdnet" version="1">`` blocks whose
children hold JSON text. :func:`from_pnml` reads both back, so
``from_pnml(to_pnml(net))`` is the same net (same declaration order, same arcs, same
distributions) and simulates to the same result with the same seed.

Element ids are valid XML ``ID`` values (NCNames) derived from the names, prefixed by kind
(``p_``, ``t_``, ``a_``) and made unique; the original names are kept in ``<name><text>``.

A PNML file written by another tool (no sgdnet blocks) is read as an untimed net given
``default_duration`` seconds per transition; nested pages are flattened and reference nodes
are resolved to the node they point to. The PNML core model type (``pnmlcoremodel``, which pm4py
writes) is read as a P/T net, and so is a document whose elements carry no namespace (pm4py's
``<pnml>`` root). A transition with a ``StochasticPetriNet`` block (ProM's and pm4py's stochastic
nets) takes its ``weight`` (a random switch, see :class:`~sgdnet.net.Transition`) and, for the
types ``IMMEDIATE`` (0 s), ``DETERMINISTIC``, ``EXPONENTIAL`` (the parameter is a rate) and
``UNIFORM`` (``loc;scale``), its duration; its ``priority`` is not read. Transitions of a foreign
file sharing a name (e.g. two silent ``tau`` steps) are told apart by their ids,
``"name [id]"``. A foreign net has no step tags: name its step transitions with
``simulate(net, step=...)``.
"""

from __future__ import annotations

import json
import math
import os
import re
import xml.etree.ElementTree as ET
from typing import Any

from ..dists import from_dict
from ..errors import DistributionError, NetError, SgdnetError
from .builder import Net

__all__ = ["to_pnml", "from_pnml", "PNML_NS", "PTNET_TYPE", "CORE_TYPE", "TOOL", "TOOL_VERSION"]

PNML_NS = "http://www.pnml.org/version-2009/grammar/pnml"
PTNET_TYPE = "http://www.pnml.org/version-2009/grammar/ptnet"
CORE_TYPE = "http://www.pnml.org/version-2009/grammar/pnmlcoremodel"  # pm4py writes this type
TOOL = "sgdnet"
TOOL_VERSION = "1"

_Q = "{" + PNML_NS + "}"
_NCNAME_BAD = re.compile(r"[^A-Za-z0-9_.\-]")


# --------------------------------------------------------------------------- JSON with types
#: the fields of the sgdnet toolspecific blocks :func:`to_pnml` writes (the net's, a transition's)
_NET_FIELDS = ("resources", "gates", "modulators", "meta")
_TRANSITION_FIELDS = ("duration", "servers", "priority", "resources", "inhibitors", "tags",
                      "modulator", "gate", "flow_cap", "weight", "backlog")


def _enc(x: Any) -> Any:
    """Encode a value as JSON-able data that :func:`_dec` turns back into an equal value.

    Tuples, non-finite floats and non-string dict keys are tagged so they survive; numpy
    scalars become Python numbers; objects with ``to_dict`` keep their dict; anything else is
    kept as its ``repr`` (lossy, tagged ``__repr__``).
    """
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if isinstance(x, tuple):
        return {"__tuple__": [_enc(v) for v in x]}
    if isinstance(x, list):
        return [_enc(v) for v in x]
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x) and "__tuple__" not in x:
            return {k: _enc(v) for k, v in x.items()}
        return {"__items__": [[_enc(k), _enc(v)] for k, v in x.items()]}
    try:  # numpy scalars and arrays without importing numpy here
        import numpy as np

        if isinstance(x, np.generic):
            return _enc(x.item())
        if isinstance(x, np.ndarray):
            return [_enc(v) for v in x.tolist()]
    except ImportError:  # pragma: no cover
        pass
    if hasattr(x, "to_dict"):
        cls = type(x)
        return {"__object__": cls.__qualname__, "module": cls.__module__, "dict": _enc(x.to_dict())}
    return {"__repr__": repr(x)}


def _dec(x: Any) -> Any:
    if isinstance(x, list):
        return [_dec(v) for v in x]
    if isinstance(x, dict):
        if len(x) == 1:
            (k, v), = x.items()
            if k == "__tuple__":
                return tuple(_dec(e) for e in v)
            if k == "__float__":
                return float(v)
            if k == "__items__":
                return {_hashable(_dec(a)): _dec(b) for a, b in v}
            if k == "__repr__":
                return v
        if set(x) == {"__object__", "dict"}:  # written without the module: keep the dict
            return _dec(x["dict"])
        if set(x) == {"__object__", "module", "dict"}:
            return _object(x["module"], x["__object__"], _dec(x["dict"]))
        return {k: _dec(v) for k, v in x.items()}
    return x


def _object(module: str, qualname: str, d: Any) -> Any:
    """Rebuild an sgdnet object (e.g. the ``Cluster`` variants keep in ``net.meta``) from its dict.

    Only classes of the ``sgdnet`` package with a ``from_dict`` classmethod are rebuilt, so a
    document cannot make the reader import arbitrary code; anything else stays a plain dict.
    """
    if module != "sgdnet" and not module.startswith("sgdnet."):
        return d
    import importlib

    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return d
    from_dict = getattr(obj, "from_dict", None)
    if not isinstance(obj, type) or not callable(from_dict):
        return d
    return from_dict(d)


def _hashable(x):
    return tuple(_hashable(v) for v in x) if isinstance(x, list) else x


def _dumps(x: Any) -> str:
    return json.dumps(_enc(x), separators=(",", ":"), allow_nan=False)


# --------------------------------------------------------------------------- writing
def _make_ids(names, prefix: str, used: set[str]) -> dict[str, str]:
    out = {}
    for n in names:
        base = prefix + _NCNAME_BAD.sub("_", n)
        i, cand = 1, base
        while cand in used:
            i += 1
            cand = f"{base}_{i}"
        used.add(cand)
        out[n] = cand
    return out


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrib) -> ET.Element:
    # Written without a prefix; the root's default xmlns puts every element in the PNML namespace.
    e = ET.SubElement(parent, tag, {k: str(v) for k, v in attrib.items()})
    if text is not None:
        e.text = text
    return e


def _label(parent: ET.Element, tag: str, text: str) -> None:
    _sub(_sub(parent, tag), "text", text)


def _tool(parent: ET.Element, fields: dict[str, Any]) -> None:
    ts = _sub(parent, "toolspecific", tool=TOOL, version=TOOL_VERSION)
    for k, v in fields.items():
        _sub(ts, k, _dumps(v))


def _servers(s: float):
    return "inf" if s == math.inf else s


def to_pnml(net: Net, path: str | os.PathLike | None = None) -> str:
    """Write ``net`` as a PNML place/transition net with sgdnet extensions.

    Parameters
    ----------
    net : Net
        The net to export (it is not validated; invalid nets round-trip as they are).
    path : str or path-like, optional
        File to write (UTF-8, with an XML declaration).

    Returns
    -------
    str
        The PNML document.

    Raises
    ------
    NetError
        If ``net`` is not a :class:`~sgdnet.net.Net`.
    """
    if not isinstance(net, Net):
        raise NetError(f"to_pnml needs a sgdnet Net, got {type(net).__name__}; build one with sgdnet.Net(...)")
    used: set[str] = set()
    pid = _make_ids(net.places, "p_", used)
    tid = _make_ids(net.transitions, "t_", used)
    net_id = _make_ids([net.name], "net_", used)[net.name]
    page_id = _make_ids(["page0"], "", used)["page0"]

    root = ET.Element("pnml", {"xmlns": PNML_NS})
    enet = _sub(root, "net", id=net_id, type=PTNET_TYPE)
    _label(enet, "name", net.name)
    _tool(enet, {
        "resources": [
            {"name": r.name, "capacity": r.capacity, "discipline": r.discipline, "tags": r.tags,
             **({"bandwidth": r.bandwidth, "latency": r.latency, "efficiency": list(r.efficiency)}
                if r.discipline == "flow" else {}),
             **({"burst": r.burst, "peak": r.peak} if r.discipline == "flow" and r.burst else {}),
             **({"ack_path": [r.ack_path[0], list(r.ack_path[1])]}
                if r.discipline == "flow" and r.ack_path is not None else {})}
            for r in net.resources.values()
        ],
        "gates": [
            {"name": g.name, "kind": g.kind, "counters": list(g.counters), "s": g.s,
             "s_lower": g.s_lower, "r_max": g.r_max, "s_upper": g.s_upper}
            for g in net.gates.values()
        ],
        "modulators": [
            {"name": m.name, "kind": m.kind,
             "multiplier": None if m.multiplier is None else m.multiplier.to_dict(),
             "resample_on": list(m.resample_on), "slow_factor": m.slow_factor,
             "mean_fast": m.mean_fast, "mean_slow": m.mean_slow}
            for m in net.modulators.values()
        ],
        "meta": net.meta,
    })
    page = _sub(enet, "page", id=page_id)
    for p in net.places.values():
        ep = _sub(page, "place", id=pid[p.name])
        _label(ep, "name", p.name)
        _label(ep, "initialMarking", str(p.tokens))
        if p.tags:
            _tool(ep, {"tags": p.tags})
    arcs: list[tuple[str, str, int]] = []
    for t in net.transitions.values():
        et = _sub(page, "transition", id=tid[t.name])
        _label(et, "name", t.name)
        _tool(et, {
            "duration": t.duration.to_dict(),
            "servers": _servers(t.servers),
            "priority": t.priority,
            "resources": list(t.resources),
            "inhibitors": t.inhibitors,
            "tags": t.tags,
            "modulator": t.modulator,
            "gate": None if t.gate is None else list(t.gate),
            **({} if t.flow_cap == math.inf else {"flow_cap": t.flow_cap}),
            **({} if t.weight is None else {"weight": t.weight}),
            **({} if t.backlog is None else {"backlog": list(t.backlog)}),
        })
        for p, w in t.inputs.items():
            arcs.append((pid.get(p, p), tid[t.name], w))
        for p, w in t.outputs.items():
            arcs.append((tid[t.name], pid.get(p, p), w))
    aid = _make_ids([f"{s}__{d}" for s, d, _ in arcs], "a_", used)
    for s, d, w in arcs:
        ea = _sub(page, "arc", id=aid[f"{s}__{d}"], source=s, target=d)
        _label(ea, "inscription", str(w))
    ET.indent(root, space=" ")
    text = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return text


# --------------------------------------------------------------------------- reading
class _Reader:
    def __init__(self, where: str, q: str = _Q):
        self.where = where
        self.q = q  # the document's namespace prefix: _Q, or "" for a document without one

    def err(self, msg: str, elem: ET.Element | None = None) -> NetError:
        loc = ""
        if elem is not None:
            tag = elem.tag.replace(_Q, "")
            ident = elem.get("id")
            loc = f" <{tag}{' id=' + repr(ident) if ident else ''}>"
        return NetError(f"PNML {self.where}{loc}: {msg}")

    def label(self, elem: ET.Element, tag: str) -> str | None:
        lab = elem.find(self.q + tag)
        if lab is None:
            return None
        txt = lab.find(self.q + "text")
        if txt is None:
            raise self.err(f"<{tag}> has no <text> child", elem)
        return (txt.text or "").strip()

    def integer(self, elem: ET.Element, tag: str, default: int, minimum: int) -> int:
        s = self.label(elem, tag)
        if s is None:
            return default
        try:
            v = int(s)
        except ValueError:
            raise self.err(f"<{tag}> text {s!r} is not an integer", elem) from None
        if v < minimum:
            raise self.err(f"<{tag}> value {v} must be >= {minimum}", elem)
        return v

    def tool(self, elem: ET.Element, allowed: tuple[str, ...]) -> dict[str, Any]:
        """The fields of ``elem``'s sgdnet ``<toolspecific>`` blocks; anything else in such a
        block (text, a misspelt or unknown field) is refused, not dropped: a transition would
        otherwise silently get the default duration."""
        out: dict[str, Any] = {}
        for ts in elem.findall(self.q + "toolspecific"):
            if ts.get("tool") != TOOL:
                continue
            if ts.get("version") != TOOL_VERSION:
                raise self.err(
                    f"toolspecific version {ts.get('version')!r} is not supported; this sgdnet reads version {TOOL_VERSION!r}",
                    elem,
                )
            text = "".join([ts.text or "", *(c.tail or "" for c in ts)]).strip()
            if text:
                raise self.err(f"sgdnet toolspecific block holds text {text[:60]!r}; its fields "
                               f"are child elements {list(allowed)} holding JSON", elem)
            for child in ts:
                key = child.tag.replace(self.q, "") if isinstance(child.tag, str) else "?"
                if key not in allowed:
                    raise self.err(f"sgdnet toolspecific field <{key}> is unknown here; known "
                                   f"fields are {list(allowed)}", elem)
                try:
                    out[key] = _dec(json.loads(child.text or "null"))
                except json.JSONDecodeError as e:
                    raise self.err(f"toolspecific <{key}> is not valid JSON ({e})", elem) from None
        return out

    def stochastic(self, elem: ET.Element) -> dict[str, Any]:
        """A transition's ``StochasticPetriNet`` block (ProM, pm4py) as ``{"weight": float,
        "duration": seconds or Distribution}`` (only the keys the block gives)."""
        from ..dists import Deterministic, Exponential, Uniform

        out: dict[str, Any] = {}
        for ts in elem.findall(self.q + "toolspecific"):
            if ts.get("tool") != "StochasticPetriNet":
                continue
            props = {p.get("key"): (p.text or "").strip() for p in ts.findall(self.q + "property")}
            kind = props.get("distributionType", "").upper()
            try:
                if "weight" in props:
                    out["weight"] = float(props["weight"])
                par = [float(x) for x in props.get("distributionParameters", "").split(";") if x.strip()]
                if kind == "IMMEDIATE":
                    out["duration"] = 0.0
                elif kind == "DETERMINISTIC" and len(par) >= 1:
                    out["duration"] = Deterministic(par[0])
                elif kind == "EXPONENTIAL" and len(par) >= 1:
                    out["duration"] = Exponential(1.0 / par[0])
                elif kind == "UNIFORM" and len(par) >= 2:
                    out["duration"] = Uniform(par[0], par[0] + par[1])
            except (ValueError, ZeroDivisionError, DistributionError) as e:
                raise self.err(f"unreadable StochasticPetriNet data {props!r} ({e})", elem) from None
        return out


def _read_source(source) -> tuple[ET.Element, str]:
    if isinstance(source, str) and source.lstrip().startswith("<"):
        where = "document"
        from ..limits import check_limit

        check_limit("PNML document length", len(source), "max_file_bytes", error=NetError)
        try:
            root = ET.fromstring(source.lstrip())
        except ET.ParseError as e:
            raise NetError(f"PNML {where}: not well-formed XML ({e})") from None
        _check_xml_depth(root, where)
        return root, where
    if not isinstance(source, (str, os.PathLike)):
        raise NetError(f"from_pnml needs a path or PNML text, got {type(source).__name__}")
    where = os.fspath(source)
    if not os.path.exists(where):
        raise NetError(f"PNML file {where!r} does not exist")
    from .._files import read_text

    text = read_text(where, "PNML file", NetError)  # directories, size limit, UTF-16
    try:
        root = ET.fromstring(text.encode("utf-8"))
    except ET.ParseError as e:
        raise NetError(f"PNML {where}: not well-formed XML ({e})") from None
    _check_xml_depth(root, where)
    return root, where


def _check_xml_depth(root: ET.Element, where: str) -> None:
    """Refuse elements nested deeper than ``max_depth`` (3,000 nested pages would make the
    recursive reader raise RecursionError); iterative, so it cannot recurse itself."""
    from ..limits import limit

    max_depth = limit("max_depth")
    stack = [(root, 0)]
    while stack:
        elem, depth = stack.pop()
        if depth > max_depth:
            raise NetError(f"PNML {where}: elements nested deeper than {max_depth} levels (e.g. "
                           "pages inside pages); flatten the pages")
        stack.extend((child, depth + 1) for child in elem)


def from_pnml(source, *, default_duration: float = 1.0, validate: bool = True, net_index: int = 0) -> Net:
    """Read a PNML place/transition net, with sgdnet extensions when present.

    Parameters
    ----------
    source : str or path-like
        A file path, or the PNML text itself (a string starting with ``<``).
    default_duration : float
        Duration (seconds, deterministic) of transitions that carry no sgdnet timing, i.e. nets
        written by other tools.
    validate : bool
        Run :meth:`Net.validate` on the result (default True).
    net_index : int
        Which ``<net>`` of the document to read when it holds several.

    Returns
    -------
    Net

    Raises
    ------
    NetError
        Malformed XML, a missing or unexpected element, a bad marking or inscription, an arc
        between two places or two transitions, unreadable sgdnet data; the message names the
        file and the element.
    """
    root, where = _read_source(source)
    try:
        return _from_tree(root, where, default_duration, validate, net_index)
    except SgdnetError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError,
            RecursionError) as e:  # sgdnet data of the wrong type in <toolspecific>
        raise NetError(f"PNML {where}: unreadable sgdnet data ({type(e).__name__}: "
                       f"{' '.join(str(e).split())}); was it written by sgdnet's to_pnml?") \
            from None


def _from_tree(root: ET.Element, where: str, default_duration: float, validate: bool,
               net_index: int) -> Net:
    """:func:`from_pnml` on a parsed document."""
    if root.tag not in (_Q + "pnml", "pnml"):
        raise _Reader(where).err(f"root element is <{root.tag}>, expected <pnml> in namespace "
                                 f"{PNML_NS} (or without a namespace)")
    R = _Reader(where, _Q if root.tag == _Q + "pnml" else "")
    Q = R.q
    nets = root.findall(Q + "net")
    if not nets:
        raise R.err("no <net> element", root)
    if not 0 <= net_index < len(nets):
        raise R.err(f"net_index={net_index} is out of range; the document holds {len(nets)} net(s)")
    enet = nets[net_index]
    ntype = enet.get("type")
    if ntype not in (PTNET_TYPE, CORE_TYPE):
        raise R.err(f"net type {ntype!r} is not supported; only P/T nets ({PTNET_TYPE}) and the "
                    f"core model ({CORE_TYPE})", enet)
    name = R.label(enet, "name") or enet.get("id") or "net"
    nt = R.tool(enet, _NET_FIELDS)
    net = Net(name)

    # Collect nodes from every page (nested pages flattened), in document order.
    places: list[ET.Element] = []
    trans: list[ET.Element] = []
    arcs: list[ET.Element] = []
    refs: dict[str, str] = {}
    pages = enet.findall(Q + "page")
    if not pages:
        raise R.err("no <page> element; PNML nets keep their nodes in a <page>", enet)

    def walk(pg: ET.Element) -> None:  # document order, nested pages in place
        for e in pg:
            tag = e.tag.replace(Q, "") if Q else e.tag
            if tag == "place":
                places.append(e)
            elif tag == "transition":
                trans.append(e)
            elif tag == "arc":
                arcs.append(e)
            elif tag == "page":
                walk(e)
            elif tag in ("referencePlace", "referenceTransition"):
                if not e.get("id") or not e.get("ref"):
                    raise R.err("reference node needs 'id' and 'ref' attributes", e)
                refs[e.get("id")] = e.get("ref")

    for pg in pages:
        walk(pg)

    def resolve(i: str, elem) -> str:
        seen = set()
        while i in refs:
            if i in seen:
                raise R.err(f"reference cycle through {i!r}", elem)
            seen.add(i)
            i = refs[i]
        return i

    place_of: dict[str, str] = {}
    for e in places:
        i = e.get("id")
        if not i:
            raise R.err("place without an 'id' attribute", e)
        pname = R.label(e, "name") or i
        tags = R.tool(e, ("tags",)).get("tags", {})
        if pname in net.places:
            raise R.err(f"two places are named {pname!r}; sgdnet needs unique place names", e)
        net.place(pname, R.integer(e, "initialMarking", 0, 0), **tags)
        place_of[i] = pname
    trans_of: dict[str, str] = {}
    ttool: dict[str, dict] = {}
    foreign = not nt  # no sgdnet block on the net: written by another tool
    taken: set[str] = set()
    for e in trans:
        i = e.get("id")
        if not i:
            raise R.err("transition without an 'id' attribute", e)
        tname = R.label(e, "name") or i
        if tname in taken:
            if not foreign:
                raise R.err(f"two transitions are named {tname!r}; sgdnet needs unique transition names", e)
            tname = f"{tname} [{i}]"  # e.g. two silent steps of a process model: told apart by id
            if tname in taken:
                raise R.err(f"two transitions have the id {i!r}", e)
        taken.add(tname)
        trans_of[i] = tname
        ttool[tname] = R.tool(e, _TRANSITION_FIELDS) or R.stochastic(e)

    for r in nt.get("resources", []):
        try:
            if r.get("discipline") == "flow":
                net.link(r["name"], r["bandwidth"], r.get("latency", 0.0), r.get("efficiency") or None,
                         burst=r.get("burst", 0.0), peak=r.get("peak"), **r.get("tags", {}))
            else:
                net.resource(r["name"], r["capacity"], r["discipline"], **r.get("tags", {}))
        except (KeyError, TypeError) as ex:
            raise R.err(f"sgdnet resource entry {r!r} is incomplete ({ex})", enet) from None
    for r in nt.get("resources", []):  # once every link exists
        if r.get("ack_path") is not None:
            try:
                net.ack_path(r["name"], r["ack_path"][0], r["ack_path"][1])
            except (IndexError, TypeError) as ex:
                raise R.err(f"sgdnet resource entry {r!r}: bad ack_path ({ex})", enet) from None

    inputs: dict[str, dict[str, int]] = {t: {} for t in trans_of.values()}
    outputs: dict[str, dict[str, int]] = {t: {} for t in trans_of.values()}
    for e in arcs:
        s, d = e.get("source"), e.get("target")
        if not s or not d:
            raise R.err("arc needs 'source' and 'target' attributes", e)
        s, d = resolve(s, e), resolve(d, e)
        w = R.integer(e, "inscription", 1, 1)
        if s in place_of and d in trans_of:
            tbl, t, p = inputs, trans_of[d], place_of[s]
        elif s in trans_of and d in place_of:
            tbl, t, p = outputs, trans_of[s], place_of[d]
        elif s in place_of or s in trans_of:
            raise R.err(f"arc target {d!r} is not a node of the other kind (arcs join a place and a transition)", e)
        else:
            raise R.err(f"arc source {s!r} is not a place or transition of this net", e)
        if p in tbl[t]:
            raise R.err(f"duplicate arc between {p!r} and {t!r}; give one arc with the summed weight", e)
        tbl[t][p] = w

    elem_of = {e.get("id"): e for e in trans}
    for i, tname in trans_of.items():
        tt = ttool[tname]
        elem = elem_of[i]
        try:
            dur = tt.get("duration", default_duration)
            if isinstance(dur, dict):
                dur = from_dict(dur)
        except DistributionError as ex:
            raise R.err(f"bad sgdnet duration: {ex}", elem) from None
        servers = tt.get("servers", 1)
        if servers == "inf":
            servers = math.inf
        gate = tt.get("gate")
        try:
            net.transition(
                tname, dur, inputs=inputs[tname], outputs=outputs[tname],
                inhibitors=tt.get("inhibitors") or None, resources=tt.get("resources") or None,
                servers=servers, priority=tt.get("priority", 0), tags=tt.get("tags") or None,
                modulator=tt.get("modulator"), gate=None if gate is None else tuple(gate),
                weight=tt.get("weight"),
            )
            if "flow_cap" in tt:
                net.transitions[tname].flow_cap = tt["flow_cap"]
            if tt.get("backlog") is not None:
                b = tt["backlog"]
                net.transitions[tname].backlog = (b[0], b[1]) if isinstance(b, list) and len(b) == 2 else b
        except (DistributionError, NetError) as ex:
            raise R.err(str(ex), elem) from None

    for g in nt.get("gates", []):
        try:
            net.gate(g["name"], g["kind"], g["counters"], s=g["s"], s_lower=g["s_lower"], r_max=g["r_max"],
                     s_upper=g.get("s_upper"))
        except (KeyError, TypeError) as ex:
            raise R.err(f"sgdnet gate entry {g!r} is incomplete ({ex})", enet) from None
    for m in nt.get("modulators", []):
        try:
            if m["kind"] == "markov":
                mod = net.markov_modulator(m["name"], m["slow_factor"], "1s", "1s")
                mod.mean_fast, mod.mean_slow = float(m["mean_fast"]), float(m["mean_slow"])
            else:
                net.modulator(m["name"], from_dict(m["multiplier"]), m["resample_on"])
                net.modulators[m["name"]].kind = m["kind"]
        except (KeyError, TypeError, DistributionError) as ex:
            raise R.err(f"sgdnet modulator entry {m!r} is unreadable ({ex})", enet) from None
    net.meta.update(nt.get("meta") or {})
    if validate:
        problems = net.problems()
        if problems:
            raise NetError([f"PNML {where}: {p}" for p in problems], name)
    return net
