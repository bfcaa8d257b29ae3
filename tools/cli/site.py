"""`tools site`: placeholder until its module lands."""

import click


@click.group(name="site")
def site() -> None:
    """(not yet available)"""
