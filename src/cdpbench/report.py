"""``cdpbench report``: compare the runs of a sweep (or of an experiment).

Draws a chosen metric against release with one line per run, labelled by the parameters that
differ between the runs (the legend sorted by value, identical lines drawn once:
:func:`cdpbench.plots.legend_entries`), writes a summary table of per-run means of every metric
(CSV), saves both under ``outputs/reports/<id>/`` and logs them to the sweep's parent run. Every
figure is a PNG with a PDF and an SVG beside it, and its data as a tidy CSV (one row per point) of
the same name. ``report.html`` beside them is the whole report as one self-contained page (the
figure embedded, the tables, every run's parameters and MLflow link; no scripts, no external
resources): it opens from the file system and can be mailed.

When the sweep ran configurations with several seeds (:mod:`cdpbench.repetitions`), the figure
against release shows per configuration the mean over seeds with its 95% bootstrap band, and
``seeds_<metric>`` tables (CSV, Markdown, LaTeX) give mean and interval per configuration, with a
paired test against ``--baseline`` when asked.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from . import plots, repetitions, tracking
from .errors import CdpbenchError
from .launch import short_override

IGNORED_PARAMS = ("tracking.", "progress", "hydra")


def report_command(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cdpbench report", description="Plot a metric against release for every run of a sweep.")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--parent", help="parent run id of a sweep")
    src.add_argument("--latest", action="store_true", help="the most recent sweep (default)")
    ap.add_argument("--experiment", help="MLflow experiment name: restrict --latest to it, or, with --all-runs, use every run in it")
    ap.add_argument("--all-runs", action="store_true", help="use every job run of --experiment instead of one sweep")
    ap.add_argument("--metric", default=None, help="metric key, or a suffix such as gain_rho (matches snapshot.gain_rho); "
                    "default gain_rho (with --export: every metric; there a comma-separated list of keys, suffixes or globs)")
    ap.add_argument("--against", metavar="PARAM", help="plot the metric's mean over releases against this swept "
                    "parameter (e.g. privacy_model.j, metrics.query_error.selectivity), one line per other configuration")
    ap.add_argument("--at", type=int, metavar="RELEASE", help="with --against: the metric at this release instead of its "
                    "mean over releases (e.g. slicedBucket Fig. 7c: query error at release 10)")
    ap.add_argument("--panels", metavar="PARAMS", help="with --against: one panel per value of these comma-separated "
                    "parameters (e.g. dataset.attributes,dataset.d2 for BCF Fig. 2's six panels), lines told apart by the rest")
    ap.add_argument("--diagonal", action="store_true", help="with --against: draw y = x (e.g. BCF Fig. 1's FA = k boundary)")
    ap.add_argument("--ru", action="store_true", help="an R-U map instead: one point per release and one series per run, "
                    "information loss (--loss, default gcp) against disclosure risk (--risk, default rl); BayFrame Figs. 7/8")
    ap.add_argument("--frontier", action="store_true", help="with --ru: one point per run instead, the mean over "
                    "releases (or the value at --at RELEASE): the privacy-utility frontier of the sweep's defenses")
    ap.add_argument("--loss", default="gcp", help="--ru: the information-loss metric (y axis)")
    ap.add_argument("--risk", default="rl", help="--ru: the disclosure-risk metric (x axis)")
    ap.add_argument("--baseline", metavar="CONFIG", help="with seeds: compare every configuration with this one "
                    "(its label in the seeds table), paired by seed (paired t-test p-value in the table)")
    ap.add_argument("--no-bands", action="store_true", help="with seeds: one line per run instead of mean and band")
    ap.add_argument("--matrix", action="store_true", help="the attack matrix: a heatmap of runs (defenses) x attackers, "
                    "cell = mean over releases of ATTACKER.METRIC (--metric, e.g. gain_rho or share_over_90), "
                    "utility (--utility) beside each row; the table as CSV, Markdown and LaTeX")
    ap.add_argument("--utility", default="gcp_norm,query_error_mean", help="--matrix: utility metrics shown beside each row")
    ap.add_argument("--scale", type=float, metavar="FACTOR", help="multiply the plotted metric (figure and its data CSV) "
                    "by FACTOR, e.g. 100 to draw a fraction as a percentage (with --ylabel 'NCP %%')")
    ap.add_argument("--ylabel", metavar="TEXT", help="the y axis's label instead of the metric key, e.g. 'NCP %%' "
                    "(the unit a preset states)")
    ap.add_argument("--out", type=Path, help="output folder (default outputs/reports/<id>)")
    ap.add_argument("--include-unfinished", action="store_true", help="also use runs that are not FINISHED (failed, running, killed)")
    ap.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI or sqlite under ./outputs")
    ap.add_argument("--export", type=Path, metavar="FILE.csv", help="write the sweep's per-release metrics as a tidy CSV "
                    "(one row per run, metric and release, the swept parameters as columns, the sweep's wall time as "
                    "run 'sweep', metric 'wall_s') instead of drawing; the results file README tables are rendered from "
                    "(`cdpbench tables`)")
    args = ap.parse_args(argv)
    if args.export:
        if args.matrix or args.ru or args.against:
            raise CdpbenchError("--export writes the selected runs' metrics; it does not go with --matrix, --ru or --against")
        return _export_command(args)
    if args.metric is None:
        args.metric = "gain_rho"
    if args.frontier and not args.ru:
        raise CdpbenchError("--frontier goes with --ru (one point per run: --loss against --risk)")
    if args.at is not None and not (args.against or args.frontier):
        raise CdpbenchError("--at RELEASE goes with --against PARAM (the value at that release against the parameter) "
                            "or --ru --frontier")
    if (args.panels or args.diagonal) and not args.against:
        raise CdpbenchError("--panels and --diagonal go with --against PARAM")
    if (args.scale is not None or args.ylabel) and (args.matrix or args.ru):
        raise CdpbenchError("--scale and --ylabel go with a figure of one metric against release or a parameter "
                            "(not --matrix or --ru)")
    if args.scale is not None and not 0 < args.scale < float("inf"):
        raise CdpbenchError(f"--scale takes a positive finite factor (e.g. 100), not {args.scale}")
    uri, c, parent, runs, name = _selected(args)
    from .provenance import source_note

    note = source_note([r.data.tags for r in runs])  # under every figure: the commit and lock of its runs
    token = plots.SOURCE_NOTE.set(note)
    try:
        return _report(args, uri, c, parent, runs, name, note)
    finally:
        plots.SOURCE_NOTE.reset(token)


def _report(args, uri: str, c, parent: str | None, runs: list, name: str, note: str) -> int:
    histories = {r.info.run_id: _histories(c, r) for r in runs}
    labels = _labels(runs)
    scale = 1.0 if args.scale is None else args.scale
    ylabel = args.ylabel or args.metric
    series: dict[str, pd.Series] = {}
    rows = []
    for r in runs:
        hist = histories[r.info.run_id]
        keys = _matching(hist, args.metric)
        for key in keys:
            lab = labels[r.info.run_id] + (f" [{key}]" if len(keys) > 1 else "")
            series[lab] = hist[key] * scale if scale != 1 else hist[key]
        row = {"run": labels[r.info.run_id], "run_id": r.info.run_id, "status": r.info.status}
        row.update({k: float(s.mean()) for k, s in sorted(hist.items())})
        rows.append(row)
    if not series:
        available = sorted({k for h in histories.values() for k in h})
        raise CdpbenchError(f"no run has metric {args.metric!r}; available: {available}")
    out = args.out or Path.cwd() / "outputs" / "reports" / (parent or name)
    out.mkdir(parents=True, exist_ok=True)
    metric_file = args.metric.replace("/", "_")
    tables: list[Path] = []
    if args.matrix:
        png, data, tables = _matrix_report(runs, histories, labels, args, out, name)
    elif args.ru and args.frontier:
        points = _frontier_points(runs, histories, labels, args.risk, args.loss, args.at)
        when = "mean over releases" if args.at is None else f"at release {args.at}"
        png = plots.scatter_plot(points, args.risk, args.loss, out / f"frontier_{args.loss}_{args.risk}.png",
                                 title=f"privacy-utility frontier: {args.loss} against {args.risk}, one point per run "
                                       f"({when}) — {name}")
        data = pd.DataFrame([{"series": lab, args.risk: float(x.iloc[0]), args.loss: float(y.iloc[0])}
                             for lab, (x, y) in sorted(points.items())])
    elif args.ru:
        points = _ru_points(runs, histories, labels, args.risk, args.loss)
        png = plots.scatter_plot(points, args.risk, args.loss, out / f"ru_{args.loss}_{args.risk}.png",
                                 title=f"R-U map: {args.loss} against {args.risk}, one point per release — {name}")
        data = pd.DataFrame([{"series": lab, "release": rel, args.risk: x[rel], args.loss: y[rel]}
                             for lab, (x, y) in sorted(points.items()) for rel in x.index])
    elif args.against:
        if args.ylabel:
            what = f"{args.ylabel}, mean over releases" if args.at is None else f"{args.ylabel} at release {args.at}"
        else:
            what = f"mean {args.metric} over releases" if args.at is None else f"{args.metric} at release {args.at}"
        title = f"{ylabel} against {args.against} — {name}"
        if args.panels:
            panels = [p.strip() for p in args.panels.split(",") if p.strip()]
            groups = _against(runs, histories, args.metric, args.against, args.at, panels=panels)
            groups = {p: {lab: s * scale for lab, s in lines.items()} for p, lines in groups.items()}
            png = plots.panels_plot(groups, what, out / f"{metric_file}_vs_{args.against}_panels.png", title=title,
                                    xlabel=args.against, diagonal=args.diagonal)
            data = pd.concat([_tidy(lines, args.against, what).assign(panel=panel) for panel, lines in sorted(groups.items())],
                             ignore_index=True)[["panel", "series", args.against, what]]
        else:
            series = _against(runs, histories, args.metric, args.against, args.at)
            series = {lab: s * scale for lab, s in series.items()}
            png = plots.lines_plot(series, what, out / f"{metric_file}_vs_{args.against}.png", title=title,
                                   xlabel=args.against, diagonal=args.diagonal)
            data = _tidy(series, args.against, what)
    else:
        groups = None if args.no_bands else repetitions.seed_groups(runs, labels)
        if groups is None and args.baseline:
            raise CdpbenchError("--baseline compares configurations run with several seeds; this sweep has one run per "
                                "configuration (sweep seed='range(0,5)' for five)")
        if groups is None:
            png = plots.lines_plot(series, ylabel, out / f"{metric_file}.png", title=f"{ylabel} against release — {name}")
            data = _tidy(series, "release", ylabel)
        else:
            png, data, tables = _seed_report(groups, histories, args, out, metric_file, name)
    data.to_csv(png.with_suffix(".csv"), index=False)
    csv = out / "summary.csv"
    summary = pd.DataFrame(rows)
    summary.to_csv(csv, index=False)
    page = write_html(out / "report.html", name=name, figure=png, tables=tables, summary=summary, runs=runs,
                      labels=labels, uri=uri, parent=parent, note=note, command=_command_line(args))
    artifacts = [f for f in (png, *(png.with_suffix(ext) for ext in (*plots.FORMATS, ".csv")), *tables, csv, page)
                 if f.exists()]
    if parent:
        for f in artifacts:
            c.log_artifact(parent, str(f), "report")
    print(f"plot:    {png}  (also .pdf and .svg; the plotted data: {png.with_suffix('.csv').name})")
    for f in tables:
        if f.suffix == ".tex":
            what = "defenses x attackers" if f.name.startswith("matrix_") else "per configuration: mean over seeds, 95% CI"
            print(f"table:   {str(f)[:-4]}.csv/.md/.tex  ({what})")
    print(f"summary: {csv}  ({len(rows)} runs; mean of each metric over releases)")
    print(f"html:    {page}  (one self-contained page: the figure, the tables, each run's parameters and MLflow link)")
    print(f"source:  {note}  (under the figure)")
    print(f"browse:  {browse_hint(uri, runs[0].info.experiment_id)}")
    return 0


def _command_line(args) -> str:
    """The ``cdpbench report`` options that drew this report (for the page's header)."""
    import shlex

    words = ["cdpbench", "report"]
    for key, value in vars(args).items():
        if value is None or value is False or key in ("tracking_uri", "out", "export"):
            continue
        if key in ("loss", "risk", "frontier") and not args.ru or key == "utility" and not args.matrix:
            continue
        words.append("--" + key.replace("_", "-"))
        if value is not True:
            words.append(f"{value:g}" if isinstance(value, float) else str(value))
    return shlex.join(words)


# ------------------------------------------------------------------------------------ the HTML page

_CSS = """
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; margin: 1.2em 0 .3em; }
.meta { color: #555; } .meta code, td code { font-size: .92em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: .9em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: .88em; margin: .5em 0; }
th, td { border-bottom: 1px solid #e4e4e4; padding: .25em .6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f6f6f6; }
details { margin: .3em 0 1em; } summary { cursor: pointer; color: #333; }
.status-FINISHED { color: #2a7a2a; } .status-FAILED, .status-KILLED { color: #b22; }
"""


def _esc(value) -> str:
    """Every text that comes from runs, parameters or the command line, escaped for HTML
    (attribute values included)."""
    import html

    return html.escape(str(value), quote=True)


def ui_page(experiment_id: str, run_id: str | None = None) -> str:
    """The MLflow UI page of an experiment's runs list, or of one run (``#/experiments/ID`` alone
    opens MLflow 3's GenAI overview, not the runs)."""
    return f"#/experiments/{experiment_id}/runs" + (f"/{run_id}" if run_id else "")


def ui_link(uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """The MLflow UI address of an experiment's runs list (or of one run): the tracking server's
    own address without its credentials, else the address ``mlflow ui`` serves a local store on."""
    from urllib.parse import urlsplit

    page = ui_page(experiment_id, run_id)
    if uri.startswith(("http://", "https://")):
        parts = urlsplit(uri)
        host = parts.netloc.rpartition("@")[2]
        return f"{parts.scheme}://{host}{parts.path.rstrip('/')}/{page}"
    return f"http://127.0.0.1:5000/{page}"


def _cell(value) -> str:
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        v = float(value)
        text = "" if v != v else (f"{v:.4g}" if abs(v) < 1e5 else f"{v:.4e}")
        return f'<td class="num">{_esc(text)}</td>'
    return f"<td>{_esc('' if value is None or value != value else value)}</td>"


def _html_table(frame: pd.DataFrame, anchors: list[str] | None = None) -> str:
    """``frame`` as an HTML table (numbers right-aligned, 4 significant digits); with ``anchors``,
    each row's first cell links to that anchor of the page."""
    head = "".join(f"<th>{_esc(c)}</th>" for c in frame.columns)
    rows = []
    for i, row in enumerate(frame.itertuples(index=False)):
        cells = [_cell(v) for v in row]
        if anchors and cells:
            cells[0] = f'<td><a href="#{_esc(anchors[i])}">{_esc(row[0])}</a></td>'
        rows.append("<tr>" + "".join(cells) + "</tr>\n")
    body = "".join(rows)
    return f'<div class="scroll"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table></div>'


def write_html(path: Path, *, name: str, figure: Path, tables: list[Path], summary: pd.DataFrame, runs: list,
               labels: dict[str, str], uri: str, parent: str | None, note: str, command: str) -> Path:
    """The report as one self-contained HTML page at ``path``: the figure (PNG, base64 in the
    page), the tables (``tables``' CSVs, the per-run summary), and per run its label, name,
    status, MLflow link, command-line overrides and every parameter. No script, no style sheet
    or image from elsewhere: the only addresses in it are the MLflow links. Every text from the
    runs is escaped."""
    import base64
    import datetime as dt

    experiment = runs[0].info.experiment_id
    served = "" if uri.startswith(("http://", "https://")) else (
        f' (served by <code>mlflow ui --backend-store-uri {_esc(tracking.redact_uri(uri))}</code>)')
    when = ""
    if parent:
        start = min((r.info.start_time for r in runs if r.info.start_time), default=None)
        if start:
            when = f", started {dt.datetime.fromtimestamp(start / 1000, dt.timezone.utc):%Y-%m-%d %H:%M} UTC"
    order = {lab: i for i, (_, members) in enumerate(plots.legend_entries({lab: None for lab in labels.values()},
                                                                          merge=False)[1]) for lab in members}
    ordered = sorted(runs, key=lambda r: (order.get(labels[r.info.run_id], len(order)), r.info.run_id))
    png = base64.b64encode(figure.read_bytes()).decode("ascii")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(name)} — cdpbench report</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{_esc(name)}</h1>",
        f'<p class="meta">{len(runs)} runs{_esc(when)} · MLflow experiment {_esc(experiment)}: '
        f'<a href="{_esc(ui_link(uri, experiment))}">the runs list</a>'
        + (f' · <a href="{_esc(ui_link(uri, experiment, parent))}">the sweep\'s parent run</a>' if parent else "")
        + f"{served}</p>",
        f'<p class="meta">drawn by <code>{_esc(command)}</code><br>{_esc(note)}</p>',
        "<h2>Figure</h2>",
        f'<figure><img alt="{_esc(figure.stem)}" src="data:image/png;base64,{png}">',
        f"<figcaption>{_esc(figure.name)}; its data: {_esc(figure.with_suffix('.csv').name)}; also as "
        f"{_esc(figure.with_suffix('.pdf').name)} and {_esc(figure.with_suffix('.svg').name)}</figcaption></figure>",
    ]
    for table in tables:
        if table.suffix == ".csv" and table.exists():
            parts += [f"<h2>Table: {_esc(table.stem)}</h2>", _html_table(pd.read_csv(table))]
    rank = {r.info.run_id: i for i, r in enumerate(ordered)}
    shown = summary.assign(_rank=summary["run_id"].map(rank)).sort_values("_rank", kind="stable")
    parts += ["<h2>Runs: mean of each metric over releases</h2>",
              _html_table(shown.drop(columns=["_rank", "run_id"]), anchors=[f"run-{i}" for i in shown["run_id"]])]
    parts.append("<h2>Runs: configuration and MLflow link</h2>")
    for r in ordered:
        rid = r.info.run_id
        params = sorted(r.data.params.items())
        overrides = r.data.tags.get("cdpbench.overrides")
        status = r.info.status
        parts += [
            f'<h3 id="run-{_esc(rid)}">{_esc(labels[rid])}</h3>',
            "<table>",
            f"<tr><th>run</th><td>{_esc(r.info.run_name or '')}</td></tr>",
            f'<tr><th>status</th><td class="status-{_esc(status)}">{_esc(status)}</td></tr>',
            f'<tr><th>MLflow</th><td><a href="{_esc(ui_link(uri, r.info.experiment_id, rid))}">run {_esc(rid)}</a></td></tr>',
            *([f"<tr><th>overrides</th><td><code>{_esc(overrides)}</code></td></tr>"] if overrides else []),
            "</table>",
            f"<details><summary>{len(params)} parameters</summary>",
            _html_table(pd.DataFrame(params, columns=["parameter", "value"])),
            "</details>",
        ]
    parts += ["</body>", "</html>", ""]
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _selected(args):
    """``(uri, client, parent, runs, name)``: the store (never created) and the runs the
    arguments select (FINISHED ones unless ``--include-unfinished``)."""
    uri = args.tracking_uri or tracking.tracking_uri(root=Path.cwd())
    existing_store(uri, args.tracking_uri)
    c = tracking.client(uri)
    parent, runs, name = _select_runs(c, args)
    if not args.include_unfinished:
        runs = _finished(runs, name)
    return uri, c, parent, runs, name


