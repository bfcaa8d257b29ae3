"""The runner's process control under signals that arrive at awkward moments."""
import subprocess
import sys
import textwrap


def test_a_sigterm_that_lands_in_a_fork_hook_still_stops_the_run(tmp_path):
    """Python runs a signal's handler wherever the main thread is; inside a fork hook (``Popen`` with
    ``preexec_fn`` runs logging's) the ``Stop`` it raises is printed and dropped. The run went on to its end and a
    loop told to stop finished its budget instead (seen under load: a resumed driver exited 0 after SIGTERM)."""
    script = tmp_path / "drive.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from tools.runners import process

        fired = []
        def hook():  # the signal lands while the parent runs its after-fork hooks, as logging's does
            if not fired:
                fired.append(1)
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(1000))  # a few bytecodes: the handler runs here and its raise is dropped
        os.register_at_fork(after_in_parent=hook)
        with process.stop_on_signals():
            p = process.run_command([sys.executable, "-c", "import time; time.sleep(30)"],
                                    Path({str(tmp_path / 'run.log')!r}), dict(os.environ), 60, None, False)
        print("stopped_by", p.stopped_by)
        print("after", process.STOP_ALL.is_set())
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Exception ignored" in out.stderr  # the moment this test is about: the raise was dropped
    assert "stopped_by SIGTERM" in out.stdout, out.stdout + out.stderr
    assert "after False" in out.stdout  # the note does not outlive the block
