"""``python -m airflow_provider_resilient.testing.emulator`` (also ``resilient-emulator``): run standalone.

Prints the endpoints and the ``export`` lines that point the provider's clients and gcsfs at it, then
serves until interrupted (Ctrl-C or SIGTERM), killing every replica process on the way out.

In a container, serve every interface on fixed ports under the name other containers use, e.g.
``--host 0.0.0.0 --advertise-host emulator --port 8470 --control-port 8471 --storage-port 9023
--modelarts-port 8472 --obs-port 9024``: the
exports (and the replicas' environment) then name ``emulator``.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path

from .config import EmulatorConfig
from .faults import FaultPlan
from .server import Emulator


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="resilient-emulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; 0.0.0.0: every interface, e.g. in a container)")
    parser.add_argument("--advertise-host",
                        help="host name clients reach it by, used in the printed endpoints and exports and in the "
                             "replicas' environment (default: --host, or 127.0.0.1 when --host is 0.0.0.0)")
    parser.add_argument("--port", type=int, default=0, help="gRPC port (default: a free one)")
    parser.add_argument("--control-port", type=int, default=0, help="HTTP control API port (default: a free one)")
    parser.add_argument("--storage-port", type=int, default=0, help="Cloud Storage port (default: a free one)")
    parser.add_argument("--modelarts-port", type=int, default=0,
                        help="Huawei Cloud ModelArts REST API port (default: a free one)")
    parser.add_argument("--obs-port", type=int, default=0,
                        help="Huawei Cloud OBS (S3 API) port, where ModelArts jobs write obs:// checkpoints (default: "
                             "a free one)")
    parser.add_argument("--fault-plan", type=Path, help="YAML or JSON fault plan")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="multiply platform latencies by this (e.g. 0.01 for tests)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of fault probability draws (of the plan's faults and of faults added through "
                             "POST /faults), job ids and tuning parameters; it wins over the plan's 'seed' "
                             "(default: the plan's seed, 0 without a plan)")
    parser.add_argument("--work-dir", type=Path, help="where replica logs go (default: a temporary directory)")
    return parser


def build(argv: list[str] | None = None) -> Emulator:
    """The (not yet started) emulator the command line ``argv`` describes; exits with a usage error on a
    bad fault plan."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        plan = FaultPlan.load(args.fault_plan) if args.fault_plan else None
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    config = EmulatorConfig(time_scale=args.time_scale, seed=args.seed)  # None: the plan's seed
    return Emulator(host=args.host, port=args.port, fault_plan=plan, config=config, work_dir=args.work_dir,
                    control_port=args.control_port, storage_port=args.storage_port,
                    advertise_host=args.advertise_host, modelarts_port=args.modelarts_port,
                    obs_port=args.obs_port)


def main(argv: list[str] | None = None) -> int:
    emulator = build(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with emulator:
        print(f"Vertex AI JobService (gRPC): {emulator.address}")
        print(f"Cloud Storage (HTTP):        {emulator.storage_url or '-'}")
        print(f"ModelArts (HTTP, REST v2):   {emulator.modelarts_url}")
        print(f"OBS (HTTP, S3 API):          {emulator.env().get('OBS_ENDPOINT', '-')}")
        print(f"Control API (HTTP):          {emulator.control_url}")
        print("  GET /calls[?method=M], /faults, /jobs, /nodes, /modelarts-jobs; POST /faults (a fault as JSON), "
              '/faults/end ({"index": i}), /reset')
        print(f"Replica logs:                {emulator.work_dir}")
        print("Point the provider's operators (Airflow connections google_cloud_default and huaweicloud_default) "
              "and gcsfs at it:")
        for key, value in emulator.env().items():
            print(f"  export {key}={shlex.quote(value)}")
        sys.stdout.flush()
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
