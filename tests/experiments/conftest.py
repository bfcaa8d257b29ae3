from __future__ import annotations

import pytest

from tools.project import Project


@pytest.fixture
def project(tmp_path) -> Project:
    (tmp_path / "wiki").mkdir()
    return Project(tmp_path)
