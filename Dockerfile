# One image for every service of docker-compose.yaml but postgres: `emulator` (resilient-emulator, which also
# runs the workloads of the jobs it is sent) and the Airflow 3.3 components (`airflow-init`, `airflow-apiserver`,
# `airflow-scheduler`, `airflow-dag-processor`, `airflow-triggerer`, each with its own command). Build:
# `make compose-up`. Run on its own (`docker run`), it starts `airflow standalone`.
FROM python:3.11.14-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AIRFLOW_HOME=/opt/airflow

# Only what the package build needs, so that editing dags/ or tests/ does not re-run the install.
WORKDIR /src
COPY pyproject.toml README.md LICENSE NOTICE constraints.txt ./
COPY airflow_provider_resilient ./airflow_provider_resilient
# constraints.txt pins the dependencies as `make test` installs them (Python 3.11), with the postgres extra
# (Airflow's metadata database drivers: psycopg2-binary, asyncpg) and the celery extra (the Celery provider and
# Redis client of the `celery` profile's workers).
RUN pip install -c constraints.txt '.[demo,postgres,celery]' \
    && useradd --create-home --uid 50000 --gid 0 airflow \
    && mkdir -p /opt/airflow/dags /opt/airflow/logs \
    && chown -R airflow:0 /opt/airflow \
    && rm -rf /src

USER 50000
WORKDIR /opt/airflow
CMD ["airflow", "standalone"]
