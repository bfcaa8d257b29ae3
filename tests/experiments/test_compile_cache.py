"""The timed arms' compile cache (``sides.compile_cache_env``): the project's own folder unless the environment
already names one. The test session names one for every process (tests/conftest.py), so this is where the
product's default is checked in the fast lane."""

from __future__ import annotations

from tools.experiments.sides import compile_cache_env


def test_the_timed_arms_get_the_projects_cache_unless_the_environment_names_one(monkeypatch, tmp_path):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    env = compile_cache_env(tmp_path / "jax-compile", {"XLA_FLAGS": "--x"})
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "jax-compile") and env["XLA_FLAGS"] == "--x"
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"  # the tiny programs compile in under a second
    mine = compile_cache_env(tmp_path / "jax-compile", {"JAX_COMPILATION_CACHE_DIR": "/the/arms/own"})
    assert mine == {"JAX_COMPILATION_CACHE_DIR": "/the/arms/own"}
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "the-users"))
    assert compile_cache_env(tmp_path / "jax-compile", {}) == {}  # the user's cache stays the one in use
