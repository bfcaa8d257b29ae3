"""`tools profile`: placeholder until its module lands."""

import click


@click.group(name="profile")
def profile() -> None:
    """(not yet available)"""