def _export_command(args) -> int:
    uri, c, parent, runs, name = _selected(args)
    patterns = [p.strip() for p in (args.metric or "").split(",") if p.strip()]
    histories = {}
    for r in runs:
        keys = [k for k in r.data.metrics if not patterns or any(_matches(k, p) for p in patterns)]
        histories[r.info.run_id] = _histories(c, r, keys)
    if not any(histories.values()):
        available = sorted({k for r in runs for k in r.data.metrics})
        raise CdpbenchError(f"no run has a metric matching {args.metric!r}; available: {available}")
    wall = None
    if parent:
        info = c.get_run(parent).info
        if info.end_time and info.start_time:
            wall = (info.end_time - info.start_time) / 1000.0
    table = export_table(runs, histories, _sweep_params(runs), wall)
    args.export.parent.mkdir(parents=True, exist_ok=True)
    args.export.write_text(table)
    n = table.count("\n") - 1
    print(f"export:  {args.export}  ({len(runs)} runs of {name}, {n} rows)")
    return 0


def existing_store(uri: str, given: str | None = None, command: str = "report") -> None:
    """A local store (a SQLite file, a file store folder) must exist: ``command`` (``report``,
    ``reproduce``) reads runs and never creates a store (MLflow would create an empty database at
    a mistyped path)."""
    import os
    from urllib.parse import unquote, urlsplit

    if uri.startswith("sqlite:"):
        if not uri.startswith("sqlite:///"):
            return  # in memory, or a URI form MLflow resolves itself
        path = Path(unquote(uri[len("sqlite:///"):].split("?", 1)[0]))
        kind = "SQLite store"
    elif uri.startswith("file:") or "://" not in uri:
        path = Path(unquote(urlsplit(uri).path) if uri.startswith("file:") else uri)
        kind = "file store"
    else:
        return  # a server or database: nothing is created by reading it
    if not path.exists():
        where = "--tracking-uri" if given else ("MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI")
                                                else "the default store")
        raise CdpbenchError(f"{command}: no MLflow {kind} at {str(path)[:120]} (from {where}); {command} never creates "
                            f"a store: check the path")


