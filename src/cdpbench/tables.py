"""``cdpbench tables``: the READMEs' result tables and numbers, rendered from committed results.

A results file is the tidy CSV ``cdpbench report --export`` writes for one sweep (one row per run,
metric and release; the swept parameters as columns; the sweep's wall time as run ``sweep``,
metric ``wall_s``). A README marks what is rendered from it:

    <!-- table: NAME -->
    | ... the table, replaced by the rendering ... |
    <!-- /table -->

    ... and inline: <!-- value: NAME -->0.135<!-- /value --> ...

and ``NAME`` is defined in a YAML spec in the ``tables/`` folder beside the README
(``experiments/tables/*.yaml`` for ``experiments/README.md``)::

    sources:                          # short names -> results files, relative to the spec file
      fig4: ../results/js_reduce_fig4.csv
    tables:
      js_reduce_fig4:
        source: fig4                  # one name, or a list (rows then may select `source: NAME`)
        where: {}                     # optional: parameter values every cell selects
        columns:
          - header: method            # no `cell`: the row label
          - header: release 24
            align: right              # optional: left (default), right, center
            cell: "{at(dk1.gain_rho, 24):.3f} / {at(dk3.gain_rho, 24):.3f}"
            where: {}                 # optional, merged over the table's and the row's
        rows:
          - label: JS-reduce
            where: {method: js_reduce}
            cells: {release 24: "..."}  # optional: this row's own template for a column
    values:
      js_max: {source: fig4, where: {method: js_reduce}, text: "{max(dk3.gain_rho):.3f}"}

A cell template is literal text with fields ``{EXPR}`` or ``{EXPR:FORMAT}`` (``{{``/``}}`` for a
brace). EXPR is a small language parsed here — never ``eval``, and no spec can name code:

* a metric reference ``dk3.gain_rho``, optionally narrowed ``dk3.gain_rho[method=ksaa, k=4]``
  (merged over the table's, row's and column's ``where``; it must select exactly one run;
  ``[run=LABEL]`` names a run alone, e.g. ``wall_s[run=sweep]``, the sweep's wall time);
* series functions of a reference: ``at(m, STEP)``, ``mean(m)``, ``min(m)``, ``max(m)``,
  ``sum(m)`` (each optionally over steps ``FROM, TO``), ``first(m)``, ``last(m)``,
  ``count(m)``, ``undefined(m)`` (the number of steps whose value is nan, e.g. a gain over no
  published record) and ``mean_defined(m)`` (the mean over the other steps; also over steps
  ``FROM, TO``),
  ``first_step_above(m, X)`` / ``first_step_below(m, X)`` (the first step whose
  value is > X / < X, else the text ``never``), ``step_of_max(m)``, ``step_of_min(m)``;
* ``param(NAME)``: the selected run's value of a swept parameter;
* numbers, ``"text"``, ``+ - * /``, parentheses, comparisons ``< <= > >= == !=`` (1 or 0 in
  arithmetic, so a sum of comparisons counts the true ones),
  ``if(COND, A, B)``, ``bold(X)`` (formatted, then wrapped in ``**``), ``greatest(X, ...)``,
  ``least(X, ...)``, ``abs(X)``.

FORMAT is a Python format spec for numbers (``.3f``, ``,.0f``, ``.0%``, ``d``); text ignores it.
"""

from __future__ import annotations

import csv
import glob
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CdpbenchError

DEFAULT_FILES = ("experiments/README.md", "plugins/*/README.md", "mutation/README.md", "docs/scale.md")
SPEC_DIR = "tables"
NOT_RESULTS = "<!-- not-results:"

BLOCK_RE = re.compile(r"(<!-- table: *([\w.\-]+) *-->\n)(.*?)(<!-- /table -->)", re.S)
VALUE_RE = re.compile(r"(<!-- value: *([\w.\-]+) *-->)(.*?)(<!-- /value -->)", re.S)
FORMAT_RE = re.compile(r"^[<>^=]?[+\- ]?#?0?\d*[,_]?(\.\d+)?[eEfFgGd%n]?$")


class SpecError(CdpbenchError):
    """A table spec that cannot be rendered: one line naming the spec file, table and cell."""


