"""Self-contained HTML report of a run or a sweep directory.

The HTML has no external references: figures are embedded as base64 PNG ``<img>`` data URIs,
tables are plain HTML, the manifest is shown as JSON. Every report states the metric version
and the benchmarks version it was computed with. The file is written atomically (a temporary
file in the same directory, then renamed), so a failed report never leaves a half-written file.
"""

from __future__ import annotations

import base64
import html
import json
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

from governed_broker import __version__
from governed_broker.analysis.benchmarks import BenchmarkFit, BenchmarkSet, load_benchmarks
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import is_sweep_dir, load_run, load_sweep
from governed_broker.analysis.plots import (
    figure_to_png,
    plot_governance,
    plot_group_bands,
    plot_institutions,
    plot_label_distribution,
    plot_losses,
    plot_sobol,
    plot_trajectories,
)
from governed_broker.analysis.policy import ARM, branch_record, paired_arm_differences
from governed_broker.analysis.replicates import summarise_replicates
from governed_broker.analysis.sensitivity import OUTCOMES, run_outcomes, sobol_indices
from governed_broker.analysis.summary import summarise_run
from governed_broker.analysis.validity_report import card_section, read_card, run_section
from governed_broker.analysis.version import METRIC_VERSION
from governed_broker.validity.store import CARD_FILE

REPORT_FILE = "report.html"
#: Where ``governed-broker explore DIR`` serves by default (the explorer's first free port);
#: the report's "explore" links point there, with the view named in the address.
EXPLORER_URL = "http://127.0.0.1:8765/"

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3}
.in_range{background:#e5f5e0}.out_of_range{background:#fee0d2}.not_computable{color:#777}
.flag{color:#b30000;font-weight:bold}
pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:0.8em}
img{max-width:100%}
"""


def _img(png: bytes, alt: str, bar=None) -> str:
    if bar is not None:
        bar.update(1)
    data = base64.b64encode(png).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def _table(frame: pd.DataFrame, digits: int = 3) -> str:
    return frame.to_html(index=False, float_format=lambda v: f"{v:.{digits}f}", na_rep="",
                         border=0, escape=True)


def _fit_html(fit: BenchmarkFit) -> str:
    rows = []
    for r in fit.table.itertuples():
        value = "" if pd.isna(r.value) else f"{r.value:.3f}"
        cells = [r.id, r.name, value, f"{r.low:.2f}-{r.high:.2f}", f"{r.weight:g}",
                 r.status.replace("_", " "), str(r.n), r.note, r.source]
        tds = "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
        rows.append(f'<tr class="{r.status}">{tds}</tr>')
    head = "".join(f"<th>{h}</th>" for h in ("id", "target", "value", "range", "weight",
                                             "status", "n", "note", "source"))
    score = "no computable target" if fit.score is None else (
        f"{fit.score:.3f} (pass mark {fit.pass_mark:.2f}: "
        f"{'passed' if fit.passed else 'not passed'})"
    )
    flags = []
    for f in fit.flags.itertuples():
        if f.flagged is None or pd.isna(f.flagged):
            state = "not computable"
        else:
            state = '<span class="flag">FLAGGED</span>' if f.flagged else "not flagged"
        value = "" if f.value is None or pd.isna(f.value) else f" (value {f.value:.3f})"
        flags.append(f"<li>{html.escape(f.signature)}: {state}{value} - "
                     f"{html.escape(f.description)}</li>")
    return (
        f"<p>Benchmark score (weighted share of computable targets in range): {score}; "
        f"computable weight {fit.computable_weight:g}. "
        f"Benchmarks {html.escape(fit.benchmarks_version)}."
        f"</p><table><tr>{head}</tr>{''.join(rows)}</table>"
        f"<h3>Failure signatures</h3><ul>{''.join(flags)}</ul>"
    )


def _explore(query: str, what: str, directory: Path) -> str:
    """A link from a figure to the explorer's view of the same data."""
    href = html.escape(EXPLORER_URL + "?" + query, quote=True)
    command = html.escape(f"governed-broker explore {directory}")
    return (f'<p class="explore"><a href="{href}">Explore {html.escape(what)}</a> in the run '
            f"explorer (start it first: <code>{command}</code>).</p>")


def _page(title: str, body: list[str]) -> str:
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>governed_broker {__version__}; metric definitions {METRIC_VERSION}.</p>"
        + "\n".join(body)
        + "</body></html>"
    )