def _matches(key: str, pattern: str) -> bool:
    """A metric key against one ``--metric`` pattern: the key itself, a suffix after a dot
    (``gain_rho`` matches ``dk3.gain_rho``) or a glob (``dk*.gain_rho``)."""
    import fnmatch

    if key == pattern or key.endswith("." + pattern):
        return True
    return any(ch in pattern for ch in "*?[") and fnmatch.fnmatchcase(key, pattern)


def _sweep_params(runs) -> dict[str, dict[str, str]]:
    """Per run id, the parameters that vary between the runs, by short name: the jobs'
    command-line overrides (``+experiment/js_reduce/method=js_reduce`` -> ``method``), else the
    flattened parameters that differ."""
    overrides = [r.data.tags.get("cdpbench.overrides") for r in runs]
    if all(o is not None for o in overrides):
        tokens = [o.split() for o in overrides]
        common = set.intersection(*(set(t) for t in tokens)) if tokens else set()
        out = {}
        for r, toks in zip(runs, tokens):
            pairs = [short_override(t).partition("=") for t in toks if t not in common and "=" in t]
            out[r.info.run_id] = {k: v for k, _, v in pairs}
        return out
    params = [{k: v for k, v in r.data.params.items() if not k.startswith(IGNORED_PARAMS)} for r in runs]
    varying = sorted({k for p in params for k in p if len({q.get(k) for q in params}) > 1})
    return {r.info.run_id: {k: p.get(k, "") for k in varying} for r, p in zip(runs, params)}


