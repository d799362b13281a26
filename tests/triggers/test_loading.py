"""hooks/loading.py: the async hooks' import thread holds the garbage collector off and freezes what it
loaded. Each case runs in a fresh interpreter: freezing is process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_import_is_frozen_once_and_the_collector_is_restored():
    assert run("""
        import gc, sys
        from airflow_provider_resilient.hooks.loading import import_client_modules
        assert "email.mime.text" not in sys.modules and gc.get_freeze_count() == 0
        import_client_modules(["email.mime.text"], yield_seconds=0)
        frozen = gc.get_freeze_count()
        assert "email.mime.text" in sys.modules and frozen > 0 and gc.isenabled()
        import_client_modules(["email.mime.text"], yield_seconds=0)  # already loaded: nothing frozen again
        assert gc.get_freeze_count() == frozen
        print("ok")
    """) == "ok"


def test_a_collector_switched_off_by_the_application_stays_off_and_an_import_error_is_raised():
    assert run("""
        import gc
        from airflow_provider_resilient.hooks.loading import import_client_modules
        gc.disable()
        import_client_modules(["json"], yield_seconds=0)
        assert not gc.isenabled()
        gc.enable()
        try:
            import_client_modules(["no_such_module_here"], yield_seconds=0)
        except ImportError:
            assert gc.isenabled()
            print("ok")
    """) == "ok"