def _hindcast_html(run, targets_path: Path | None, bar=None) -> list[str]:
    """The observed-vs-simulated section of a run with hindcast targets; empty without.

    Its experiment's ``calibration.targets``, or ``targets_path``.
    """
    from governed_broker.analysis.hindcast import (
        load_targets,
        plot_hindcast,
        run_measures,
        score_measures,
    )

    if targets_path is None:
        named = (run.config or {}).get("calibration") or {}
        base = (run.manifest or {}).get("config_base_dir")
        if not named.get("targets") or not base:
            return []
        targets_path = Path(base) / named["targets"]
    targets = load_targets(targets_path)
    measures = run_measures(run.agents, targets)
    score = score_measures([measures], targets)
    rmse = pd.DataFrame([{"series": k, "rmse (fraction)": v} for k, v in score.rmse.items()])
    table = score.table.drop(columns=["runs_sd", "n_runs"])
    return [
        "<h2>Hindcast: observed vs simulated</h2>",
        f"<p>{html.escape(targets.name)} (targets {html.escape(targets.version)}); largest "
        f"implausibility {score.max_implausibility:.3g} (cutoff {targets.cutoff:g}; one run: "
        "replicates and calibration: <code>governed-broker calibrate</code>).</p>",
        _img(figure_to_png(plot_hindcast({"simulated": [measures]}, targets)),
             "observed vs simulated take-up", bar),
        _table(rmse, 4), _table(table, 3),
        f"<p><small>{html.escape(targets.notice)}</small></p>" if targets.notice else "",
    ]


def run_report_html(path: Path | str, bench: BenchmarkSet | None = None,
                    targets: Path | str | None = None, bar=None) -> str:
    """HTML text of the report of one run directory.

    With a hindcast section when the run's experiment names ``calibration.targets`` or ``targets``
    is given (``bar``: a tqdm bar, one step for the loading and analysis and one per figure).
    """
    run = load_run(path)
    bench = bench or load_benchmarks()
    s = summarise_run(run, bench)
    if bar is not None:
        bar.update(1)
    head = pd.DataFrame([s.headline()])
    infeasible = pd.DataFrame([s.infeasible])
    body = [
        "<h2>Headline</h2>", _table(head),
        *_hindcast_html(run, None if targets is None else Path(targets), bar),
        "<h2>Validation against empirical targets</h2>", _fit_html(s.fit),
        "<h2>Adaptation trajectories</h2>",
        _img(figure_to_png(plot_trajectories(s.trajectories, f"Adaptation states: {run.run_id}")),
             "adaptation trajectories", bar),
        _explore("tab=households", "each household's state, year by year, on its network",
                 run.path),
        _table(s.trajectories),
    ]
    for column, table in s.trajectories_by_group.items():
        body += [f"<h3>By {column}</h3>", _table(table)]
    body += [
        "<h2>Damage, payouts, premiums, out-of-pocket (USD)</h2>",
        _img(figure_to_png(plot_losses(s.losses)), "losses by year", bar),
        _explore("tab=households&colour=flooded", "who was flooded each year", run.path),
        _table(s.losses, 1),
    ]
    for column, table in s.losses_by_group.items():
        body += [f"<h3>By {column}</h3>", _table(table, 1)]
    body += [
        "<h2>PMT appraisal labels</h2>",
        _img(figure_to_png(plot_label_distribution(run.agents)), "TP/CP labels", bar),
        _explore("tab=decisions", "the appraisals and reasons behind each decision", run.path),
        "<h2>PMT coherence (irrational-behaviour rate)</h2>", _table(s.irrational_overall),
        "<h3>Executed actions by year</h3>", _table(s.irrational_executed),
        "<h3>Proposed actions by year</h3>", _table(s.irrational_proposed),
        "<h2>After floods</h2>",
        "<p>Insurance change of flooded minus dry households of the same zone and year:</p>",
        _table(s.flood_responses),
        "<p>Inaction of flooded households, by what they could do (only <i>could_act</i> "
        "counts for B5):</p>", _table(s.post_flood),
        *([] if s.adaptation_gap.empty else [
            "<h2>Marginalised households (B6)</h2>",
            "<p>Ever-adapted share of non-marginalised (NMG) and marginalised (MG) households, "
            "overall and within each tenure; <i>within</i> weighs the tenure gaps by the MG "
            "households' tenure mix, <i>composition</i> is the rest of the overall gap (who "
            "the MG households are, not how they act):</p>", _table(s.adaptation_gap)]),
        "<h2>Infeasible proposals</h2>", _table(infeasible),
        _explore("tab=decisions&status=rejected", "the rejected decisions", run.path),
        "<h2>Governance workload</h2>",
        _img(figure_to_png(plot_governance(s.workload)), "governance workload", bar),
        _explore("tab=decisions&status=retry_approved",
                 "the decisions the broker re-asked, with the rules that fired", run.path),
        _table(s.workload),
        *([] if s.label_changes is None else [
            "<h3>Appraisal labels changed on governance re-asks</h3>",
            _table(pd.DataFrame([s.label_changes]))]),
        "<h2>Decision diversity (normalised entropy of executed actions)</h2>",
        f"<p>All years pooled: {s.entropy_overall:.3f}</p>", _table(s.entropy),
        *run_section(run, _table, _figure),
        *_institutions_html(run, bar),
        "<h2>Manifest</h2>",
        f"<pre>{html.escape(json.dumps(run.manifest, indent=2, sort_keys=True))}</pre>"
        if run.manifest else "<p>No manifest.json in this run directory.</p>",
    ]
    return _page(f"Run report: {run.run_id}", body)


