"""`tools remove <slug>`: take an ingested codebase out of the knowledge base."""

from __future__ import annotations

import json
import sys

import click

from ..errors import InputError
from .common import pass_project, printable


@click.command()
@click.argument("slugs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True,
              help='Print one JSON report (for agents): {"removed": [per codebase], "failed": [{slug, error}]}.')
@pass_project
def remove(project, slugs, as_json):
    """Remove codebases: their codebase and kernel pages, their region on every concept page, their cache.

    raw/code/<slug> is not touched (delete it yourself). The index and the kernel directory are rebuilt, so
    `tools lint` is clean after. `tools ingest --all` does the same for trees that vanished from raw/code/.
    """
    from ..ingest.remove import remove_codebase
    from ..writer import Writer

    project.require_wiki()
    reports, failed = [], []
    for slug in slugs:
        try:
            r = remove_codebase(project, slug, Writer(project.wiki))
        except InputError as e:
            failed.append({"slug": printable(slug), "error": printable(e)})
            click.echo(f"error: {printable(e)}", err=True)
            continue
        reports.append(r.to_dict())
        if not as_json:
            click.echo(f"{printable(slug)}: removed {len(r.removed)} files, its region on {len(r.regions)} concept pages")
            for page, why in r.skipped:
                click.echo(f"  left as it is: wiki/{printable(page)}: {printable(why)}", err=True)
    refreshed = []
    if reports:  # codebases whose overview linked a removed kernel (a vendored copy's upstream): written again
        from ..ingest.batch import refresh_linking

        refreshed, lost = refresh_linking(project, {r["slug"] for r in reports})
        failed += [{"slug": printable(x["target"]), "error": printable(x["error"])} for x in lost]
        for x in lost:
            click.echo(f"error: {printable(x['target'])} could not be ingested again: {printable(x['error'])}",
                       err=True)
        for slug in refreshed if not as_json else []:
            click.echo(f"{printable(slug)}: ingested again (it linked a kernel page removed with them)")
    if as_json:  # one shape however many slugs: a list of what was removed, a list of what could not be
        click.echo(json.dumps({"removed": reports, "failed": failed, "refreshed": refreshed}, indent=2))
    if failed:
        sys.exit(1)