# --------------------------------------------------------------------------- expression language

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<str>"[^"]*"|'[^']*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><=|>=|==|!=|[-+*/(),\[\]=<>])
""", re.X)


def tokenize(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN_RE.match(text, pos)
        if not m:
            raise SpecError(f"unexpected {text[pos:pos + 10]!r} in expression {text!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    return out


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Text:
    value: str


@dataclass(frozen=True)
class Ref:
    """A metric (or, in ``param``, a parameter) with its own run selection."""

    name: str
    where: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Any
    right: Any


@dataclass(frozen=True)
class Neg:
    operand: Any


class Parser:
    """Recursive descent: cmp := add (CMP add)?; add := mul (('+'|'-') mul)*;
    mul := unary (('*'|'/') unary)*; unary := '-' unary | atom;
    atom := NUM | STR | NAME '(' args ')' | NAME ('[' sel (',' sel)* ']')? | '(' cmp ')'."""

    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    def parse(self):
        if not self.toks:
            raise SpecError("empty expression {}")
        node = self.cmp()
        if self.i != len(self.toks):
            raise SpecError(f"unexpected {self.toks[self.i][1]!r} in expression {self.text!r}")
        return node

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise SpecError(f"expression {self.text!r} ends early" + (f" (expected {expected!r})" if expected else ""))
        tok = self.toks[self.i]
        if expected is not None and tok[1] != expected:
            raise SpecError(f"expected {expected!r}, found {tok[1]!r} in expression {self.text!r}")
        self.i += 1
        return tok

    def cmp(self):
        node = self.add()
        if self.peek() in ("<", "<=", ">", ">=", "==", "!="):
            op = self.take()[1]
            node = BinOp(op, node, self.add())
        return node

    def add(self):
        node = self.mul()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            node = BinOp(op, node, self.mul())
        return node

    def mul(self):
        node = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            node = BinOp(op, node, self.unary())
        return node

    def unary(self):
        if self.peek() == "-":
            self.take()
            return Neg(self.unary())
        return self.atom()

    def atom(self):
        kind, text = self.take()
        if kind == "num":
            return Num(float(text))
        if kind == "str":
            return Text(text[1:-1])
        if text == "(":
            node = self.cmp()
            self.take(")")
            return node
        if kind != "name":
            raise SpecError(f"unexpected {text!r} in expression {self.text!r}")
        if self.peek() == "(":
            self.take()
            args = []
            if self.peek() != ")":
                args.append(self.cmp())
                while self.peek() == ",":
                    self.take()
                    args.append(self.cmp())
            self.take(")")
            if text not in FUNCTIONS:
                raise SpecError(f"unknown function {text!r}; known: {', '.join(sorted(FUNCTIONS))}")
            return Call(text, tuple(args))
        where = []
        if self.peek() == "[":
            self.take()
            while True:
                key = self.take()
                if key[0] != "name":
                    raise SpecError(f"expected a parameter name, found {key[1]!r} in expression {self.text!r}")
                self.take("=")
                kind_v, value = self.take()
                if kind_v not in ("name", "num", "str"):
                    raise SpecError(f"expected a value after {key[1]}=, found {value!r} in expression {self.text!r}")
                where.append((key[1], value[1:-1] if kind_v == "str" else value))
                if self.peek() == ",":
                    self.take()
                    continue
                self.take("]")
                break
        return Ref(text, tuple(where))


@dataclass(frozen=True)
class Bold:
    value: Any


def write_results(path: Path, rows) -> None:
    """Write ``(run, metric, step, value)`` rows as a results file :class:`Results` reads (the
    benchmarks' ``--out``; sweeps use ``cdpbench report --export``): counts exact, other values
    to 6 significant digits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["run", "metric", "step", "value"])
        for run, metric, step, value in rows:
            value = float(value)
            out.writerow([run, metric, step, int(value) if value.is_integer() else f"{value:.6g}"])
    print(f"wrote {path}")