def _institutions_html(run, bar=None) -> list[str]:
    """The government's and the insurer's years (empty for a run without institutions)."""
    if run.institutions is None:
        return []
    frame = run.institutions
    status = frame.melt(id_vars="year", value_vars=["government_status", "insurer_status"],
                        var_name="institution", value_name="status")
    counts = status.groupby(["institution", "status"]).size().rename("years").reset_index()
    return [
        "<h2>Institutions</h2>",
        "<p>The government and the insurer decide before the households each year "
        "(docs/institutions.md); the levers in force and the money of each year, and how "
        "their decisions went (a <code>rejected</code> decision broke a limit: last year's "
        "levers within the limits were put in force).</p>",
        _img(figure_to_png(plot_institutions(frame)), "institutions by year", bar),
        _table(counts), _table(frame, 2),
    ]


def _figure(fig, alt: str) -> str:
    return _img(figure_to_png(fig), alt)


def validity_report_html(path: Path | str) -> str:
    """HTML text of the page of a ``validate`` output directory (its card alone)."""
    card = read_card(Path(path))
    assert card is not None
    return _page(f"Validity card: {Path(path).name}",
                 ["<h2>Behavioural validity</h2>", *card_section(card, _table, _figure)])


def _sweep_groups(outcomes: pd.DataFrame, parameters: list[str]) -> str | None:
    """A parameter with 2-6 distinct values to group the yearly bands by, if any."""
    for p in parameters:
        if 2 <= outcomes[p].nunique() <= 6:
            return p
    return None


def _arms_html(outcomes: pd.DataFrame) -> list[str]:
    """The policy-comparison section.

    Each arm against the first, paired by seed (empty for a sweep without cases or without seeds
    that several arms ran).
    """
    if ARM not in outcomes.columns or outcomes[ARM].nunique() < 2:
        return []
    arms = list(dict.fromkeys(outcomes[ARM].astype(str)))
    if not outcomes.groupby("seed")[ARM].nunique().gt(1).any():
        return []
    diffs = paired_arm_differences(outcomes, arms[0])
    return [f"<h2>Policy arms: paired differences against {html.escape(arms[0])}</h2>",
            "<p>Each arm minus the reference, seed by seed (the arms share each replicate's "
            "population and floods, and with a <code>policy_change</code> every year before "
            "it); mean over the pairs with a 95 % percentile bootstrap interval "
            "(<code>analysis.policy</code>).</p>",
            _table(diffs)]


def _branch_html(path: Path) -> list[str]:
    """What a ``governed-broker branch`` directory forked.

    And whether its arms re-lived the parent's history (empty for other sweeps).
    """
    record = branch_record(path)
    if record is None:
        return []
    parent, year, check = record["parent"], record["from_year"], record["verification"]
    runs = parent.get("runs", [])
    hashes = ", ".join(str(r.get("config_hash", ""))[:12] for r in runs)
    what = "the run" if parent.get("kind") == "run" else f"the sweep of {len(runs)} seeds"
    arms = "".join(f"<li><b>{html.escape(str(name))}</b>: from year {year}, "
                   f"<code>{html.escape(json.dumps(settings, default=str))}</code></li>"
                   for name, settings in record["arms"].items())
    status = check.get("status")
    if status == "passed":
        verdict = (f"passed: all {check['runs_checked']} runs repeat the parent's years 1-"
                   f"{year - 1} byte for byte (the reference arm every year)")
    elif status == "failed":
        verdict = ('<span class="flag">FAILED</span>: ' + "; ".join(
            html.escape(str(d)) for d in check.get("differences", [])))
    else:
        verdict = (f"{html.escape(str(status))} ({check.get('runs_checked', 0)} of "
                   f"{check.get('runs_planned', '?')} runs checked)")
    return [
        "<h2>Branch</h2>",
        f"<p>Branched from {what} <code>{html.escape(str(parent.get('path')))}</code> "
        f"({html.escape(str(parent.get('name')))}, config hash {html.escape(hashes)}) at year "
        f"{year} of {parent.get('years')}. The reference arm "
        f"<b>{html.escape(str(record['reference_arm']))}</b> is the parent's policy, "
        "re-simulated; the other arms change these policy settings:</p>",
        f"<ul>{arms}</ul>",
        f"<p>History check: {verdict}.</p>",
    ]


