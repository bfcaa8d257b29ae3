"""Knob edits of a launch script or a YAML config (`tools loop finalize`, `tools exp export`): the cases that wrote
a broken or a wrong file, from a demanding user's and a reviewer's hunts."""

from __future__ import annotations

import pytest
import yaml

from tools.experiments.branches import with_knobs

LAUNCH = 'exec python train.py --preset tiny --pad-sleep-ms 20 --tile --no-fuse "$@"\n'


@pytest.mark.parametrize("knobs, line", [
    ({"pad_sleep": ["--pad-sleep-ms", "0"]}, '--pad-sleep-ms 0 --tile --no-fuse "$@"'),  # the knob's own flag
    ({"fused": ["--fuse"]}, '--pad-sleep-ms 20 --tile --fuse "$@"'),                    # a switch: the token swapped
    ({"tiled": False}, '--pad-sleep-ms 20 --no-tile --no-fuse "$@"'),                   # by name: --no-<name>
])
def test_a_launch_script_gets_the_knob_s_own_tokens(knobs, line):
    text, missing = with_knobs(LAUNCH.replace("--tile", "--tiled") if "tiled" in knobs else LAUNCH, False, knobs)
    assert missing == [] and text.rstrip().endswith(line.replace("--no-tile", "--no-tiled")), text


@pytest.mark.parametrize("script, knobs", [
    ('python train.py \\\n --batch \\\n --seq 8\n', {"batch": 8}),                      # a continuation is no value
    ('python train.py --batch "$B"\n', {"batch": 8}),                                     # nor a quoted expansion
    ('python train.py --batch "$@"\n', {"batch": 8}),
    ('# example: sh launch.sh --batch 5\nexec python train.py --batch "${B:-5}"\n', {"batch": 8}),  # a comment
    ('echo "with --no-scan"\nexec python train.py --scan "$@"\n', {"scan": ["--no-scan"]}),       # an echo of it
    ('python prep.py --batch 64\nexec python train.py --batch 64\n', {"batch": 8}),        # which command's?
    ('exec python train.py --remat full\n', {"remat": []}),                                # nothing to write
])
def test_what_cannot_be_set_without_guessing_is_left_and_said(script, knobs):
    text, missing = with_knobs(script, False, knobs)
    assert text == script and missing == list(knobs), text


@pytest.mark.parametrize("value", ["bfloat16", True, "yes", 1e-05, "#fff", "a: b", 8])
def test_a_yaml_value_reads_back_as_it_was_kept(value):
    text, missing = with_knobs("dtype: float32   # the math\nbatch: 8\n", True, {"dtype": value})
    assert missing == [] and yaml.safe_load(text) == {"dtype": value, "batch": 8} and "# the math" in text, text


def test_a_yaml_key_at_two_places_or_holding_a_block_is_no_edit():
    two = "model:\n  dtype: float32\noptimizer:\n  dtype: float32\n"
    assert with_knobs(two, True, {"dtype": "bfloat16"}) == (two, ["dtype"])
    block = "mesh:\n  data: 4\n"
    assert with_knobs(block, True, {"mesh": 8}) == (block, ["mesh"])
    literal = "dtype: |\n  float32\n"  # was written `dtype: bf16` over the `|`: read back "bf16 float32"
    assert with_knobs(literal, True, {"dtype": "bf16"}) == (literal, ["dtype"])


def test_a_shape_knob_sets_each_of_its_keys_in_yaml_or_none():
    """A user's report: a kept `flags:` knob (`shape: {batch: 8, seq: 64}`) was listed "not in config.yaml" with
    both `batch:` and `seq:` in the file, while a launch script got `--batch 8 --seq 64`."""
    flat = "dtype: f32\nbatch: 4\nseq: 128   # tokens\n"
    text, missing = with_knobs(flat, True, {"shape": {"batch": 8, "seq": 64}})
    assert missing == [] and text == "dtype: f32\nbatch: 8\nseq: 64   # tokens\n", text
    nested = "model:\n  dtype: f32\ndata:\n  batch: 4\n  seq: 128\n"
    assert with_knobs(nested, True, {"shape": {"batch": 8, "seq": 64}})[0].endswith("  batch: 8\n  seq: 64\n")
    # one key the file does not hold: nothing of the shape is written (half a shape is another shape)
    assert with_knobs(flat.replace("seq", "length"), True, {"shape": {"batch": 8, "seq": 64}}) == \
        (flat.replace("seq", "length"), ["shape"])


def test_a_loop_s_own_patch_series_is_found_when_git_folded_its_subject(tmp_path):
    """A reviewer's: `git format-patch` folds a long subject onto the next line, and a nothing-kept finalize of a
    loop with a long name left its own series in place."""
    from tools.experiments.branches import GIT_ENV, clear_patches

    name = "a-loop-whose-name-is-long-enough-for-git-to-fold-the-subject"
    author = f"From: {GIT_ENV['GIT_AUTHOR_NAME']} <{GIT_ENV['GIT_AUTHOR_EMAIL']}>\n"
    (tmp_path / "0001-mine.patch").write_text(f"From 0 x\n{author}Subject: [PATCH 1/2]\n perf({name}): bf16\n\n")
    (tmp_path / "0002-other.patch").write_text(f"From 0 x\n{author}Subject: [PATCH] perf(other): x\n\n")
    assert clear_patches(tmp_path, name) == ["0001-mine.patch"]
    assert [p.name for p in tmp_path.iterdir()] == ["0002-other.patch"]