class Results:
    """The rows of one or more results CSVs: runs (label -> parameters) and their series."""

    def __init__(self, files: dict[str, Path]):
        self.params: dict[tuple[str, str], dict[str, str]] = {}  # (source, run) -> params
        self.series: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
        self.columns: set[str] = {"run", "source"}
        for name, path in files.items():
            try:
                fh = path.open(newline="")
            except OSError as e:
                raise SpecError(f"results file {path}: {e.strerror}") from None
            with fh:
                reader = csv.DictReader(fh)
                cols = reader.fieldnames or []
                missing = [c for c in ("run", "metric", "step", "value") if c not in cols]
                if missing:
                    raise SpecError(f"results file {path} lacks column(s) {missing} (written by `cdpbench report --export`?)")
                pcols = [c for c in cols if c not in ("run", "metric", "step", "value")]
                self.columns.update(pcols)
                for row in reader:
                    key = (name, row["run"])
                    p = self.params.setdefault(key, {"run": row["run"], "source": name})
                    for c in pcols:
                        p[c] = row[c]
                    self.series.setdefault(key, {}).setdefault(row["metric"], {})[int(row["step"])] = float(row["value"])

    def select(self, where: dict[str, str]) -> tuple[str, str]:
        unknown = [k for k in where if k not in self.columns]
        if unknown:
            raise SpecError(f"unknown parameter(s) {unknown}; the results have {sorted(self.columns)}")
        keys = [k for k, p in self.params.items()
                if (p["run"] != "sweep" or where.get("run") == "sweep") and all(_same(p.get(c, ""), v) for c, v in where.items())]
        if len(keys) != 1:
            what = ", ".join(f"{k}={v}" for k, v in where.items()) or "no parameter"
            if not keys:
                raise SpecError(f"no run with {what}")
            raise SpecError(f"{len(keys)} runs match {what} ({', '.join(sorted(k[1] for k in keys))}); narrow the selection")
        return keys[0]


def _same(have: str, want: Any) -> bool:
    want = _yaml_text(want)
    if have == want:
        return True
    try:
        return float(have) == float(want)
    except ValueError:
        return False


