"""Development tools of the repository (not shipped in the wheel): :mod:`devtools.stack`, the native Airflow
stack that ``make stack`` and the stack tests run."""
