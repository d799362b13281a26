"""Start the emulator, submit a CustomJob with the real google-cloud-aiplatform client, watch it end.

    python examples/emulator_quickstart.py                                # SUCCEEDED
    python examples/emulator_quickstart.py --fault-plan examples/crash_139.yaml
                                                                          # 3 platform retries, FAILED

The job runs a Python one-liner as its replica's command (the container image is ignored).
"""

from __future__ import annotations

import argparse
import os
import time

from airflow_provider_resilient.testing.emulator import Emulator, EmulatorConfig, FaultPlan
from airflow_provider_resilient.testing.emulator_clients import vertex_job_client

PARENT = "projects/demo-project/locations/us-central1"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fault-plan", help="YAML or JSON fault plan")
    parser.add_argument("--time-scale", type=float, default=0.01, help="platform latency multiplier")
    args = parser.parse_args()
    plan = FaultPlan.load(args.fault_plan) if args.fault_plan else None

    with Emulator(fault_plan=plan, config=EmulatorConfig(time_scale=args.time_scale)) as emulator:
        # The connection google_cloud_default with extra emulator_host: the provider's operators use the emulator.
        os.environ.update(emulator.env())
        client = vertex_job_client("us-central1", emulator=emulator.address)  # the real client, on the emulator
        job = client.create_custom_job(parent=PARENT, custom_job={
            "display_name": "quickstart",
            "job_spec": {"worker_pool_specs": [{
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {
                    "image_uri": "python:3.11",
                    "command": ["python", "-c", "import time; time.sleep(0.5); print('hello from the replica')"],
                },
            }]},
        })
        print(f"created {job.name}")
        state = None
        while True:
            job = client.get_custom_job(name=job.name)
            if job.state != state:
                state = job.state
                print(f"  {time.strftime('%H:%M:%S')} {state.name}")
            if state.name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"):
                break
            time.sleep(0.05)
        print("platform events:")
        for event in emulator.job_events(job.name):
            print(f"  {event}")
        if job.error.message:
            print(f"final error (code {job.error.code}): {job.error.message}")
        print(f"terminal state: {job.state.name}")
        client.transport.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