def sweep_report_html(path: Path | str, bench: BenchmarkSet | None = None, bar=None) -> str:
    """HTML text of the report of one sweep directory.

    ``bar``: a tqdm bar, one step per figure.
    """
    sweep = load_sweep(path)
    outcomes = run_outcomes(sweep)
    numeric = [p for p in sweep.parameters if pd.api.types.is_numeric_dtype(sweep.runs[p])]
    status = sweep.runs["status"].value_counts().rename_axis("status").reset_index()
    body = [
        f"<p>{len(sweep.runs)} completed runs; swept parameters: "
        f"{html.escape(', '.join(sweep.parameters) or 'none')}.</p>",
        "<h2>Runs</h2>", _table(status),
        _explore("", "any run of this sweep", Path(path)), _table(outcomes),
    ]
    body += _branch_html(Path(path))
    body += _arms_html(outcomes)
    group_by = _sweep_groups(outcomes, sweep.parameters)
    # `governed-broker collect` already writes the parameters into the model table
    missing = [p for p in sweep.parameters if p not in sweep.model.columns]
    model = sweep.model.merge(sweep.runs[["run_id", *missing]], on="run_id")
    for column, label in (("share_insured", "insured share"), ("share_elevated",
                                                              "elevated share")):
        long = model.rename(columns={column: "value"})[["run_id", "year", "value"]]
        long["group"] = (
            model[group_by].map(lambda v, p=group_by: f"{p}={v}") if group_by else "all runs"
        )
        summary = summarise_replicates(long)
        fig = plot_group_bands(summary, label, f"{label} across runs (mean, 95% CI)")
        body += [f"<h2>{label.capitalize()} by year</h2>", _img(figure_to_png(fig), label, bar)]
    if numeric:
        body.append("<h2>Sensitivity (Sobol indices)</h2>")
        for output in OUTCOMES:
            if outcomes[output].nunique(dropna=True) < 2:
                body.append(f"<p>{output}: constant across runs, no index computed.</p>")
                continue
            indices = sobol_indices(outcomes, numeric, output)
            png = figure_to_png(plot_sobol(indices))
            body += [_img(png, f"Sobol {output}", bar), _table(indices)]
    return _page(f"Sweep report: {Path(path).name}", body)


def _flag(out: Path | str | None) -> str:
    return "" if out is None else "--out "


def _check_target(target: Path, out: Path | str | None) -> None:
    """Refuse a report file no report can be written to, before the report is made.

    That is a directory (or a link to one), or an ``--out`` where no file can be written (tried
    with a temporary file).
    """
    if target.is_dir():
        raise AnalysisInputError(f"{_flag(out)}{target}: is a directory; give the report's "
                                 f"file name, e.g. --out {target / REPORT_FILE}")
    if out is None:
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=target.parent, prefix=".report-", suffix=".html")
    except OSError as exc:
        raise AnalysisInputError(f"--out {target}: cannot write the report there "
                                 f"({exc.strerror or exc}); choose another file") from None
    os.close(fd)
    os.unlink(probe)


def write_report(
    path: Path | str, out: Path | str | None = None, benchmarks: Path | str | None = None,
    targets: Path | str | None = None, progress: bool = False,
) -> Path:
    """Write the HTML report of a run or sweep directory.

    Args:
        path: A run directory, a sweep directory (detected by ``sweep_runs.csv``) or a
            ``validate`` output directory (a ``validity_card.json`` and no agent table).
        out: Output HTML file (default: ``<path>/report.html``).
        benchmarks: Benchmarks YAML (default: ``configs/benchmarks.yaml``).
        targets: Hindcast targets for a run (default: its ``calibration.targets``, if any).
        progress: Show a progress bar on a terminal (the figures are the slow part).

    Returns:
        The path of the written file.
    """
    path = Path(path)
    target = Path(out) if out is not None else path / REPORT_FILE
    _check_target(target, out)  # before the slow part
    bench = load_benchmarks(benchmarks)
    from tqdm import tqdm

    sweep = is_sweep_dir(path)
    card_only = (not sweep and (path / CARD_FILE).is_file()
                 and not (path / "agents_yearly.csv").exists())
    with tqdm(total=None if sweep or card_only else 5, desc="report", unit="step",
              disable=not (progress and sys.stderr.isatty())) as bar:
        if sweep:
            text = sweep_report_html(path, bench, bar)
        elif card_only:
            text = validity_report_html(path)
        else:
            text = run_report_html(path, bench, targets, bar)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".report-", suffix=".html")
    except OSError as exc:
        raise AnalysisInputError(f"{_flag(out)}{target}: cannot write the report there "
                                 f"({exc.strerror or exc}); choose another file") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

