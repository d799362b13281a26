"""The UI's calls to the REST API (``/api/v2``) as the stack tests make them, and what the emulator saw.

Each function is one thing a person does or reads in the Airflow UI, with the request body the UI's own
bundle sends (Airflow 3.3.2): trigger a run, clear a task, mark it failed or success, delete a run, read
a task instance, its tries, XComs, extra links and log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from airflow import __version__ as airflow_version

from airflow_provider_resilient.specs.common import LABEL_ATTEMPT, job_labels
from airflow_provider_resilient.specs.tpu import node_id_for
from devtools.stack import NativeStack

#: A bound on every wait in these tests (seconds); never a measured figure.
TIMEOUT = 240.0
#: How often a bounded wait asks the REST API again (seconds): a poll, not a guess of how long anything takes.
POLL_SECONDS = 0.5
TASK = "train"
#: The Airflow the stack runs (the tests' own venv): its (major, minor).
AIRFLOW_MINOR: tuple[int, int] = tuple(int(part) for part in airflow_version.split(".")[:2])  # type: ignore[assignment]
#: Whether a task's stored run state survives a new try (the task state store, Airflow 3.3): without it a cleared
#: or retried task rebuilds its run from the platform's labels, without the earlier attempts' incidents.
TASK_STATE_STORE = AIRFLOW_MINOR >= (3, 3)


def ok(reply: tuple[int, Any], *expected: int) -> Any:
    status, body = reply
    assert status in (expected or (200,)), f"HTTP {status}: {body}"
    return body


def trigger(stack: NativeStack, dag_id: str, run_id: str, **conf: Any) -> str:
    """The UI's Trigger button (after unpausing the DAG)."""
    ok(stack.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False}))
    ok(stack.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None,
                                                            "conf": conf}))
    return run_id


def ti(stack: NativeStack, dag_id: str, run_id: str) -> dict[str, Any]:
    body: dict[str, Any] = ok(stack.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK}"))
    return body


def holder(stack: NativeStack, dag_id: str, run_id: str) -> str | None:
    """The triggerer (compose service) whose job holds the run's trigger now, or None: the task instance's
    ``trigger.triggerer_id`` is a TriggererJob, whose ``hostname`` is the component's own address."""
    triggerer_id = (ti(stack, dag_id, run_id).get("trigger") or {}).get("triggerer_id")
    if triggerer_id is None:
        return None
    hosts = {job["id"]: job.get("hostname") for job in stack.jobs("TriggererJob", alive=None)}
    return stack.component_on(hosts.get(triggerer_id))


def tries(stack: NativeStack, dag_id: str, run_id: str) -> list[tuple[int, str]]:
    body = ok(stack.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK}/tries"))
    return [(t["try_number"], t["state"]) for t in body["task_instances"]]


def wait_for(what: str, condition: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """Poll ``condition()`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(POLL_SECONDS)


def wait_state(stack: NativeStack, dag_id: str, run_id: str, states: Iterable[str],
               timeout: float = TIMEOUT) -> dict[str, Any]:
    wanted = set(states)
    seen: list[str] = []

    def reached() -> dict[str, Any] | None:
        got = ti(stack, dag_id, run_id)
        if not seen or seen[-1] != got["state"]:
            seen.append(got["state"])
        return got if got["state"] in wanted else None

    try:
        found: dict[str, Any] = wait_for(f"{dag_id}/{run_id} in {sorted(wanted)}", reached, timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; states seen: {seen}") from None
    return found


def clear(stack: NativeStack, dag_id: str, run_id: str) -> None:
    """The UI's Clear dialog on one task instance (defaults: downstream ticked, not only failed)."""
    ok(stack.api("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", {
        "dag_run_id": run_id, "dry_run": False, "include_downstream": True, "include_future": False,
        "include_past": False, "include_upstream": False, "only_failed": False, "task_ids": [[TASK, -1]]}))


def mark(stack: NativeStack, dag_id: str, run_id: str, state: str) -> None:
    """Mark failed / Mark success on one task instance."""
    ok(stack.api("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK}?map_index=-1",
                 {"new_state": state}))


def xcom(stack: NativeStack, dag_id: str, run_id: str, key: str) -> Any:
    body = ok(stack.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK}/xcomEntries/{key}"
                               "?deserialize=true"))
    return body["value"]


