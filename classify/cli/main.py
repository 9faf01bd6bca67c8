"""The `classify` app: command groups mounted from one module each. Heavy libraries are imported
inside the commands that need them, so `classify --help` stays fast."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from classify.cli import evaluate, label, models, report
from classify.cli.common import UserErrorGroup, echo_logs
from classify.cli.fetch import fetch_app
from classify.cli.review import review_app
from classify.cli.taxonomy import gold_app, taxonomy_app
from classify.cli.workbench import workbench_app

app = typer.Typer(
    cls=UserErrorGroup,
    no_args_is_help=True,
    add_completion=False,
    help="Label issue reports against a taxonomy and measure agreement with coders.",
)


def _version(value: bool) -> None:
    if value:
        from classify import __version__

        typer.echo(f"classify {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Label issue reports against a taxonomy and measure agreement with coders."""
    # Encoder training (setfit, finetune) runs for minutes inside a fold: its INFO lines say how far it is.
    echo_logs(logging.getLogger("classify.encoders"), logging.INFO)


app.add_typer(taxonomy_app, name="taxonomy")
app.add_typer(gold_app, name="gold")
app.add_typer(fetch_app, name="fetch")
app.add_typer(review_app, name="review")
app.add_typer(workbench_app, name="workbench")
app.command("models")(models.models_cmd)
app.command("eval")(evaluate.eval_cmd)
app.command("run")(label.run_cmd)
app.command("merge")(label.merge_cmd)
app.command("report")(report.report_cmd)
app.command("logs")(models.logs_cmd)
app.command("leaderboard")(evaluate.leaderboard_cmd)
app.command("learning-curve")(evaluate.learning_curve_cmd)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
