"""The `xtune` command: one sub-command group per concern, each defined in its own module.

Each concern module exposes a `typer.Typer` (or plain commands) and is registered below by one line.
"""

import typer

from xtune.tuning.terminal import terminal_is_ascii

# Help in rich's boxes where the terminal shows them, plain (click's) where it cannot (LC_ALL=C).
app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="xtune: autotune perf-consts.",
    rich_markup_mode=None if terminal_is_ascii() else "rich",
)


@app.command()
def version() -> None:
    """Print the xtune version."""
    from xtune import __version__

    typer.echo(__version__)


# Registration: one line per concern module (keep sorted).
app.add_typer(__import__("xtune.cli.dashboard", fromlist=["app"]).app)  # dashboard: the live web page
app.add_typer(__import__("xtune.cli.drill", fromlist=["app"]).app)  # drill: where a function's time goes
app.add_typer(__import__("xtune.cli.knobs", fromlist=["app"]).app)  # knobs: register, set, rollback
app.add_typer(__import__("xtune.cli.observe", fromlist=["app"]).app)  # observe, record, replay
app.add_typer(__import__("xtune.cli.sie", fromlist=["app"]).app)  # analyze [--kernel], sie
app.add_typer(__import__("xtune.cli.tune", fromlist=["app"]).app)  # run, trials, report, train, demo


def main() -> None:
    from xtune.host.termination import unwind_on_termination

    unwind_on_termination()  # SIGTERM cleans up (namespaces, daemons, knobs) as Ctrl-C does
    app()


if __name__ == "__main__":
    main()