EXPORT_FIXED = ("run", "metric", "step", "value")


def export_table(runs, histories, params: dict[str, dict[str, str]], wall: float | None) -> str:
    """The tidy CSV text of :func:`_export_command`: columns ``run``, the swept parameters
    (sorted), ``metric``, ``step``, ``value``; rows sorted by run label, metric and step; values
    as ``repr`` of the float (full precision), so the same store gives the same bytes."""
    import csv
    import io

    labels = _labels(runs)
    names = sorted({k for p in params.values() for k in p})
    clash = [n for n in names if n in EXPORT_FIXED]
    if clash:
        raise CdpbenchError(f"--export: swept parameter(s) {clash} clash with the CSV's own columns {list(EXPORT_FIXED)}")
    rows = []
    for r in runs:
        p = params.get(r.info.run_id, {})
        for key, s in histories[r.info.run_id].items():
            for step, v in s.items():
                rows.append((labels[r.info.run_id], *(p.get(n, "") for n in names), key, int(step), repr(float(v))))
    rows.sort(key=lambda row: (row[0], *row[1:-3], row[-3], row[-2]))
    if wall is not None:
        rows.append(("sweep", *("" for _ in names), "wall_s", 0, repr(round(wall, 1))))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["run", *names, "metric", "step", "value"])
    w.writerows(rows)
    return buf.getvalue()


