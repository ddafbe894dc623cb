"""`xtune run FILE`, `trials`, `report`, `train`, `demo`: the tuning loop's commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from xtune import paths

if TYPE_CHECKING:
    from xtune.trials.store import Store

DEFAULT_DB = os.environ.get("XTUNE_DB", f"sqlite:///{paths.BUILD / 'xtune-trials.db'}")

app = typer.Typer(no_args_is_help=True)

DbOption = Annotated[str, typer.Option(help="Trial store URL (SQLAlchemy: sqlite:///..., postgresql://...).")]


def open_store(db: str, retry_s: float | None = None) -> Store:
    """The trial store `db` names (a lost PostgreSQL connection tried again for `retry_s`, default
    the store's), or exit 1 saying why it cannot be opened."""
    from xtune.trials.store import RETRY_S, Store, StoreError

    try:
        return Store(db, RETRY_S if retry_s is None else retry_s)
    except StoreError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e


AsciiOption = Annotated[
    bool | None,
    typer.Option(
        "--ascii/--unicode",
        help="ASCII-only output (default: when the terminal's encoding is not UTF-8).",
        show_default=False,
    ),
]


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="SLO file (YAML).")],
    db: DbOption = DEFAULT_DB,
    xrtd_socket: Annotated[
        str, typer.Option(help="xrtd control socket (default: the file's, else the system's).")
    ] = "",
    metrics_addr: Annotated[
        str, typer.Option(help="Prometheus exporter HOST:PORT (with --hosts: HOST, a free port per host).")
    ] = paths.PROMETHEUS_ADDR,
    var: Annotated[
        list[str] | None, typer.Option(help="NAME=VALUE for ${NAME} in the file (repeatable).")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write the report to this directory when done.")] = None,
    ascii: AsciiOption = None,
    hosts: Annotated[
        Path | None, typer.Option(help="Hosts file: trials on these hosts in parallel, through bridges.")
    ] = None,
    resume: Annotated[
        int | None, typer.Option(help="With --hosts: continue this unfinished run of the store.")
    ] = None,
    prometheus_sd: Annotated[
        Path,
        typer.Option(help="With --hosts: where the Prometheus file-SD file EXPERIMENT.json lists the hosts."),
    ] = paths.BUILD / "prometheus",
    store_retry_s: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds a store read or write is tried again on a lost PostgreSQL connection "
            "[default: the store's, 30].",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the tuning job an SLO file describes."""
    from xtune.config import ConfigError, load
    from xtune.trials.store import StoreError
    from xtune.tuning.job import run_job
    from xtune.tuning.metrics import Metrics
    from xtune.tuning.terminal import make_console

    console = make_console(ascii)
    variables = dict(v.split("=", 1) for v in var or [] if "=" in v)
    try:
        slo = load(file, variables)
    except ConfigError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from e
    fleet = None
    if resume is not None and hosts is None:
        typer.echo("xtune run: --resume continues a run on several hosts: give its --hosts file", err=True)
        raise typer.Exit(2)
    if hosts is not None:
        from xtune.config import load_hosts

        try:
            fleet = load_hosts(hosts)
            if slo.benchmark is None:
                raise ConfigError([f"{file}:1: a run on several hosts measures with a `benchmark`"])
        except ConfigError as e:
            typer.echo(str(e), err=True)
            raise typer.Exit(2) from e
    try:  # a store out of reach past --store-retry-s ends the run (its knobs restored on the way)
        if fleet is not None:
            from xtune.cli.fleet import host_exporters, run_on_hosts

            exporters = host_exporters(slo, metrics_addr, prometheus_sd)  # checked before the store is made
            run_on_hosts(slo, fleet, open_store(db, store_retry_s), exporters, console, resume)
            return
        store = open_store(db, store_retry_s)
        metrics = Metrics(slo.name)
        host, _, port = metrics_addr.rpartition(":")
        metrics.serve(host or "127.0.0.1", int(port))
        job = run_job(slo, store, metrics, console, xrtd_socket, warm=True)
        job.print_table(console)
        if report is not None:
            job.write_report(report, console)
    except StoreError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e


@app.command()
def trials(
    db: DbOption = DEFAULT_DB,
    experiment: Annotated[str, typer.Option(help="Only runs of this experiment name.")] = "",
    ascii: AsciiOption = None,
) -> None:
    """List stored runs and their trials."""
    from rich.table import Table

    from xtune.config.units import format_spread
    from xtune.trials.report import params_text, stored_units, summary_line
    from xtune.tuning.terminal import is_ascii, make_console

    store = open_store(db)
    console = make_console(ascii)
    ascii = is_ascii(console)
    for exp in store.experiments(experiment or None):
        trials = store.trials(exp.id)
        summary = summary_line(exp, trials, store.measurements(exp.id), store.rollbacks(exp.id), ascii)
        console.print(f"[bold]run {exp.id}: {exp.name}[/]: {summary}", highlight=False)
        table = Table()
        for col in ("trial", "policy", "values", "status"):
            table.add_column(col)
        table.add_column(f"objective (mean {'+/-' if ascii else '±'} sem)", justify="right")
        unit = stored_units(exp)[0]
        for t in trials:
            objective = format_spread(t.objective, t.objective_sem, unit, ascii)
            table.add_row(str(t.index), t.policy, params_text(t.params), t.status, objective)
        console.print(table)


@app.command()
def report(
    run_id: Annotated[int, typer.Argument(help="Run id (see `xtune trials`).")],
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("xtune-report"),
    db: DbOption = DEFAULT_DB,
) -> None:
    """Write PNG plots and an HTML page for a stored run."""
    from xtune.trials.report import write_report

    typer.echo(str(write_report(open_store(db), run_id, out)))


@app.command()
def train(
    recordings: Annotated[list[Path], typer.Argument(help="Recordings with frames and decisions.")],
    knob: Annotated[list[str], typer.Option(help="Knob the tree decides (repeatable).")],
    out: Annotated[Path, typer.Option(help="Model file (JSON) to write.")],
    feature: Annotated[
        list[str] | None,
        typer.Option(
            help="A signal, an expression over signals or ewma(EXPR, N) (repeatable; default: all signals)."
        ),
    ] = None,
    max_depth: Annotated[int, typer.Option(help="Tree depth limit.")] = 8,
    objective: Annotated[
        str | None,
        typer.Option(help="Sweep recordings: label each regime with the value minimizing this signal."),
    ] = None,
    throughput: Annotated[
        str | None, typer.Option(help="Sweep recordings: the signal that must stay >= 95 % of the best.")
    ] = None,
    heldout: Annotated[
        list[Path] | None, typer.Option(help="Sweep recordings kept out of training, for the card.")
    ] = None,
    objective_quantile: Annotated[
        float | None,
        typer.Option(
            help="Sweep recordings: judge a cell by this quantile of its windows' objective, not the mean."
        ),
    ] = None,
    tolerance: Annotated[
        float, typer.Option(help="Sweep recordings: values within this share of a regime's best tie there.")
    ] = 0.0,
    neighbours: Annotated[
        int, typer.Option(help="Sweep recordings: a label must also suit this many nearest regimes.")
    ] = 0,
    watch: Annotated[
        list[str] | None,
        typer.Option(help="Sweep recordings: a signal the guard watches, outside the tree (repeatable)."),
    ] = None,
    prefer: Annotated[
        str | None,
        typer.Option(
            help="Sweep recordings: the knob's safe direction, larger or smaller: ties go that way and "
            "the fallback is that side's extreme label."
        ),
    ] = None,
    leaf_regime_share: Annotated[
        float,
        typer.Option(
            help="Sweep recordings: a leaf's value suits the regimes with at least this share of its "
            "windows (a few windows of another regime are noise)."
        ),
    ] = 0.1,
) -> None:
    """Train a decision-tree policy from recordings.

    Without --objective, the labels are the recorded knob decisions. With --objective and
    --throughput, the recordings are sweeps (every value applied in every load regime) and the
    label of a regime is its measured best value; the card reports held-out accuracy and regret."""
    from xtune.learning.train import train_regimes, train_tree

    try:
        if objective or throughput:
            if not (objective and throughput) or len(knob) != 1:
                raise ValueError("sweep training needs --objective, --throughput and exactly one --knob")
            model = train_regimes(
                recordings,
                heldout or [],
                knob[0],
                objective,
                throughput,
                out,
                feature or None,
                max_depth,
                objective_quantile=objective_quantile,
                tolerance=tolerance,
                neighbours=neighbours,
                watch=watch or (),
                prefer=prefer,
                leaf_regime_share=leaf_regime_share,
            )
        else:
            model = train_tree(recordings, knob, out, feature or None, max_depth)
    except (ValueError, OSError) as e:
        typer.echo(f"xtune train: {e}", err=True)
        raise typer.Exit(2) from e
    typer.echo(f"{out}: {card_text(model.card)}")


def card_text(card: dict[str, Any]) -> str:
    """A model card as a sentence (the file holds all of it): the tree's size and data, its labels,
    how well it fits the training windows and the held-out ones, how fast it decides."""
    from xtune.config.units import format_value

    def share(x: object) -> str:
        return format_value(x, "fraction") if isinstance(x, float) else "-"

    text = f"tree depth {card['depth']}, {card['leaves']} leaves from {card['samples']} windows"
    labels = card.get("labels_robust") or card.get("regimes")
    if labels:
        text += "; labels per regime " + ", ".join(f"{r}: {v}" for r, v in labels.items())
    if "fallback" in card:
        text += f"; fallback {card['fallback']}"
    text += f"; training accuracy {share(card.get('training_accuracy'))}"
    held = card.get("heldout")
    if held:
        text += f"; held-out accuracy {share(held.get('accuracy'))} over {held.get('windows')} windows"
        if held.get("regret_mean") is not None:
            text += f", mean regret {held['regret_mean']:.2f}x the best value's objective"
    if card.get("decision_us"):
        p50, p99 = (format_value(card["decision_us"][q], "us") for q in ("p50", "p99"))
        text += f"; a decision takes {p50} (p50), {p99} (p99)"
    return text


@app.command()
def sweep(
    file: Annotated[Path, typer.Argument(help="SLO file: its knobs, xrtd socket and signal source.")],
    knob: Annotated[str, typer.Option(help="The knob to sweep (one of the file's).")],
    values: Annotated[str, typer.Option(help="Comma-separated values, each applied under every regime.")],
    regime: Annotated[list[str], typer.Option(help="NAME=COMMAND: a load regime (repeatable).")],
    out: Annotated[Path, typer.Option(help="Recording to write.")],
    seconds: Annotated[float, typer.Option(help="Seconds recorded per value and regime.")] = 2.0,
    settle: Annotated[float, typer.Option(help="Seconds dropped after each change.")] = 0.5,
    rounds: Annotated[int, typer.Option(help="Times the whole sweep is repeated.")] = 1,
    xrtd_socket: Annotated[str, typer.Option(help="xrtd control socket (default: the file's).")] = "",
    var: Annotated[list[str] | None, typer.Option(help="NAME=VALUE for ${NAME} in the file.")] = None,
) -> None:
    """Record a knob's landscape for training: every value under every load regime."""
    from xtune.config import ConfigError, load
    from xtune.knobs.actuator import Actuator
    from xtune.learning.sweep import parse_regimes, record_sweep
    from xtune.signals.frames import ShmFrameReader, ZmqFrameReader

    variables = dict(v.split("=", 1) for v in var or [] if "=" in v)
    try:
        slo = load(file, variables)
        regimes = parse_regimes(regime)
        grid = [int(v) for v in values.split(",") if v.strip()]
        if knob not in {k.name for k in slo.knobs}:
            raise ValueError(f"{file}: no knob {knob!r} (knobs: {', '.join(k.name for k in slo.knobs)})")
    except (ConfigError, ValueError) as e:
        typer.echo(f"xtune sweep: {e}", err=True)
        raise typer.Exit(2) from e
    actuator = Actuator(xrtd_socket or slo.xrtd_socket or paths.XRTD_SOCKET, slo.knobs)
    reader = ZmqFrameReader(slo.signals.zmq) if slo.signals.zmq else ShmFrameReader(slo.signals.shm)
    try:
        n = record_sweep(
            actuator, reader, knob, grid, regimes, out, seconds, settle, rounds, progress=typer.echo
        )
    finally:
        reader.close()
        actuator.close(restore=True)
    typer.echo(f"{out}: {n} frames, {len(grid)} values x {len(regimes)} regimes x {rounds} rounds")


@app.command()
def demo(
    short: Annotated[
        bool, typer.Option("--short", help="A small budget (for tests): about a minute.")
    ] = False,
    budget: Annotated[int, typer.Option(help="Trials (default 14, or 4 with --short).")] = 0,
    out: Annotated[Path, typer.Option(help="Where the trial store and the report go.")] = paths.BUILD
    / "demo",
    ascii: AsciiOption = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="Also write every phase's before/after figures to this JSON file."),
    ] = None,
) -> None:
    """Tune a bulk TCP flow's socket buffer limits through a bottleneck (real BPF, real sysctls), then a
    dataplane server's compiled-in RX_BATCH_SIZE through SIE on the running binary, then let a tree
    trained from a short sweep decide it live at 1 ms windows under a shifting load."""
    import json

    from xtune.demo.figures import demo_figures
    from xtune.demo.run import run_demo
    from xtune.tuning.terminal import make_console

    run = run_demo(out, short=short, budget=budget or None, console=make_console(ascii))
    if json_out is not None:
        json_out.write_text(json.dumps(demo_figures(run), indent=1) + "\n")
    if run.result.best is None:
        raise typer.Exit(1)
