"""`tools kernels`: placeholder until its module lands."""

import click


@click.group(name="kernels")
def kernels() -> None:
    """(not yet available)"""
