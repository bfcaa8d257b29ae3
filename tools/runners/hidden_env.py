"""Secrets a remote arm needs (``HF_TOKEN``, ``WANDB_API_KEY``: forwarded or set with ``--env``) travel in the job's
environment, never in its script: the script is kept under raw/profiles (and xpk packs it into the workload's
manifest, Ray echoes it into the job log). Each arm's secret goes into the job as ``_AR_S<arm>_<NAME>``; the script
moves the carriers out of its environment and exports each secret inside its own arm alone (``roundscript``); the
runner hands the carriers to the submit command's environment (Slurm's ``sbatch`` exports it to the job, xpk reads
names from an ``--env-file`` of names only, Ray takes ``runtime_env.env_vars``)."""

from __future__ import annotations

from ..redact import SECRET_NAME
from .roundscript import ArmPlan


_SETTING = frozenset(("true", "false", "yes", "no", "on", "off"))


def _secret(name: str, value: str) -> bool:
    """Named as a secret, and not a setting that only shares the word (``TOKENIZERS_PARALLELISM=false``,
    ``MAX_TOKENS=4096``; a number is a secret where the name says password, secret or PIN)."""
    if not value or not SECRET_NAME.search(name) or value.lower() in _SETTING:
        return False
    return not value.isdigit() or any(w in name.upper() for w in ("PASS", "SECRET", "PIN"))


def hide_secrets(plans: list[ArmPlan]) -> dict[str, str]:
    """Move each plan's variables named as secrets, whatever their value (a password with spaces, a key of five
    characters, a JSON key of many lines), out of its script's environment into ``hidden``; return the job's
    environment that carries them (carrier name -> value)."""
    job: dict[str, str] = {}
    for i, p in enumerate(plans):
        for k in [k for k, v in p.env.items() if _secret(k, str(v))]:
            var = f"_AR_S{i}_{k}"
            job[var] = str(p.env.pop(k))
            p.hidden[k] = var
    return job


def env_file(job_env: dict[str, str], values: bool = False) -> str:
    """An env file naming the carriers, one per line: names only (xpk takes each value from its own environment),
    or with a placeholder where nothing may read them (a dry run's manifest is written to disk)."""
    return "".join(f"{k}=[redacted]\n" if values else f"{k}\n" for k in job_env)