def _matrix_report(runs, histories, labels, args, out: Path, name: str):
    """The attack matrix of a sweep: rows = configurations (a seed sweep's seeds averaged),
    columns = every attacker label ``L`` some run has ``L.<metric>`` for, cell = mean over
    releases (and seeds); utility beside; heatmap, tidy CSV and the table in three formats."""
    metric = args.metric.split(".")[-1] if "." in args.metric else args.metric
    groups = repetitions.seed_groups(runs, labels) or {labels[r.info.run_id]: [r] for r in runs}
    attackers = sorted({k[: -len(metric) - 1] for h in histories.values() for k in h if k.endswith("." + metric)})
    if not attackers:
        raise CdpbenchError(f"--matrix: no run has an attacker metric '<attacker>.{metric}'")
    utility = [u.strip() for u in args.utility.split(",") if u.strip()]

    def mean_of(key: str, g) -> float:
        vals = [float(histories[r.info.run_id][key].mean()) for r in g if key in histories[r.info.run_id]]
        return float(np.mean(vals)) if vals else float("nan")

    rows = [lab for _, members in plots.legend_entries(dict.fromkeys(groups), merge=False)[1] for lab in members]
    cells = pd.DataFrame([[mean_of(f"{a}.{metric}", groups[r]) for a in attackers] for r in rows], index=rows, columns=attackers)
    util = pd.DataFrame([[mean_of(u, groups[r]) for u in utility] for r in rows], index=rows, columns=utility)
    util = util.loc[:, util.notna().any()]
    stem = out / f"matrix_{metric}"
    png = plots.matrix_plot(cells, util, metric, Path(f"{stem}.png"), title=f"attack matrix: {metric} — {name}")
    data = cells.stack(future_stack=True).rename("value").reset_index()
    data.columns = ["defense", "attacker", metric]
    table = pd.concat([cells, util], axis=1).reset_index(names="defense")
    tables = [Path(f"{stem}_table{ext}") for ext in (".csv", ".md", ".tex")]
    table.to_csv(tables[0], index=False)
    shown = table.copy()
    for col in shown.columns[1:]:
        shown[col] = [("" if v != v else f"{v:.3f}") for v in shown[col]]
    tables[1].write_text(repetitions.markdown_table(shown))
    tables[2].write_text(repetitions.latex_table(shown))
    return png, data, tables