def log_text(stack: NativeStack, dag_id: str, run_id: str, try_number: int) -> str:
    body = ok(stack.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK}/logs/{try_number}"
                               "?full_content=true"))
    return "\n".join(str(line.get("event", "")) for line in body["content"])


# ------------------------------------------------------------------ what the emulator saw
def run_label(dag_id: str, run_id: str) -> str:
    return job_labels(dag_id, TASK, run_id, -1, None)["airflow-run"]


def platform_of(dag_id: str) -> str:
    """``vertex``, ``tpu`` or ``modelarts``: what the DAG trains on (the stack's DAGs say so in their names)."""
    for platform in ("vertex", "modelarts"):
        if platform in dag_id:
            return platform
    return "tpu"


def is_vertex(dag_id: str) -> bool:
    """Whether the DAG trains on Vertex AI (else on a TPU node or ModelArts)."""
    return platform_of(dag_id) == "vertex"


#: The name prefix of the stack DAGs' ModelArts jobs (tests/stack/dags/stack_training.py's ``name``).
MODELARTS_NAME = "stack-digits"


def modelarts_job_prefix(dag_id: str, run_id: str) -> str:
    """The name every ModelArts job of the run starts with: ``<name>-<8 hex of the task instance>-a`` (the attempt's
    number follows; ``specs.modelarts.attempt_job_name``)."""
    from airflow_provider_resilient.backends.modelarts import run_key
    from airflow_provider_resilient.specs.modelarts import attempt_job_name

    return attempt_job_name(MODELARTS_NAME, run_key(job_labels(dag_id, TASK, run_id, -1, None)), 0)[:-1]