def _yaml_text(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def _number(v: Any, what: str) -> float:
    if isinstance(v, Bold):
        v = v.value
    if isinstance(v, bool):  # a comparison counts 1 or 0: (a < b) + (c < d) counts the true ones
        return float(v)
    if not isinstance(v, (int, float)):
        raise SpecError(f"{what} needs a number, got {v!r}")
    return float(v)


def _steps(series: dict[int, float], args: list, func: str) -> list[float]:
    if not args:
        return [series[s] for s in sorted(series)]
    if len(args) != 2:
        raise SpecError(f"{func}(metric, FROM, TO): give both steps or neither")
    lo, hi = (_number(a, func) for a in args)
    vals = [series[s] for s in sorted(series) if lo <= s <= hi]
    if not vals:
        raise SpecError(f"{func}: no step in {lo:g}..{hi:g}")
    return vals


def _first_step(series, args, func, above: bool):
    if len(args) != 1:
        raise SpecError(f"{func}(metric, X) takes one threshold")
    x = _number(args[0], func)
    for s in sorted(series):
        if (series[s] > x) if above else (series[s] < x):
            return s
    return "never"


SERIES = {
    "at": None, "mean": None, "min": None, "max": None, "sum": None, "first": None, "last": None,
    "count": None, "mean_defined": None, "undefined": None,
    "first_step_above": None, "first_step_below": None, "step_of_max": None,
    "step_of_min": None,
}
PLAIN = {"param", "if", "bold", "greatest", "least", "abs"}
FUNCTIONS = set(SERIES) | PLAIN


class Evaluator:
    def __init__(self, results: Results, where: dict[str, Any]):
        self.results = results
        self.where = dict(where)

    def eval(self, node):
        if isinstance(node, Num):
            return node.value
        if isinstance(node, Text):
            return node.value
        if isinstance(node, Neg):
            return -_number(self.eval(node.operand), "-")
        if isinstance(node, BinOp):
            return self.binop(node)
        if isinstance(node, Ref):
            raise SpecError(f"metric {node.name!r} needs a function: at({node.name}, STEP), mean({node.name}), ...")
        return self.call(node)

    def binop(self, node: BinOp):
        a, b = self.eval(node.left), self.eval(node.right)
        if node.op in ("==", "!="):
            a = a.value if isinstance(a, Bold) else a
            b = b.value if isinstance(b, Bold) else b
            return (a == b) if node.op == "==" else (a != b)
        x, y = _number(a, node.op), _number(b, node.op)
        if node.op == "+":
            return x + y
        if node.op == "-":
            return x - y
        if node.op == "*":
            return x * y
        if node.op == "/":
            if y == 0:
                raise SpecError("division by zero")
            return x / y
        return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[node.op]

    def run_of(self, ref: Ref) -> tuple[str, str]:
        """The one run a reference selects: its own ``[...]`` over the cell's ``where``; naming
        ``run=`` (e.g. ``wall_s[run=sweep]``) replaces the cell's selection but for ``source``."""
        own = dict(ref.where)
        where = {k: v for k, v in self.where.items() if "run" not in own or k == "source"}
        where.update(own)
        return self.results.select(where)

    def call(self, node: Call):
        f = node.func
        if f in SERIES:
            if not node.args or not isinstance(node.args[0], Ref):
                raise SpecError(f"{f}() takes a metric first, e.g. {f}(dk3.gain_rho)")
            ref = node.args[0]
            run = self.run_of(ref)
            series = self.results.series.get(run, {}).get(ref.name)
            if series is None:
                have = sorted(self.results.series.get(run, {}))
                raise SpecError(f"run {run[1]!r} of {run[0]} has no metric {ref.name!r}"
                                + (f"; it has {', '.join(have[:12])}{' ...' if len(have) > 12 else ''}" if have else ""))
            args = [self.eval(a) for a in node.args[1:]]
            return self.series_func(f, series, args)
        if f == "param":
            if len(node.args) != 1 or not isinstance(node.args[0], Ref):
                raise SpecError("param(NAME) takes one parameter name")
            ref = node.args[0]
            run = self.run_of(ref)
            p = self.results.params[run]
            if ref.name not in p:
                raise SpecError(f"unknown parameter {ref.name!r}; the results have {sorted(self.results.columns)}")
            v = p[ref.name]
            try:
                return float(v)
            except ValueError:
                return v
        if f == "if":
            if len(node.args) != 3:
                raise SpecError("if(COND, A, B) takes three arguments")
            return self.eval(node.args[1]) if self.eval(node.args[0]) else self.eval(node.args[2])
        if f == "bold":
            if len(node.args) != 1:
                raise SpecError("bold(X) takes one argument")
            return Bold(self.eval(node.args[0]))
        vals = [self.eval(a) for a in node.args]
        if f == "abs":
            if len(vals) != 1:
                raise SpecError("abs(X) takes one argument")
            return abs(_number(vals[0], f))
        if not vals:
            raise SpecError(f"{f}() needs at least one argument")
        nums = [_number(v, f) for v in vals]
        return max(nums) if f == "greatest" else min(nums)

    @staticmethod
    def series_func(f: str, series: dict[int, float], args: list):
        if f == "at":
            if len(args) != 1:
                raise SpecError("at(metric, STEP) takes one step")
            step = _number(args[0], "at")
            if step != int(step) or int(step) not in series:
                raise SpecError(f"at: no step {step:g} (steps {min(series)}..{max(series)})")
            return series[int(step)]
        if f in ("mean", "min", "max", "sum"):
            vals = _steps(series, args, f)
            if f == "mean":
                return math.fsum(vals) / len(vals)
            if f == "sum":
                return math.fsum(vals)
            return min(vals) if f == "min" else max(vals)
        if f in ("first_step_above", "first_step_below"):
            return _first_step(series, args, f, f == "first_step_above")
        if f == "mean_defined":
            vals = [v for v in _steps(series, args, f) if not math.isnan(v)]
            if not vals:
                raise SpecError("mean_defined: every step is undefined (nan)")
            return math.fsum(vals) / len(vals)
        if args:
            raise SpecError(f"{f}(metric) takes no other argument")
        steps = sorted(series)
        if f == "first":
            return series[steps[0]]
        if f == "last":
            return series[steps[-1]]
        if f == "count":
            return float(len(steps))
        if f == "undefined":
            return float(sum(1 for step in steps if math.isnan(series[step])))
        if f == "step_of_max":
            return max(steps, key=lambda s: (series[s], -s))
        return min(steps, key=lambda s: (series[s], s))  # step_of_min


def format_value(v: Any, spec: str) -> str:
    if isinstance(v, Bold):
        return "**" + format_value(v.value, spec) + "**"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    if not FORMAT_RE.match(spec):
        raise SpecError(f"format {spec!r} is not a number format (e.g. .3f, ,.0f, .0%, d)")
    if spec.endswith("d") or spec.endswith("n") and "." not in spec:
        if v != v or float(v) != int(v):
            raise SpecError(f"format {spec!r} needs a whole number, got {v!r}")
        return format(int(v), spec)
    if not spec:
        if v == v and v not in (math.inf, -math.inf) and float(v) == int(v):
            return str(int(v))
        return repr(float(v))
    return format(float(v), spec)


def parse_template(template: str) -> list[tuple[str, Any, str]]:
    """``"a {expr:.3f} b"`` -> [("a ", node, ".3f"), (" b", None, "")]."""
    parts, text, i = [], "", 0
    while i < len(template):
        ch = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            text += ch
            i += 2
            continue
        if ch == "}":
            raise SpecError(f"single '}}' in template {template!r} (write '}}}}')")
        if ch != "{":
            text += ch
            i += 1
            continue
        depth, j = 0, i
        while j < len(template):
            if template[j] in "{[(":
                depth += 1
            elif template[j] in "}])":
                depth -= 1
                if depth == 0:
                    break
            elif template[j] in "\"'":
                close = template.find(template[j], j + 1)
                if close < 0:
                    raise SpecError(f"unclosed string in template {template!r}")
                j = close
            j += 1
        if j >= len(template):
            raise SpecError(f"unclosed '{{' in template {template!r}")
        body = template[i + 1:j]
        expr, spec = body, ""
        cut = _format_colon(body)
        if cut is not None:
            expr, spec = body[:cut], body[cut + 1:]
        parts.append((text, Parser(expr).parse(), spec.strip()))
        text = ""
        i = j + 1
    if text:
        parts.append((text, None, ""))
    return parts


def _format_colon(body: str) -> int | None:
    """The position of the ``:`` that starts the format spec: the last one outside brackets and strings."""
    depth, quote, found = 0, None, None
    for k, ch in enumerate(body):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == ":" and depth == 0:
            found = k
    return found


def render_template(template: str, results: Results, where: dict[str, Any]) -> str:
    ev = Evaluator(results, where)
    out = []
    for text, node, spec in parse_template(template):
        out.append(text)
        if node is not None:
            out.append(format_value(ev.eval(node), spec))
    return "".join(out)


# --------------------------------------------------------------------------- specs


@dataclass
class Spec:
    """Every table and value defined in one README's ``tables/`` folder."""

    tables: dict[str, tuple[Path, dict]] = field(default_factory=dict)
    values: dict[str, tuple[Path, dict]] = field(default_factory=dict)
    sources: dict[Path, dict[str, Path]] = field(default_factory=dict)
    _results: dict[tuple, Results] = field(default_factory=dict)

    def results(self, path: Path, names: list[str], where: str) -> Results:
        known = self.sources.get(path, {})
        unknown = [n for n in names if n not in known]
        if unknown:
            raise SpecError(f"{path}: {where}: unknown source(s) {unknown}; `sources:` names {sorted(known)}")
        key = tuple(known[n] for n in names)
        if key not in self._results:
            try:
                self._results[key] = Results({n: known[n] for n in names})
            except SpecError as e:
                raise SpecError(f"{path}: {where}: {e}") from None
        return self._results[key]


def load_specs(folder: Path) -> Spec:
    import yaml

    spec = Spec()
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise SpecError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(data, dict):
            raise SpecError(f"{path}: expected a mapping with sources, tables, values")
        extra = sorted(set(data) - {"sources", "tables", "values"})
        if extra:
            raise SpecError(f"{path}: unknown key(s) {extra}; allowed: sources, tables, values")
        sources = {}
        for name, rel in (data.get("sources") or {}).items():
            rel = str(rel)
            if Path(rel).is_absolute() or not rel.endswith(".csv"):
                raise SpecError(f"{path}: source {name!r}: give a .csv path relative to the spec file, not {rel!r}")
            sources[str(name)] = (path.parent / rel).resolve()
        spec.sources[path] = sources
        for kind in ("tables", "values"):
            for name, body in (data.get(kind) or {}).items():
                target = spec.tables if kind == "tables" else spec.values
                if name in spec.tables or name in spec.values:
                    other = (spec.tables.get(name) or spec.values.get(name))[0]
                    raise SpecError(f"{path}: {name!r} is defined twice (also in {other})")
                if not isinstance(body, dict):
                    raise SpecError(f"{path}: {kind[:-1]} {name!r}: expected a mapping")
                target[str(name)] = (path, body)
    return spec


def _source_names(path: Path, what: str, body: dict) -> list[str]:
    src = body.get("source")
    if src is None:
        raise SpecError(f"{path}: {what}: no `source:`")
    return [str(s) for s in src] if isinstance(src, list) else [str(src)]


def _where(path: Path, what: str, body: Any) -> dict[str, Any]:
    w = body.get("where") if isinstance(body, dict) else None
    if w is None:
        return {}
    if not isinstance(w, dict):
        raise SpecError(f"{path}: {what}: `where` must map parameters to values")
    return {str(k): v for k, v in w.items()}


ALIGN = {"left": "---", "right": "---:", "center": ":---:", None: "---"}
TABLE_KEYS = {"source", "where", "columns", "rows", "comment"}
COLUMN_KEYS = {"header", "cell", "where", "align"}
ROW_KEYS = {"label", "where", "cells"}


def render_table(spec: Spec, name: str) -> str:
    """The Markdown table ``name`` (no trailing newline)."""
    path, body = spec.tables[name]
    where_t = f"table {name}"
    extra = set(body) - TABLE_KEYS
    if extra:
        raise SpecError(f"{path}: {where_t}: unknown key(s) {sorted(extra)}; allowed: {sorted(TABLE_KEYS)}")
    results = spec.results(path, _source_names(path, where_t, body), where_t)
    columns, rows = body.get("columns") or [], body.get("rows") or []
    if not columns or not rows:
        raise SpecError(f"{path}: {where_t}: needs `columns` and `rows`")
    for n, c in enumerate(columns, 1):
        if not isinstance(c, dict) or "header" not in c or set(c) - COLUMN_KEYS:
            raise SpecError(f"{path}: {where_t}: column {n} ({c!r}): each column is a mapping with `header` and optional "
                            f"{sorted(COLUMN_KEYS - {'header'})}")
        if c.get("align") not in ALIGN:
            raise SpecError(f"{path}: {where_t}: column {c['header']!r}: align is left, right or center")
    headers = [str(c["header"]) for c in columns]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(ALIGN[c.get("align")] for c in columns) + "|"]
    base = _where(path, where_t, body)
    for r in rows:
        if not isinstance(r, dict) or "label" not in r or set(r) - ROW_KEYS:
            raise SpecError(f"{path}: {where_t}: each row is a mapping with `label` and optional `where`, `cells`")
        label = str(r["label"])
        own = r.get("cells") or {}
        bad = [h for h in own if h not in headers]
        if bad:
            raise SpecError(f"{path}: {where_t}, row {label!r}: `cells` names unknown column(s) {bad}")
        cells = []
        for c in columns:
            header = str(c["header"])
            template = own.get(header, c.get("cell"))
            if template is None:
                cells.append(label)
                continue
            where = {**base, **_where(path, where_t, r), **_where(path, where_t, c)}
            try:
                cells.append(render_template(str(template), results, where))
            except SpecError as e:
                raise SpecError(f"{path}: {where_t}, row {label!r}, column {header!r}: {e}") from None
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_value(spec: Spec, name: str) -> str:
    path, body = spec.values[name]
    what = f"value {name}"
    extra = set(body) - {"source", "where", "text", "comment"}
    if extra or "text" not in body:
        raise SpecError(f"{path}: {what}: a value has `source`, `text` and optional `where`")
    results = spec.results(path, _source_names(path, what, body), what)
    try:
        return render_template(str(body["text"]), results, _where(path, what, body))
    except SpecError as e:
        raise SpecError(f"{path}: {what}: {e}") from None