def _tidy(series: dict[str, pd.Series], x: str, y: str) -> pd.DataFrame:
    """A figure's lines as a tidy table: one row per point (series, x, y)."""
    return pd.DataFrame([{"series": lab, x: i, y: v} for lab, s in sorted(series.items()) for i, v in s.items()],
                        columns=["series", x, y])


def _seed_report(groups, histories, args, out: Path, metric_file: str, name: str):
    """The figure against release with one band per configuration, its data, and the seeds
    tables of every metric key matching ``--metric``."""
    keys = sorted({k for h in histories.values() for k in _matching(h, args.metric)})
    bands, tables = {}, []
    for key in keys:
        def pick(hist, key=key):
            return key if key in hist else None

        for label, b in repetitions.bands(groups, histories, pick).items():
            if args.scale is not None:  # the figure and its data in the unit asked for (the tables keep the metric's)
                b = b.assign(**{col: b[col] * args.scale for col in ("mean", "low", "high")})
            bands[label + (f" [{key}]" if len(keys) > 1 else "")] = b
        table = repetitions.summary(groups, histories, pick, args.baseline)
        tables += repetitions.write_tables(table, key, out / f"seeds_{key.replace('/', '_')}")
    n = max(len(g) for g in groups.values())
    png = plots.band_plot(bands, f"{args.ylabel or args.metric} (mean over seeds, 95% CI)", out / f"{metric_file}.png",
                          title=f"{args.metric} against release: mean of {n} seeds, 95% bootstrap band — {name}")
    data = pd.concat([b.reset_index(names="release").assign(series=lab) for lab, b in sorted(bands.items())],
                     ignore_index=True)[["series", "release", "mean", "low", "high", "n"]]
    return png, data, tables


def _ru_points(runs, histories, labels, risk: str, loss: str) -> dict[str, tuple[pd.Series, pd.Series]]:
    """Per run: (risk, loss) per release, matched on the release; runs lacking either are left out."""
    points = {}
    for r in runs:
        hist = histories[r.info.run_id]
        x_keys, y_keys = _matching(hist, risk), _matching(hist, loss)
        if len(x_keys) != 1 or len(y_keys) != 1:
            continue
        x, y = hist[x_keys[0]].align(hist[y_keys[0]], join="inner")
        points[labels[r.info.run_id]] = (x, y)
    if not points:
        raise CdpbenchError(f"no run has exactly one metric matching {risk!r} and one matching {loss!r} (--risk/--loss)")
    return points


def _frontier_points(runs, histories, labels, risk: str, loss: str, at: int | None) -> dict[str, tuple[pd.Series, pd.Series]]:
    """Per run one point: (risk, loss), each the mean over the releases both are recorded at, or
    their values at release ``at`` (:func:`_ru_points` pairs them per release)."""
    points = {}
    for lab, (x, y) in _ru_points(runs, histories, labels, risk, loss).items():
        if at is not None:
            if at not in x.index:
                raise CdpbenchError(f"--at {at}: run {lab} has {risk!r} and {loss!r} at releases "
                                    f"{int(x.index.min())}..{int(x.index.max())} only")
            x, y = x.loc[[at]], y.loc[[at]]
        points[lab] = (pd.Series([float(x.mean())]), pd.Series([float(y.mean())]))
    return points