def modelarts_jobs_of(stack: NativeStack, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """The run's ModelArts training jobs (id as ``name``, phase as ``state``, attempt from the job's name), oldest
    first: the emulator's control API ``GET /modelarts-jobs`` lists them in creation order (jobs are never removed)."""
    prefix = modelarts_job_prefix(dag_id, run_id)
    return [{"name": job["id"], "job_name": job["name"], "state": job["phase"],
             "attempt": job["name"][len(prefix):], "created": order}
            for order, job in enumerate(stack.emulator_get("/modelarts-jobs")) if job["name"].startswith(prefix)]


def jobs_of(stack: NativeStack, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """The run's CustomJobs -- or ModelArts training jobs -- (name, state, attempt label), oldest first."""
    if platform_of(dag_id) == "modelarts":
        return modelarts_jobs_of(stack, dag_id, run_id)
    from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

    label = run_label(dag_id, run_id)
    found = []
    for region in ("us-central1", "europe-west4"):
        client = vertex_job_client(region, emulator=stack.emulator_env["RESILIENT_EMULATOR_HOST"])
        for job in client.list_custom_jobs(request={"parent": f"projects/resilient-demo/locations/{region}",
                                                    "filter": f'labels.airflow-run="{label}"'}):
            found.append({"name": job.name, "state": job.state.name, "attempt": job.labels[LABEL_ATTEMPT],
                          "created": job.create_time.timestamp()})
        client.transport.close()
    return sorted(found, key=lambda j: j["created"])


def checkpoint_dir(dag_id: str, run_id: str) -> str:
    """Where the stack DAGs (tests/stack/dags/stack_training.py) write a run's checkpoints: Cloud Storage, or OBS for
    ModelArts."""
    platform = platform_of(dag_id)
    if platform == "modelarts":
        return f"obs://resilient-stack/modelarts/{run_id}/checkpoints/"
    return f"gs://resilient-stack/{platform}/{run_id}/checkpoints/"


def _object_names(stack: NativeStack, url: str) -> list[str]:
    """The objects under a ``gs://`` or ``obs://`` prefix in the stack's emulator, read with the storage's own listing
    (Cloud Storage's JSON API objects.list; OBS's S3 ListObjectsV2, page by page); [] when the bucket is not there
    yet (nothing written)."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request
    import xml.etree.ElementTree as ET

    scheme, _, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    names: list[str] = []
    try:
        if scheme == "gs":
            query = urllib.parse.urlencode({"prefix": prefix, "maxResults": 1000})
            with urllib.request.urlopen(f"{stack.emulator_env['STORAGE_EMULATOR_HOST'].rstrip('/')}/storage/v1/b/"
                                        f"{bucket}/o?{query}", timeout=10) as reply:
                return [item["name"] for item in json.load(reply).get("items", [])]
        token = None
        while True:
            params = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
            endpoint = stack.emulator_env["OBS_ENDPOINT"].rstrip("/")
            with urllib.request.urlopen(f"{endpoint}/{bucket}?{urllib.parse.urlencode(params)}", timeout=10) as reply:
                root = ET.fromstring(reply.read())
            names += [el.text or "" for el in root.iter() if el.tag.endswith("}Key") or el.tag == "Key"]
            token = next((el.text for el in root.iter() if el.tag.endswith("NextContinuationToken")), None)
            if not token:
                return names
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # the bucket is not there yet: nothing written
            return []
        raise


def latest_step(stack: NativeStack, dag_id: str, run_id: str) -> int | None:
    """The newest step the run's workload has committed (``step_N/COMMITTED``, its marker written last) in the
    stack's Cloud Storage (or OBS, for ModelArts); None before the first."""
    import re

    names = _object_names(stack, checkpoint_dir(dag_id, run_id))
    steps = [int(m[1]) for name in names if (m := re.search(r"/step_(\d+)/COMMITTED$", name))]
    return max(steps) if steps else None


def nodes_of(stack: NativeStack, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    label = run_label(dag_id, run_id)
    return [n for n in stack.emulator_get("/nodes")["nodes"] if n["labels"].get("airflow-run") == label]


LIVE_JOB_STATES = {"JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING"}
#: A ModelArts training job's phases until it has ended ("Terminating" still runs, and bills).
LIVE_MODELARTS_PHASES = {"Creating", "Pending", "Running", "Terminating"}


def live(stack: NativeStack, dag_id: str, run_id: str) -> list[str]:
    """The run's jobs not yet ended and nodes not yet gone (a DELETING node counts: it still bills)."""
    platform = platform_of(dag_id)
    if platform == "vertex":
        return [j["name"] for j in jobs_of(stack, dag_id, run_id) if j["state"] in LIVE_JOB_STATES]
    if platform == "modelarts":
        return [j["name"] for j in jobs_of(stack, dag_id, run_id) if j["state"] in LIVE_MODELARTS_PHASES]
    return [n["name"] for n in nodes_of(stack, dag_id, run_id)]


def tpu_attempt_of(dag_id: str, run_id: str, node_id: str) -> str | None:
    """The attempt number (as a string) whose node id (``node_id_for``: ``<base>-a<attempt>``) ``node_id`` is, for
    the run; None for another run's node. Any attempt: a create refused for quota is one too, and a Celery-stack run
    of 2026-11-28 whose deferrable TPU run waited out a quota outage through a worker's kill made 46 of them."""
    base = node_id_for(None, dag_id, TASK, run_id, -1, 1).removesuffix("-a1")
    attempt = node_id.removeprefix(f"{base}-a")
    return attempt if attempt != node_id and attempt.isdigit() else None


def created_per_attempt(stack: NativeStack, dag_id: str, run_id: str) -> dict[str, int]:
    """How many jobs / nodes carry each attempt label (1 each: no duplicate)."""
    if platform_of(dag_id) != "tpu":
        attempts = [j["attempt"] for j in jobs_of(stack, dag_id, run_id)]
    else:  # deleted nodes leave the listing: count the CreateNode calls that created one
        attempts = [attempt for c in stack.emulator_get("/calls?method=CreateNode") if c["code"] == "OK"
                    and (attempt := tpu_attempt_of(dag_id, run_id, c["resource"].rsplit("/", 1)[1])) is not None]
    counts: dict[str, int] = {}
    for attempt in attempts:
        counts[attempt] = counts.get(attempt, 0) + 1
    return counts


# ------------------------------------------------------------------ a person's browser
def chromium(url: str, *, screenshot: Path | None = None, width: int = 1500, height: int = 1000,
             budget_ms: int = 20000) -> str:
    """Open ``url`` in headless Chromium (Debian's ``chromium``), let the page's scripts run for ``budget_ms``
    of virtual time, and return the rendered DOM; with ``screenshot``, also save a PNG of the page there."""
    import shutil
    import subprocess

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "no chromium: apt-get install chromium (.ci/run installs it)"
    common = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
              f"--window-size={width},{height}", f"--virtual-time-budget={budget_ms}"]
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*common, f"--screenshot={screenshot}", url], check=True, capture_output=True, timeout=180)
    return subprocess.run([*common, "--dump-dom", url], check=True, capture_output=True, text=True,
                          timeout=180).stdout