# --------------------------------------------------------------------------- READMEs


@dataclass
class Difference:
    readme: Path
    kind: str  # "table", "value", "unmarked"
    name: str
    detail: str

    def __str__(self) -> str:
        return f"{self.readme}: {self.kind} {self.name}: {self.detail}"


def spec_folder(readme: Path) -> Path:
    return readme.parent / SPEC_DIR


def render_readme(readme: Path, spec: Spec | None = None) -> tuple[str, list[Difference]]:
    """The README with every table and value block rendered, and where it differs from the file."""
    text = readme.read_text()
    spec = spec if spec is not None else load_specs(spec_folder(readme))
    diffs: list[Difference] = []

    def table(m: re.Match) -> str:
        name = m.group(2)
        if name not in spec.tables:
            raise SpecError(f"{readme}: table block {name!r} has no spec in {spec_folder(readme)}/*.yaml")
        new = render_table(spec, name) + "\n"
        if m.group(3) != new:
            diffs.append(Difference(readme, "table", name, _first_difference(m.group(3), new)))
        return m.group(1) + new + m.group(4)

    def value(m: re.Match) -> str:
        name = m.group(2)
        if name not in spec.values:
            raise SpecError(f"{readme}: value {name!r} has no spec in {spec_folder(readme)}/*.yaml")
        new = render_value(spec, name)
        if m.group(3) != new:
            diffs.append(Difference(readme, "value", name, f"README has {m.group(3)!r}, results give {new!r}"))
        return m.group(1) + new + m.group(4)

    out = BLOCK_RE.sub(table, text)
    out = VALUE_RE.sub(value, out)
    for line, first in unmarked_tables(out):
        diffs.append(Difference(readme, "unmarked", f"at line {line}",
                               f"a table with numbers ({first[:60]!r}) outside <!-- table: NAME --> and not marked "
                               f"<!-- not-results: WHY --> on the line above"))
    return out, diffs


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _first_difference(old: str, new: str) -> str:
    a, b = old.rstrip("\n").split("\n"), new.rstrip("\n").split("\n")
    headers = _cells(b[0]) if b else []
    for i in range(max(len(a), len(b))):
        la = a[i] if i < len(a) else None
        lb = b[i] if i < len(b) else None
        if la == lb:
            continue
        if la is None or lb is None:
            return f"line {i + 1}: README has {la!r}, results give {lb!r}"
        ca, cb = _cells(la), _cells(lb)
        row = cb[0] if cb else ""
        for j in range(max(len(ca), len(cb))):
            x = ca[j] if j < len(ca) else None
            y = cb[j] if j < len(cb) else None
            if x != y:
                col = headers[j] if j < len(headers) else f"#{j + 1}"
                return f"row {row!r}, column {col!r}: README has {x!r}, results give {y!r}"
        return f"line {i + 1}: README has {la!r}, results give {lb!r}"
    return "whitespace differs"