def browse_hint(uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """Where to look at the runs: a tracking server's own UI, else the ``mlflow ui`` command that
    serves the store (``mlflow ui --backend-store-uri http://...`` does not work). The link opens
    the experiment's runs list (``#/experiments/ID`` alone opens MLflow 3's GenAI overview, not
    the runs), or the run ``run_id``. Credentials in the URI are shown as ``***``
    (:func:`cdpbench.tracking.redact_uri`)."""
    uri = tracking.redact_uri(uri)
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/{ui_page(experiment_id, run_id)}"
    mlflow_cmd = Path(sys.executable).parent / "mlflow"
    mlflow_cmd = str(mlflow_cmd) if mlflow_cmd.exists() else "mlflow"
    return f"{mlflow_cmd} ui --backend-store-uri {uri}   (then open {ui_link(uri, experiment_id, run_id)})"


def _finished(runs: list, name: str) -> list:
    """The FINISHED runs; says on stdout how many others it left out and why."""
    kept = [r for r in runs if r.info.status == "FINISHED"]
    statuses = Counter(r.info.status for r in runs if r.info.status != "FINISHED")
    if not kept:
        raise CdpbenchError(f"no FINISHED run in {name} ({_counts(statuses)}); --include-unfinished to use them anyway")
    n = sum(statuses.values())
    if n:
        that, it = ("run that is", "it") if n == 1 else ("runs that are", "them")
        print(f"left out {n} {that} not FINISHED ({_counts(statuses)}); --include-unfinished to include {it}")
    return kept


def _counts(statuses: Counter) -> str:
    return ", ".join(f"{k} {s}" for s, k in sorted(statuses.items()))


def _against(runs, histories, metric: str, param: str, at: int | None = None, panels: list[str] | None = None):
    """Per configuration (runs equal but for ``param``), the mean of ``metric`` over releases (or
    its value at release ``at``) against the value of ``param``. Configurations are told apart by
    the jobs' command-line overrides other than ``param`` (labelled by those not shared by all,
    as :func:`_labels` does), else by their other parameters.

    With ``panels`` (parameter names, full or as shown in labels, e.g. ``method``): a dict
    ``{panel label: {line label: series}}``, one panel per combination of their values."""
    overrides = [r.data.tags.get("cdpbench.overrides") for r in runs]
    by_tags = all(o is not None for o in overrides)
    points: dict[str, dict[float, float]] = {}
    for r, tags in zip(runs, overrides):
        if param not in r.data.params:
            raise CdpbenchError(f"run {r.info.run_id} has no parameter {param!r}")
        try:
            x = float(r.data.params[param])
        except ValueError:
            raise CdpbenchError(f"parameter {param!r} is not numeric ({r.data.params[param]!r})") from None
        if by_tags:
            config = " ".join(t for t in tags.split() if t.lstrip("+~").partition("=")[0] != param)
        else:
            others = {k: v for k, v in r.data.params.items() if k != param and not k.startswith(IGNORED_PARAMS)}
            config = _config_key(others)
        hist = histories[r.info.run_id]
        for key in _matching(hist, metric):
            series = hist[key]
            if at is not None and at not in series.index:
                raise CdpbenchError(f"--at {at}: run {r.info.run_id} has {metric!r} at releases "
                                    f"{int(series.index.min())}..{int(series.index.max())} only")
            y = float(series.mean()) if at is None else float(series.loc[at])
            points.setdefault(config + (f" [{key}]" if key != metric else ""), {})[x] = y
    if panels:
        return _panel_groups(points, panels, by_tags)
    labels = _short_override_labels(list(points)) if by_tags else _short_config_labels(list(points))
    return {labels[k]: pd.Series(v).sort_index() for k, v in points.items()}


def _panel_groups(points: dict[str, dict[float, float]], panels: list[str], by_tags: bool) -> dict[str, dict[str, pd.Series]]:
    sep = " " if by_tags else "|"

    def names(token: str) -> set[str]:
        full = token.lstrip("+~").partition("=")[0]
        return {full, short_override(token).partition("=")[0]} if by_tags else {full}

    grouped: dict[str, dict[str, dict[float, float]]] = {}
    for key, pts in points.items():
        base, _, suffix = key.partition(" [")
        toks = [t for t in base.split(sep) if t]
        inside = [t for t in toks if names(t) & set(panels)]
        rest = sep.join(t for t in toks if not names(t) & set(panels)) + (" [" + suffix if suffix else "")
        panel = " ".join(short_override(t) if by_tags else t for t in inside) or "all runs"
        grouped.setdefault(panel, {})[rest] = pts
    found = {n for key in points for t in key.partition(" [")[0].split(sep) if t for n in names(t)}
    missing = [p for p in panels if p not in found]
    if missing:
        raise CdpbenchError(f"--panels: no run varies {missing}; the swept parameters are {sorted(found)}")
    out = {}
    for panel, pts in grouped.items():
        labels = _short_override_labels(list(pts)) if by_tags else _short_config_labels(list(pts))
        out[panel] = {labels[k]: pd.Series(v).sort_index() for k, v in pts.items()}
    return out


def _short_override_labels(keys: list[str]) -> dict[str, str]:
    """Keep only the overrides that differ between configurations (``method=sliced_bucket``)."""
    tokens = [k.split(" [")[0].split() for k in keys]
    common = set.intersection(*(set(t) for t in tokens)) if tokens else set()
    out = {}
    for k, toks in zip(keys, tokens):
        suffix = (" [" + k.split(" [", 1)[1]) if " [" in k else ""
        out[k] = (" ".join(short_override(t) for t in toks if t not in common) or "all runs") + suffix
    return out


def _config_key(params: dict[str, str]) -> str:
    return "|".join(f"{k}={v}" for k, v in sorted(params.items()))


def _short_config_labels(keys: list[str]) -> dict[str, str]:
    """Keep only the ``k=v`` parts that differ between configurations."""
    parts = [dict(p.split("=", 1) for p in k.split(" [")[0].split("|") if "=" in p) for k in keys]
    varying = sorted({name for p in parts for name in p if len({q.get(name) for q in parts}) > 1})
    out = {}
    for k, p in zip(keys, parts):
        suffix = (" [" + k.split(" [", 1)[1]) if " [" in k else ""
        out[k] = (", ".join(f"{n.removesuffix('.name')}={p.get(n)}" for n in varying) or "all runs") + suffix
    return out


def _select_runs(c, args):
    exp_ids = experiment_ids(c, args.experiment)
    if args.all_runs:
        if not args.experiment:
            raise CdpbenchError("--all-runs needs --experiment NAME")
        runs = c.search_runs(exp_ids, filter_string="tags.`cdpbench.kind` = 'job'", max_results=5000)
        if not runs:
            raise CdpbenchError(f"experiment {args.experiment!r} has no runs")
        return None, runs, args.experiment
    return sweep_runs(c, exp_ids, args.parent)


def experiment_ids(c, experiment: str | None = None) -> list[str]:
    """The id of the MLflow experiment named ``experiment`` (a one-line error naming the
    experiments there are when there is none), else the ids of every experiment."""
    if not experiment:
        return [e.experiment_id for e in c.search_experiments()]
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        raise CdpbenchError(f"no MLflow experiment named {experiment!r}; have: {[e.name for e in c.search_experiments()]}")
    return [exp.experiment_id]


def sweep_runs(c, exp_ids: list[str], parent: str | None = None, preset: str | None = None):
    """``(parent, runs, name)``: the job runs of the sweep whose parent run is ``parent`` (its
    children and the runs it skipped as already FINISHED), else of the latest sweep in the
    experiments ``exp_ids`` (:func:`latest_sweep`, of ``preset`` when given); ``name`` is the
    parent run's name."""
    if parent:
        try:
            exp_ids = [c.get_run(parent).info.experiment_id]
        except Exception:
            raise CdpbenchError(f"no MLflow run with id {parent!r} in {tracking.redact_uri(c.tracking_uri)}") from None
    else:
        parent = latest_sweep(c, exp_ids, preset)
    runs = c.search_runs(exp_ids, filter_string=f"tags.mlflow.parentRunId = '{parent}'", max_results=5000)
    runs += _skipped_runs(c, parent)
    if not runs:
        raise CdpbenchError(f"sweep {parent} has no child runs")
    return parent, runs, c.get_run(parent).info.run_name or parent


def latest_sweep(c, exp_ids: list[str], preset: str | None = None) -> str:
    """The parent run id of the sweep started last in the experiments ``exp_ids``; with
    ``preset``, of the last sweep of that preset (the ``+experiment=PRESET`` of its command line,
    tag ``cdpbench.overrides``; tag ``cdpbench.preset`` where the parent run has it)."""
    where = "tags.`cdpbench.kind` = 'sweep'"
    if preset:  # LIKE narrows the search ('_' matches any character there): the preset is compared below
        where += f" and tags.`cdpbench.overrides` LIKE '%experiment={preset.replace(chr(39), '')}%'"
    sweeps = c.search_runs(exp_ids, filter_string=where, order_by=["attributes.start_time DESC"],
                           max_results=1 if not preset else 200)
    if preset:
        sweeps = [s for s in sweeps if _sweep_preset(s.data.tags) == preset]
    if not sweeps:
        of = f" of preset {preset!r}" if preset else ""
        command = f"cdpbench -m +experiment={preset}" if preset else "cdpbench -m ..."
        raise CdpbenchError(f"no sweep{of} found in {tracking.redact_uri(c.tracking_uri)}; run one with `{command}` first")
    return sweeps[0].info.run_id


def _sweep_preset(tags: dict[str, str]) -> str | None:
    """The preset a sweep's parent run ran: its tag ``cdpbench.preset``, else the last
    ``+experiment=`` of its command line (tag ``cdpbench.overrides``)."""
    if tags.get("cdpbench.preset"):
        return tags["cdpbench.preset"]
    values = [t.partition("=")[2] for t in tags.get("cdpbench.overrides", "").split()
              if t.lstrip("+").partition("=")[0] == "experiment"]
    return values[-1] if values else None


def _skipped_runs(c, parent: str) -> list:
    """The runs a resumed sweep skipped because they were already FINISHED (listed on its parent
    run by the recorder): part of the sweep for its report."""
    from .recorder import SKIPPED_TAG

    tags = c.get_run(parent).data.tags
    ids = [i for k in sorted(tags) if k.startswith(SKIPPED_TAG + ".") for i in tags[k].split(",") if i]
    out = []
    for run_id in dict.fromkeys(ids):
        try:
            out.append(c.get_run(run_id))
        except Exception:  # deleted since: the report says what it has
            continue
    return out


def _histories(c, run, keys=None) -> dict[str, pd.Series]:
    out = {}
    for key in (run.data.metrics if keys is None else keys):
        hist = c.get_metric_history(run.info.run_id, key)
        s = pd.Series({m.step: m.value for m in hist}).sort_index()
        s.index.name = "release"
        out[key] = s
    return out


def _matching(hist: dict[str, pd.Series], metric: str) -> list[str]:
    if metric in hist:
        return [metric]
    return sorted(k for k in hist if k.endswith("." + metric))


def _labels(runs) -> dict[str, str]:
    """Label runs by what differs between them: the command-line overrides of each job that are
    not shared by every job (e.g. ``privacy_model=l_diversity privacy_model.k=5``); runs without
    that tag fall back to the flattened parameters that differ."""
    overrides = [r.data.tags.get("cdpbench.overrides") for r in runs]
    if all(o is not None for o in overrides):
        tokens = [o.split() for o in overrides]
        common = set.intersection(*(set(t) for t in tokens)) if tokens else set()
        labels = [" ".join(short_override(t) for t in toks if t not in common) for toks in tokens]
        if len(set(labels)) == len(labels):
            return {r.info.run_id: lab or (r.info.run_name or r.info.run_id[:8]) for r, lab in zip(runs, labels)}
    params = [{k: v for k, v in r.data.params.items() if not k.startswith(IGNORED_PARAMS)} for r in runs]
    keys = sorted({k for p in params for k in p})
    varying = [k for k in keys if len({p.get(k) for p in params}) > 1]
    out = {}
    for r, p in zip(runs, params):
        parts = [f"{k.removesuffix('.name')}={p[k]}" for k in varying if k in p]
        out[r.info.run_id] = ", ".join(parts) or r.info.run_name or r.info.run_id[:8]
    return out
