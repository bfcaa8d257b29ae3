"""`tools exp`: placeholder until its module lands."""

import click


@click.group(name="exp")
def exp() -> None:
    """(not yet available)"""