def unmarked_tables(text: str) -> list[tuple[int, str]]:
    """Markdown tables with a digit outside a rendered block and not marked ``<!-- not-results: ... -->``
    on the closest non-blank line above: (1-based line of the table's first row, that row)."""
    lines = text.split("\n")
    inside, fence, out, i = False, False, [], 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("```"):
            fence = not fence
        if not fence and s.startswith("<!-- table:"):
            inside = True
        elif not fence and s == "<!-- /table -->":
            inside = False
        if fence or inside or not s.startswith("|"):
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].strip().startswith("|"):
            i += 1
        if any(ch.isdigit() for ln in lines[start:i] for ch in ln):
            k = start - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            if k < 0 or not lines[k].strip().startswith(NOT_RESULTS):
                out.append((start + 1, lines[start].strip()))
    return out


def default_files(root: Path) -> list[Path]:
    files = []
    for pattern in DEFAULT_FILES:
        files += sorted(Path(p) for p in glob.glob(str(root / pattern)))
    return files


def tables_command(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="cdpbench tables", description="Render the READMEs' result tables and values "
                                 "from committed results files (<!-- table: NAME --> / <!-- value: NAME --> blocks, "
                                 "specs in tables/*.yaml beside each README).")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="change nothing; exit 1 listing every block that differs "
                      "from its results (first differing cell) and every unmarked table with numbers")
    mode.add_argument("--write", action="store_true", help="rewrite the blocks (the default)")
    ap.add_argument("files", nargs="*", type=Path, help=f"Markdown files (default: {', '.join(DEFAULT_FILES)})")
    args = ap.parse_args(argv)
    files = args.files or default_files(Path.cwd())
    if not files:
        raise CdpbenchError(f"no Markdown file found ({', '.join(DEFAULT_FILES)} under {Path.cwd()})")
    problems: list[Difference] = []
    for readme in files:
        if not readme.is_file():
            raise CdpbenchError(f"no such file: {readme}")
        new, diffs = render_readme(readme)
        if args.check:
            problems += diffs
            continue
        unmarked = [d for d in diffs if d.kind == "unmarked"]
        problems += unmarked
        changed = [d for d in diffs if d.kind != "unmarked"]
        if changed:
            readme.write_text(new)
            print(f"{readme}: rendered {len(changed)} block(s)")
    for p in problems:
        print(p)
    if args.check and not problems:
        print(f"tables: {len(files)} file(s) match their results")
    return 1 if problems else 0
